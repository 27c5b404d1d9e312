// io/checkpoint.cc — resolving and validating a Hugging Face checkpoint directory.
#include "io/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "io/gguf.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "util/error.h"

namespace nextn {

namespace fs = std::filesystem;

Checkpoint::~Checkpoint() = default;

std::unique_ptr<Checkpoint> Checkpoint::open(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) fail(ErrorKind::kNotFound, "{}: model directory not found", dir);
  if (fs::is_regular_file(dir, ec) && fs::path(dir).extension() == ".gguf") return open_gguf(dir);
  if (!fs::is_directory(dir, ec)) fail(ErrorKind::kBadInput, "{}: not a directory or .gguf file", dir);
  if (!fs::exists(fs::path(dir) / "config.json", ec)) {
    // A directory holding a GGUF file (or the splits of one) instead of a checkpoint.
    std::vector<std::string> ggufs;
    for (const auto& entry : fs::directory_iterator(dir, ec))
      if (entry.path().extension() == ".gguf") ggufs.push_back(entry.path().string());
    std::sort(ggufs.begin(), ggufs.end());
    if (!ggufs.empty()) {
      auto ckpt = open_gguf(ggufs.front());
      if (ckpt->gguf_files_.size() != ggufs.size())
        fail(ErrorKind::kBadInput, "{}: holds {} GGUF files that are not the splits of one model; name the file to load",
             dir, ggufs.size());
      return ckpt;
    }
  }

  std::unique_ptr<Checkpoint> ckpt(new Checkpoint());
  ckpt->dir_ = dir;
  const fs::path root(dir);
  const std::string config_path = (root / "config.json").string();
  ckpt->config_ = read_json_file(config_path);
  if (!ckpt->config_.is_object()) fail(ErrorKind::kBadInput, "{}: expected a JSON object", config_path);
  const fs::path gen_path = root / "generation_config.json";
  if (fs::exists(gen_path, ec)) {
    ckpt->generation_config_ = read_json_file(gen_path.string());
    if (!ckpt->generation_config_.is_object())
      fail(ErrorKind::kBadInput, "{}: expected a JSON object", gen_path.string());
  } else {
    ckpt->generation_config_ = nlohmann::json::object();
  }

  const fs::path index_path = root / "model.safetensors.index.json";
  const fs::path single_path = root / "model.safetensors";
  // Which tensors each file must hold (sharded checkpoints only).
  std::map<std::string, std::vector<std::string>> expected_by_file;
  std::vector<std::string> files;
  if (fs::exists(index_path, ec)) {
    const std::string index_name = index_path.string();
    ckpt->tensor_source_ = index_name;
    nlohmann::json index = read_json_file(index_name);
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      fail(ErrorKind::kBadInput, "{}: missing key 'weight_map' (an object of tensor name -> file)", index_name);
    for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) {
      if (!it.value().is_string())
        fail(ErrorKind::kBadInput, "{}: weight_map entry '{}' is not a file name", index_name, it.key());
      std::string file = it.value().get<std::string>();
      if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..")
        fail(ErrorKind::kBadInput, "{}: weight_map entry '{}' names an invalid file '{}'", index_name, it.key(), file);
      if (!expected_by_file.count(file)) files.push_back(file);
      expected_by_file[file].push_back(it.key());
    }
    if (files.empty()) fail(ErrorKind::kBadInput, "{}: weight_map is empty", index_name);
  } else if (fs::exists(single_path, ec)) {
    ckpt->tensor_source_ = single_path.string();
    files.push_back("model.safetensors");
  } else {
    fail(ErrorKind::kNotFound, "{}: no model.safetensors or model.safetensors.index.json", dir);
  }

  std::map<std::string, std::string> owner;  // tensor -> file path, to catch duplicates
  for (const std::string& name : files) {
    const std::string path = (root / name).string();
    auto file = SafetensorsFile::open(path);
    std::set<std::string> present;
    for (const TensorView& t : file->tensors()) {
      auto [it, inserted] = owner.emplace(t.name, path);
      if (!inserted) fail(ErrorKind::kBadInput, "{}: tensor '{}' is also stored in {}", path, t.name, it->second);
      present.insert(t.name);
      ckpt->tensors_.push_back(t);
    }
    for (const auto& [tname, raw] : file->other_tensors()) {
      auto [it, inserted] = owner.emplace(tname, path);
      if (!inserted) fail(ErrorKind::kBadInput, "{}: tensor '{}' is also stored in {}", path, tname, it->second);
      present.insert(tname);
      ckpt->other_tensors_[tname] = raw;
    }
    auto expected = expected_by_file.find(name);
    if (expected != expected_by_file.end()) {
      for (const std::string& tname : expected->second)
        if (!present.count(tname))
          fail(ErrorKind::kBadInput, "{}: tensor '{}' is listed in model.safetensors.index.json but missing from the file",
               path, tname);
    }
    ckpt->files_.push_back(std::move(file));
  }
  std::sort(ckpt->tensors_.begin(), ckpt->tensors_.end(),
            [](const TensorView& a, const TensorView& b) { return a.name < b.name; });
  ckpt->convert_fp8_weights();
  return ckpt;
}

const nlohmann::json* Checkpoint::gguf_metadata() const {
  return gguf_files_.empty() ? nullptr : &gguf_files_.front()->metadata();
}

const TensorView* Checkpoint::find(const std::string& name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const TensorView& t, const std::string& n) { return t.name < n; });
  if (it == tensors_.end() || it->name != name) return nullptr;
  return &*it;
}

const RawTensor* Checkpoint::find_raw(const std::string& name) const {
  auto it = other_tensors_.find(name);
  return it == other_tensors_.end() ? nullptr : &it->second;
}

bool Checkpoint::has(const std::string& name) const { return find(name) != nullptr || other_tensors_.count(name); }

const TensorView& Checkpoint::require(const std::string& name, const std::vector<int64_t>& shape) const {
  const TensorView* t = find(name);
  if (!t) {
    if (const RawTensor* raw = find_raw(name))
      fail(ErrorKind::kBadInput, "{}: tensor '{}' has dtype {}, expected F32, F16 or BF16", raw->file, name, raw->dtype);
    fail(ErrorKind::kBadInput, "{}: missing tensor '{}'", tensor_source_, name);
  }
  if (t->shape != shape) {
    TensorView expected;
    expected.shape = shape;
    fail(ErrorKind::kBadInput, "{}: tensor '{}' has shape {}, expected {}", t->file, name, t->shape_string(),
         expected.shape_string());
  }
  return *t;
}

std::vector<std::string> Checkpoint::tensor_names() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size() + other_tensors_.size());
  for (const TensorView& t : tensors_) names.push_back(t.name);
  for (const auto& [name, raw] : other_tensors_) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace nextn
