// cli/debug_logits.cc — `nextn debug-logits`: runs the forward pass on given token ids
// and writes logits / hidden states as .npy files for comparison with the numpy
// reference (tests/reference/numpy_model.py, tests/model/test_reference.py). Prefill in chunks, greedy decode, and optionally MTP layer 0 logits
// or a DFlash drafter's block logits after the prompt. With --image (vision-language
// checkpoints: Qwen3.5, Gemma 4) each image_token_id in the prompt is one image: it is
// expanded to the encoder's placeholder (Gemma 4: <|image> <|image|>×N <image|>), those
// rows take the vision tower's output and, under M-RoPE (Qwen3.5), the prompt gets 3-axis
// positions (model/mrope.h); decode continues at rope_delta.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/npy.h"
#include "io/checkpoint.h"
#include "io/json_file.h"
#include "kernels/kernels.h"
#include "model/dflash_model.h"
#include "model/drafter_config.h"
#include "model/gemma4_assistant.h"
#include "model/model.h"
#include "model/mrope.h"
#include "model/mtp_head.h"
#include "util/error.h"
#include "util/file.h"
#include "util/thread_pool.h"
#include "vision/image.h"
#include "vision/qwen_processor.h"
#include "vision/qwen_vision.h"

namespace nextn {
namespace {

struct DebugLogitsFlags {
  std::string model_dir;
  std::string prompt_tokens;
  int decode = 0;
  int chunk = 0;
  bool mtp = false;
  std::string assistant_dir;
  int assistant_steps = 4;
  std::string eagle3_dir;
  std::string dflash_dir;
  int dflash_block = 0;
  int threads = 0;
  std::string kv_type = "f32";
  bool mmap_weights = false;
  std::vector<std::string> images;
  std::string mmproj;
  int image_min_tokens = 0;
  int image_max_tokens = 0;
  std::string out;
};

// The prompt with each image placeholder expanded, the images' rows and placements.
struct PromptImages {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> features;  // per image [rows, hidden]
  std::vector<ImageRows> placements;
  std::vector<int32_t> positions;  // [tokens × 3]
  int rope_delta = 0;
};

PromptImages expand_images(const DebugLogitsFlags& f, const Model& model, const std::vector<int32_t>& prompt) {
  const ModelConfig& c = model.config();
  if (c.image_token_id < 0) fail(ErrorKind::kBadInput, "--image: {} has no image_token_id", f.model_dir);
  vision::EncoderOptions options;
  options.min_tokens = f.image_min_tokens;
  options.max_tokens = f.image_max_tokens;
  auto encoder = vision::load_vision_encoder(Checkpoint::open(f.mmproj.empty() ? f.model_dir : f.mmproj),
                                             {c.image_token_id, c.vision_start_token_id, c.vision_end_token_id}, options);
  if (!encoder) fail(ErrorKind::kBadInput, "--image: {} has no vision tower", f.model_dir);
  const vision::ImagePlaceholder mark = encoder->placeholder();
  PromptImages out;
  size_t next = 0;
  for (int32_t t : prompt) {
    if (t != mark.token) {
      out.tokens.push_back(t);
      continue;
    }
    if (next == f.images.size())
      fail(ErrorKind::kBadInput, "--prompt-tokens holds more image tokens ({}) than --image files ({})", mark.token,
           f.images.size());
    const std::string bytes = read_file(f.images[next++]);
    vision::ImageLimits limits;
    limits.max_bytes = bytes.size();
    const vision::ProcessedImage image =
        encoder->process(vision::decode_image(bytes, vision::media_type_of(vision::sniff_image_format(bytes)), limits));
    if (mark.begin >= 0) out.tokens.push_back(mark.begin);
    ImageRows place{int(out.tokens.size()), image.tokens_h, image.tokens_w};
    out.features.push_back(encoder->encode(image));
    out.tokens.insert(out.tokens.end(), size_t(image.n_tokens()), mark.token);
    if (mark.end >= 0) out.tokens.push_back(mark.end);
    out.placements.push_back(place);
  }
  if (next != f.images.size())
    fail(ErrorKind::kBadInput, "{} --image files but {} image tokens ({}) in --prompt-tokens", f.images.size(), next,
         mark.token);
  if (!c.mrope_axes.empty()) out.rope_delta = mrope_positions(int(out.tokens.size()), out.placements, out.positions);
  return out;
}

std::vector<int32_t> parse_tokens(const std::string& text) {
  std::vector<int32_t> tokens;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      long v = std::stol(item, &used);
      if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(item);
      tokens.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      fail(ErrorKind::kBadInput, "--prompt-tokens: '{}' is not a token id", item);
    }
  }
  if (tokens.empty()) fail(ErrorKind::kBadInput, "--prompt-tokens: no tokens given");
  return tokens;
}

