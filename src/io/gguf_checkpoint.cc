// io/gguf_checkpoint.cc — a GGUF model as a Checkpoint: split files, then everything
// its architecture's dialect (io/gguf_dialect.h, one file per general.architecture) says:
// tensors renamed to Hugging Face names and rewritten where llama.cpp's converter
// changed them, config.json derived from the metadata (llama.cpp's key names), and the
// token ids from tokenizer.ggml.*.
#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>

#include "io/checkpoint.h"
#include "io/gguf.h"
#include "io/gguf_dialect.h"
#include "io/gguf_metadata.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "util/error.h"

namespace nextn {
namespace {

namespace fs = std::filesystem;

// The files of a model: FILE-00001-of-0000N.gguf expands to all N splits.
std::vector<std::string> split_paths(const std::string& path) {
  static const std::regex split(R"((.*)-(\d{5})-of-(\d{5})\.gguf)");
  std::smatch m;
  const std::string name = fs::path(path).filename().string();
  if (!std::regex_match(name, m, split)) return {path};
  const int count = std::stoi(m[3].str());
  if (count < 1) fail(ErrorKind::kBadInput, "{}: split count 0 in the file name", path);
  std::vector<std::string> paths;
  for (int i = 1; i <= count; ++i) {
    char part[32];
    std::snprintf(part, sizeof(part), "-%05d-of-%05d.gguf", i, count);
    paths.push_back((fs::path(path).parent_path() / (m[1].str() + part)).string());
  }
  return paths;
}

}  // namespace

std::unique_ptr<Checkpoint> Checkpoint::open_gguf(const std::string& path) {
  std::unique_ptr<Checkpoint> ckpt(new Checkpoint());
  ckpt->dir_ = path;
  ckpt->tensor_source_ = path;
  const std::vector<std::string> paths = split_paths(path);
  for (const std::string& p : paths) {
    auto file = GgufFile::open(p);
    if (paths.size() > 1 && file->metadata().contains("split.count") &&
        file->metadata()["split.count"] != static_cast<uint64_t>(paths.size()))
      fail(ErrorKind::kBadInput, "{}: split.count is {} but the file name says {}", p,
           json_text(file->metadata()["split.count"]), paths.size());
    ckpt->gguf_files_.push_back(std::move(file));
  }
  size_t n_tensors = 0;
  for (const auto& file : ckpt->gguf_files_) n_tensors += file->tensors().size();
  if (n_tensors == 0) fail(ErrorKind::kBadInput, "{}: the file holds no tensors (a vocabulary-only GGUF is not a model)", path);
  const GgufFile& first = *ckpt->gguf_files_.front();
  const nlohmann::json& kv = first.metadata();
  if (!kv.contains("general.architecture") || !kv["general.architecture"].is_string())
    fail(ErrorKind::kBadInput, "{}: missing metadata key 'general.architecture'", path);
  const std::string arch = kv["general.architecture"].get<std::string>();
  const GgufMetadata md(kv, path, arch);
  std::map<std::string, std::string> owner;  // HF tensor name → file
  auto add = [&](const std::string& file_path, const std::string& gguf_name, TensorView view) {
    auto [it, inserted] = owner.emplace(view.name, file_path);
    if (!inserted) fail(ErrorKind::kBadInput, "{}: tensor '{}' is also stored in {}", file_path, gguf_name, it->second);
    ckpt->tensors_.push_back(std::move(view));
  };
  auto finish = [&]() {
    std::sort(ckpt->tensors_.begin(), ckpt->tensors_.end(),
              [](const TensorView& a, const TensorView& b) { return a.name < b.name; });
  };
  auto token_ids = [&]() {
    for (const char* key : {"bos_token_id", "eos_token_id"}) {
      const std::string full = std::string("tokenizer.ggml.") + key;
      if (kv.contains(full) && kv[full].is_number_integer()) ckpt->config_[key] = kv[full];
    }
    ckpt->generation_config_ = nlohmann::json::object();
  };

  const GgufDialect* dialect = gguf_dialect(arch, kv);
  if (!dialect) {
    std::vector<std::string> names = gguf_dialect_archs();
    std::sort(names.begin(), names.end());
    std::string supported;
    for (const std::string& name : names) supported += (supported.empty() ? "" : ", ") + name;
    std::string what = arch;
    if (arch == "clip")
      what += fmt::format(" (projector type '{}')", kv.value("clip.vision.projector_type",
                                                               kv.value("clip.projector_type", std::string("none"))));
    fail(ErrorKind::kUnsupported, "{}: GGUF architecture '{}' is not supported (supported: {})", path, what, supported);
  }
  std::map<std::string, const TensorView*> by_gguf_name;
  for (const auto& file : ckpt->gguf_files_)
    for (const TensorView& t : file->tensors()) {
      by_gguf_name[t.name] = &t;
      const std::string hf = dialect->hf_name(t.name);
      if (hf.empty()) continue;  // tensors the model never reads (config() may consume them)
      add(file->path(), t.name, dialect->read_tensor(t, hf, md, ckpt->owned_));
    }
  for (TensorView& view : dialect->joined(by_gguf_name, md, ckpt->owned_)) add(path, view.name, std::move(view));
  for (const auto& file : ckpt->gguf_files_)
    for (const RawTensor& t : file->raw_tensors()) {
      const std::string hf = dialect->hf_name(t.name);
      if (hf.empty()) continue;
      if (ckpt->other_tensors_.count(hf) || owner.count(hf))
        fail(ErrorKind::kBadInput, "{}: tensor '{}' appears twice", file->path(), t.name);
      ckpt->other_tensors_[hf] = dialect->read_raw(t, hf, md, ckpt->owned_);
    }
  finish();
  ckpt->config_ = dialect->config(md, by_gguf_name);
  token_ids();
  return ckpt;
}

}  // namespace nextn
