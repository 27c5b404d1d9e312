// cli/debug_image.cc — `nextn debug-image`: decodes an image file and runs an image
// processor on it, writing each stage as .npy for the numpy reference
// (tests/reference/numpy_vision.py, tests/model/test_vision_processor.py):
//   PREFIX.decoded.npy       uint8 [h, w, 3]   the decoder's RGB
//   PREFIX.resized.npy       uint8 [h̄, w̄, 3]  after smart_resize + bicubic
//   PREFIX.pixel_values.npy  float32 [rows, 3·t·p²]  normalized patches, merge-window order
//   PREFIX.grid_thw.npy      int64 [3]
//   PREFIX.vision.npy        float32 [rows/4, out_hidden]  the vision tower's output (with --model)
// `--smart-resize HxW` prints the target size of an image of that size instead (no file).
// `--processor gemma4` runs Gemma 4's processor (vision/gemma4_processor.h) instead:
//   PREFIX.pixel_values.npy  float32 [rows, 3·p²]  x/255 patches, raster order, (py, px, ch)
//   PREFIX.grid_thw.npy      int64 [3]  (1, patch rows, patch columns)
//   PREFIX.vision.npy        float32 [tokens, text hidden]  tower + pooling + projector (with --model)
// its budget from the checkpoint's processor config or --max-soft-tokens; --smart-resize
// then prints Gemma 4's target size.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "cli/command.h"
#include "cli/npy.h"
#include "io/checkpoint.h"
#include "io/json_file.h"
#include "util/error.h"
#include "util/file.h"
#include "util/thread_pool.h"
#include "vision/gemma4_processor.h"
#include "vision/gemma4_vision.h"
#include "vision/image.h"
#include "vision/qwen_processor.h"
#include "vision/qwen_vision.h"