int run_debug_logits(const DebugLogitsFlags& f) {
  if (f.threads > 0) ThreadPool::set_global_threads(f.threads);
  if (f.decode < 0) fail(ErrorKind::kBadInput, "--decode must be >= 0");
  if (f.chunk < 0) fail(ErrorKind::kBadInput, "--chunk must be >= 0");
  std::vector<int32_t> prompt = parse_tokens(f.prompt_tokens);
  KvOptions kv_options;
  kv_options.type = parse_kv_type(f.kv_type);
  LoadOptions load;
  load.copy_weights = !f.mmap_weights;
  std::unique_ptr<Model> model = Model::load(f.model_dir, load);
  PromptImages images;
  if (!f.images.empty()) {
    if (f.mtp || !f.assistant_dir.empty() || !f.eagle3_dir.empty() || !f.dflash_dir.empty())
      fail(ErrorKind::kBadInput, "--image: drafters' outputs are not written with images");
    images = expand_images(f, *model, prompt);
    prompt = images.tokens;
    if (!images.positions.empty())
      write_npy_file(f.out + ".positions.npy", "<i4", {prompt.size(), 3}, images.positions.data(), 4);
  }
  const int V = model->config().vocab_size, H = model->config().hidden_size;
  const int n_prompt = static_cast<int>(prompt.size());

  std::unique_ptr<MtpHead> assistant;
  std::unique_ptr<Gemma4Assistant> gemma_assistant;
  MtpHead* mtp = nullptr;
  if (!f.assistant_dir.empty() && Gemma4Assistant::is_gemma4_assistant(drafter_config(f.assistant_dir))) {
    gemma_assistant = Gemma4Assistant::load(f.assistant_dir, *model);
  } else if (!f.assistant_dir.empty()) {
    assistant = MtpHead::load_assistant(f.assistant_dir, *model);
    mtp = assistant.get();
  } else if (f.mtp) {
    mtp = model->mtp_head();
    if (!mtp && !model->config().mtp_unavailable.empty())
      fail(ErrorKind::kUnsupported, "--mtp: {}", model->config().mtp_unavailable);
    if (!mtp) fail(ErrorKind::kBadInput, "{}: --mtp given but the checkpoint has no MTP layers", f.model_dir);
  }

  if (!f.eagle3_dir.empty() && !f.dflash_dir.empty())
    fail(ErrorKind::kBadInput, "--eagle3 and --dflash read different target layers: give one of them");
  std::unique_ptr<MtpHead> eagle3;
  std::vector<float> streams;  // [n_prompt, captured streams × H]: the EAGLE-3 head's input
  if (!f.eagle3_dir.empty()) {
    eagle3 = MtpHead::load_eagle3(f.eagle3_dir, *model);
    model->capture_streams(eagle3->target_streams());
  }
  const size_t stream_floats = model->captured_streams().size() * size_t(H);
  // DFlash: its context is filled chunk by chunk from the target's residual streams.
  std::unique_ptr<DFlashModel> dflash;
  DFlashContext dflash_context;
  if (!f.dflash_dir.empty()) {
    dflash = DFlashModel::load(f.dflash_dir, *model);
    const int block = f.dflash_block > 0 ? f.dflash_block : dflash->block_size();
    if (block < 2 || block > dflash->block_size())
      fail(ErrorKind::kBadInput, "--dflash-block must be in 2..{} (the drafter's block_size), got {}", dflash->block_size(),
           block);
    model->capture_streams(dflash->streams());
    dflash_context = dflash->new_context();
  }

  auto kv = model->new_state(n_prompt + f.decode + 1, kv_options);
  std::vector<float> prefill(size_t(n_prompt) * V), hidden(size_t(n_prompt) * H);
  const int chunk = f.chunk == 0 ? n_prompt : f.chunk;
  ForwardResult result;
  for (int start = 0; start < n_prompt; start += chunk) {
    const int n = std::min(chunk, n_prompt - start);
    SequenceRows rows;
    rows.state = kv.get();
    rows.tokens = std::span<const int32_t>(prompt.data() + start, n);
    for (int i = 0; i < n; ++i) rows.logit_rows.push_back(i), rows.hidden_rows.push_back(i);
    if (!images.positions.empty())
      rows.positions = std::span<const int32_t>(images.positions.data() + size_t(start) * 3, size_t(n) * 3);
    for (size_t i = 0; i < images.placements.size(); ++i) {  // the part of each image inside the chunk
      const ImageRows& p = images.placements[i];
      const int lo = std::max(p.row, start), hi = std::min(p.row + p.grid_h * p.grid_w, start + n);
      if (lo < hi && model->config().image_bidirectional && hi - lo != p.grid_h * p.grid_w)
        fail(ErrorKind::kBadInput, "--chunk {} splits image {} (rows {}..{}), which this model attends to as a whole",
             chunk, i, p.row, p.row + p.grid_h * p.grid_w - 1);
      if (lo < hi)
        rows.embeddings.push_back({lo - start, hi - lo, images.features[i].data() + size_t(lo - p.row) * H});
    }
    model->forward(std::span<SequenceRows>(&rows, 1), result);
    std::copy(result.logits.begin(), result.logits.end(), prefill.begin() + size_t(start) * V);
    std::copy(result.hidden_post.begin(), result.hidden_post.end(), hidden.begin() + size_t(start) * H);
    streams.insert(streams.end(), result.streams.begin(), result.streams.end());
    if (dflash) dflash->add_context(dflash_context, result.streams.data(), n);
  }
  write_npy_file(f.out + ".prefill.npy", "<f4", {size_t(n_prompt), size_t(V)}, prefill.data(), 4);
  write_npy_file(f.out + ".hidden.npy", "<f4", {size_t(n_prompt), size_t(H)}, hidden.data(), 4);

  // Gemma 4 assistant: greedy draft steps from the end of the prompt (and after the
  // decode), over the target's KV at its last position.
  auto assistant_drafts = [&](int32_t token, const float* h, const std::string& path) {
    std::vector<float> logits(size_t(f.assistant_steps) * V), cur(h, h + H), next(size_t(H), 0.0f);
    for (int s = 0; s < f.assistant_steps; ++s) {
      float* row = logits.data() + size_t(s) * V;
      gemma_assistant->step(*kv, token, cur.data(), row, next.data());
      token = argmax(row, V);
      cur.swap(next);
    }
    write_npy_file(path, "<f4", {size_t(f.assistant_steps), size_t(V)}, logits.data(), 4);
  };
  if (gemma_assistant)
    assistant_drafts(argmax(prefill.data() + size_t(n_prompt - 1) * V, V), hidden.data() + size_t(n_prompt - 1) * H,
                     f.out + ".assistant.npy");

  if (eagle3) {
    // EAGLE-3: rows p = 0..n-1 consume (g_p, x_{p+1}) at position p (the last row pairs with
    // the greedy next token), then `assistant_steps` - 1 chained steps feed back the
    // drafted token and the head's output; logits over the draft vocabulary.
    const int G = eagle3->input_width();
    std::vector<float> g(size_t(n_prompt) * G);
    eagle3->project_target(streams.data(), n_prompt, g.data());
    std::vector<int32_t> next_tokens(prompt.begin() + 1, prompt.end());
    next_tokens.push_back(argmax(prefill.data() + size_t(n_prompt - 1) * V, V));
    auto state = eagle3->new_state(n_prompt + f.assistant_steps + 1, kv_options);
    std::vector<int> logit_rows(static_cast<size_t>(n_prompt), 0);
    for (int i = 0; i < n_prompt; ++i) logit_rows[size_t(i)] = i;
    std::vector<float> logits, step_logits, out;
    eagle3->forward(0, *state, g.data(), next_tokens, logit_rows, logits, out);
    const std::span<const int32_t> ids = eagle3->draft_ids();
    const int Vd = int(logits.size() / size_t(n_prompt));
    std::vector<float> h(out.end() - G, out.end());
    for (int s = 1; s < f.assistant_steps; ++s) {
      const int32_t best = argmax(logits.data() + logits.size() - size_t(Vd), Vd);
      const int32_t token = ids.empty() ? best : ids[size_t(best)];
      eagle3->forward(0, *state, h.data(), std::span<const int32_t>(&token, 1), {0}, step_logits, out);
      logits.insert(logits.end(), step_logits.begin(), step_logits.end());
      h.assign(out.begin(), out.end());
    }
    write_npy_file(f.out + ".eagle3.npy", "<f4", {logits.size() / size_t(Vd), size_t(Vd)}, logits.data(), 4);
    if (stream_floats > 0)
      write_npy_file(f.out + ".streams.npy", "<f4", {size_t(n_prompt), stream_floats}, streams.data(), 4);
  }

  // DFlash: the block [argmax of the last prompt row, M, …] at the prompt's end; the rows
  // of slots 1..B-1.
  if (dflash) {
    const int block = f.dflash_block > 0 ? f.dflash_block : dflash->block_size();
    std::vector<int32_t> tokens(size_t(block), dflash->mask_token());
    tokens[0] = argmax(prefill.data() + size_t(n_prompt - 1) * V, V);
    const DFlashBlock b{&dflash_context, tokens};
    std::vector<float> logits;
    dflash->draft_blocks(std::span<const DFlashBlock>(&b, 1), logits);
    write_npy_file(f.out + ".dflash.npy", "<f4", {size_t(block - 1), size_t(V)}, logits.data(), 4);
  }

  std::vector<float> decode(size_t(f.decode) * V);
  std::vector<float> last_hidden(hidden.end() - H, hidden.end());
  std::vector<int32_t> tokens(f.decode);
  int32_t next = argmax(prefill.data() + size_t(n_prompt - 1) * V, V);
  for (int step = 0; step < f.decode; ++step) {
    tokens[step] = next;
    SequenceRows rows;
    rows.state = kv.get();
    rows.tokens = std::span<const int32_t>(&tokens[step], 1);
    rows.logit_rows = {0};
    rows.hidden_rows = {0};
    rows.position_offset = images.rope_delta;
    model->forward(std::span<SequenceRows>(&rows, 1), result);
    std::copy(result.logits.begin(), result.logits.end(), decode.begin() + size_t(step) * V);
    last_hidden.assign(result.hidden_post.begin(), result.hidden_post.end());
    next = argmax(result.logits.data(), V);
  }
  if (gemma_assistant && f.decode > 0) assistant_drafts(next, last_hidden.data(), f.out + ".assistant_end.npy");
  write_npy_file(f.out + ".decode.npy", "<f4", {size_t(f.decode), size_t(V)}, decode.data(), 4);
  write_npy_file(f.out + ".tokens.npy", "<i4", {size_t(f.decode)}, tokens.data(), 4);

  if (mtp) {
    // Row p consumes (h_p, x_{p+1}) at position p, p = 0 .. n_prompt - 2.
    const int rows = n_prompt - 1;
    std::vector<float> logits, hidden_out;
    if (rows > 0) {
      auto mtp_kv = mtp->new_state(n_prompt, kv_options);
      std::vector<int> logit_rows(rows);
      for (int i = 0; i < rows; ++i) logit_rows[i] = i;
      mtp->forward(0, *mtp_kv, hidden.data(), std::span<const int32_t>(prompt.data() + 1, rows), logit_rows, logits,
                   hidden_out);
    }
    write_npy_file(f.out + ".mtp.npy", "<f4", {size_t(std::max(rows, 0)), size_t(V)}, logits.data(), 4);
  }
  return 0;
}

}  // namespace

Command add_debug_logits_command(CLI::App& root) {
  auto flags = std::make_shared<DebugLogitsFlags>();
  CLI::App* app = root.add_subcommand("debug-logits", "Run the forward pass on token ids and write logits as .npy");
  app->add_option("-m,--model", flags->model_dir, "Hugging Face checkpoint directory")->required();
  app->add_option("--prompt-tokens", flags->prompt_tokens, "Comma-separated prompt token ids")->required();
  app->add_option("--decode", flags->decode, "Greedy decode steps after the prompt")->capture_default_str();
  app->add_option("--chunk", flags->chunk, "Prefill chunk size (0: the whole prompt at once)")->capture_default_str();
  app->add_flag("--mtp", flags->mtp, "Also write MTP layer 0 logits of the prompt rows (PREFIX.mtp.npy)");
  app->add_option("--assistant-steps", flags->assistant_steps,
                  "Gemma 4 assistant: greedy draft steps written after the prompt (PREFIX.assistant.npy) and "
                  "after the decode (PREFIX.assistant_end.npy)")->capture_default_str();
  app->add_option("--mtp-assistant-model", flags->assistant_dir,
                  "Take the MTP layers from this assistant checkpoint (implies --mtp)");
  app->add_option("--eagle3", flags->eagle3_dir,
                  "EAGLE-3 drafter: write its logits over the prompt rows and --assistant-steps - 1 chained greedy "
                  "steps (PREFIX.eagle3.npy) and the target streams it reads (PREFIX.streams.npy)");
  app->add_option("--dflash", flags->dflash_dir,
                  "Also write a DFlash drafter's block logits after the prompt, slots 1..B-1 (PREFIX.dflash.npy)");
  app->add_option("--dflash-block", flags->dflash_block, "--dflash: block rows B (default: its block_size)")
      ->capture_default_str();
  app->add_option("-t,--threads", flags->threads, "Compute threads (default: physical cores)");
  app->add_option("--kv-type", flags->kv_type, "KV storage: f32, f16, bf16, q8, q4, turbo3, turbo4")->capture_default_str();
  app->add_flag("--mmap-weights", flags->mmap_weights, "Serve weights from the memory-mapped file");
  app->add_option("--image", flags->images,
                  "Image file for each image_token_id in --prompt-tokens, in order (Qwen3.5 vision-language); "
                  "also writes the M-RoPE positions (PREFIX.positions.npy)");
  app->add_option("--mmproj", flags->mmproj, "--image: the vision tower from llama.cpp's projector GGUF");
  app->add_option("--image-min-tokens", flags->image_min_tokens, "--image: the fewest tokens an image becomes");
  app->add_option("--image-max-tokens", flags->image_max_tokens, "--image: the most tokens an image becomes");
  app->add_option("--out", flags->out, "Output prefix: PREFIX.{prefill,hidden,decode,tokens,mtp,dflash}.npy")->required();
  return Command{app, [flags] { return run_debug_logits(*flags); }};
}

}  // namespace nextn