namespace nextn {
namespace {

struct DebugImageFlags {
  std::string image;
  std::string processor = "qwen3_5";
  std::string config;
  int64_t min_pixels = 0;
  int64_t max_pixels = 0;
  std::string smart_resize;
  int max_soft_tokens = 0;
  std::string model_dir;
  int threads = 0;
  std::string out;
};

bool parse_size(const std::string& text, int& h, int& w) {
  char tail = 0;
  return std::sscanf(text.c_str(), "%dx%d%c", &h, &w, &tail) == 2 && h > 0 && w > 0;
}

void write_outputs(const DebugImageFlags& f, const vision::DecodedImage& image, const vision::ProcessedImage& px,
                   const std::vector<float>* features, size_t width) {
  write_npy_file(f.out + ".decoded.npy", "|u1", {size_t(image.height), size_t(image.width), 3}, image.rgb.data(), 1);
  write_npy_file(f.out + ".resized.npy", "|u1", {size_t(px.resized.height), size_t(px.resized.width), 3},
                 px.resized.rgb.data(), 1);
  write_npy_file(f.out + ".pixel_values.npy", "<f4", {size_t(px.rows), size_t(px.cols)}, px.values.data(), 4);
  const int64_t grid[3] = {px.grid_t, px.grid_h, px.grid_w};
  write_npy_file(f.out + ".grid_thw.npy", "<i8", {3}, grid, 8);
  if (features) write_npy_file(f.out + ".vision.npy", "<f4", {features->size() / width, width}, features->data(), 4);
  std::printf("%s: %dx%d -> %dx%d, grid (%d, %d, %d), %lld tokens\n", f.image.c_str(), image.width, image.height,
              px.resized.width, px.resized.height, px.grid_t, px.grid_h, px.grid_w,
              static_cast<long long>(px.n_tokens()));
}

vision::DecodedImage read_image(const std::string& path) {
  const std::string bytes = read_file(path);
  vision::ImageLimits limits;
  limits.max_bytes = bytes.size();  // a local file: only the pixel limits apply
  return vision::decode_image(bytes, vision::media_type_of(vision::sniff_image_format(bytes)), limits);
}

int run_gemma4(const DebugImageFlags& f) {
  vision::Gemma4ProcessorConfig config;
  std::unique_ptr<Checkpoint> checkpoint;
  std::unique_ptr<vision::Gemma4VisionTower> tower;
  if (!f.config.empty()) {
    const nlohmann::json j = read_json_file(f.config);
    config = vision::Gemma4ProcessorConfig::from_json(j.contains("image_processor") ? j["image_processor"] : j);
  }
  if (!f.model_dir.empty()) {
    checkpoint = Checkpoint::open(f.model_dir);
    tower = vision::Gemma4VisionTower::load(*checkpoint);
    const std::string pc = f.model_dir + "/processor_config.json", pre = f.model_dir + "/preprocessor_config.json";
    if (f.config.empty() && std::filesystem::exists(pc)) {
      const nlohmann::json j = read_json_file(pc);
      if (j.contains("image_processor")) config = vision::Gemma4ProcessorConfig::from_json(j["image_processor"]);
    } else if (f.config.empty() && std::filesystem::exists(pre)) {
      config = vision::Gemma4ProcessorConfig::from_json(read_json_file(pre));
    }
    config.patch_size = tower->config().patch_size;
    config.pooling_kernel_size = tower->config().pooling_kernel_size;
  }
  if (f.max_soft_tokens > 0) config.max_soft_tokens = f.max_soft_tokens;
  if (!f.smart_resize.empty()) {
    int h = 0, w = 0;
    if (!parse_size(f.smart_resize, h, w))
      fail(ErrorKind::kBadInput, "--smart-resize: expected HEIGHTxWIDTH, got '{}'", f.smart_resize);
    const vision::Gemma4Size t = vision::gemma4_target_size(h, w, config);
    std::printf("%d %d\n", t.height, t.width);
    return 0;
  }
  if (f.image.empty() || f.out.empty()) fail(ErrorKind::kBadInput, "debug-image: IMAGE and --out are required");
  const vision::DecodedImage image = read_image(f.image);
  const vision::ProcessedImage px = vision::gemma4_process(image, config);
  std::vector<float> features;
  if (tower) features = tower->forward(px);
  write_outputs(f, image, px, tower ? &features : nullptr, tower ? size_t(tower->config().out_hidden) : 0);
  return 0;
}

int run_debug_image(const DebugImageFlags& f) {
  if (f.threads > 0) ThreadPool::set_global_threads(f.threads);
  if (f.processor == "gemma4") return run_gemma4(f);
  if (f.processor != "qwen3_5")
    fail(ErrorKind::kBadInput, "--processor: '{}' is not known (qwen3_5, gemma4)", f.processor);
  vision::QwenProcessorConfig config;
  std::unique_ptr<Checkpoint> checkpoint;
  std::unique_ptr<vision::QwenVisionTower> tower;
  if (!f.model_dir.empty()) {
    checkpoint = Checkpoint::open(f.model_dir);
    tower = vision::QwenVisionTower::load(*checkpoint);
    const std::string pre = f.model_dir + "/preprocessor_config.json";
    if (f.config.empty() && std::filesystem::exists(pre)) config = vision::QwenProcessorConfig::from_json(read_json_file(pre));
    config.patch_size = tower->config().patch_size;
    config.temporal_patch_size = tower->config().temporal_patch_size;
    config.merge_size = tower->config().merge_size;
  }
  if (!f.config.empty()) config = vision::QwenProcessorConfig::from_json(read_json_file(f.config));
  if (f.min_pixels > 0) config.min_pixels = f.min_pixels;
  if (f.max_pixels > 0) config.max_pixels = f.max_pixels;
  if (config.max_pixels < config.min_pixels) fail(ErrorKind::kBadInput, "--max-pixels is below --min-pixels");

  if (!f.smart_resize.empty()) {
    int h = 0, w = 0;
    if (!parse_size(f.smart_resize, h, w))
      fail(ErrorKind::kBadInput, "--smart-resize: expected HEIGHTxWIDTH, got '{}'", f.smart_resize);
    vision::ResizeTarget t = vision::smart_resize(h, w, config.factor(), config.min_pixels, config.max_pixels);
    std::printf("%d %d\n", t.height, t.width);
    return 0;
  }
  if (f.image.empty() || f.out.empty()) fail(ErrorKind::kBadInput, "debug-image: IMAGE and --out are required");
  const vision::DecodedImage image = read_image(f.image);
  const vision::ProcessedImage px = vision::qwen_process(image, config);
  std::vector<float> features;
  if (tower) features = tower->forward(px);
  write_outputs(f, image, px, tower ? &features : nullptr, tower ? size_t(tower->config().out_hidden) : 0);
  return 0;
}

}  // namespace

Command add_debug_image_command(CLI::App& root) {
  auto flags = std::make_shared<DebugImageFlags>();
  CLI::App* app = root.add_subcommand("debug-image", "Decode an image, run an image processor, write each stage as .npy");
  app->add_option("image", flags->image, "Image file (PNG, JPEG, WebP, GIF)");
  app->add_option("--processor", flags->processor, "Image processor (qwen3_5, gemma4)")->capture_default_str();
  app->add_option("--max-soft-tokens", flags->max_soft_tokens, "gemma4: the image token budget (default: the checkpoint's, else 280)");
  app->add_option("--config", flags->config, "preprocessor_config.json to read the processor's settings from");
  app->add_option("--min-pixels", flags->min_pixels, "Override the processor's minimum pixel count");
  app->add_option("--max-pixels", flags->max_pixels, "Override the processor's maximum pixel count");
  app->add_option("--smart-resize", flags->smart_resize, "Print the resize target of an HEIGHTxWIDTH image and exit");
  app->add_option("-m,--model", flags->model_dir,
                  "Vision-language checkpoint: also run its vision tower (PREFIX.vision.npy); its "
                  "preprocessor_config.json, when present, sets the processor");
  app->add_option("--threads", flags->threads, "Compute threads (default: physical cores)");
  app->add_option("--out", flags->out, "Output prefix for the .npy files");
  return {app, [flags] { return run_debug_image(*flags); }};
}

}  // namespace nextn
