// tests/engine/engine_test_util.h — tiny checkpoints (made once per build by
// tools/make_checkpoint.py) and a blocking helper that runs requests on an Engine.
#pragma once
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace nextn::testing {

// Directory of a test checkpoint `name` made with `args` (cached under the build dir).
inline std::string checkpoint(const std::string& name, const std::string& args) {
  namespace fs = std::filesystem;
  std::string dir = std::string(NEXTN_BUILD_DIR) + "/test-tmp/engine/" + name;
  if (!fs::exists(dir + "/config.json")) {
    fs::create_directories(dir);
    std::string cmd = "/usr/bin/python3 " + std::string(NEXTN_SOURCE_DIR) + "/tools/make_checkpoint.py " + args +
                      " --out " + dir + " --quiet";
    if (std::system(cmd.c_str()) != 0) ADD_FAILURE() << "failed: " << cmd;
  }
  return dir;
}

inline std::string mimo_model() { return checkpoint("mimo", "--arch mimo --seed 1"); }
inline std::string deepseek_model() { return checkpoint("qwen3_ds", "--arch qwen3 --mtp deepseek --seed 2"); }
inline std::string mimo2_model() { return checkpoint("mimo2", "--arch mimo --mtp-layers 2 --seed 3"); }
inline std::string qwen3_model() { return checkpoint("qwen3", "--arch qwen3 --seed 2"); }
inline std::string qwen3_draft_model() { return checkpoint("qwen3_small", "--arch qwen3 --layers 1 --seed 7"); }
// Qwen3.5 hybrid (3 Gated DeltaNet + 1 gated attention layer) with its MTP layer.
inline std::string qwen3_5_model() { return checkpoint("qwen3_5", "--arch qwen3_5 --seed 4"); }
// Gemma 4 (sliding window 8, KV sharing, per-layer embeddings) and its -assistant drafter.
inline std::string gemma4_model() { return checkpoint("gemma4", "--arch gemma4 --seed 5"); }
inline std::string gemma4_assistant_model() {
  std::string target = gemma4_model();
  return checkpoint("gemma4_assistant", "--assistant-of " + target + " --seed 6");
}
// Mixture-of-Experts models (16 experts, top 4) with their drafters: Qwen3.5-MoE (routed
// MTP layer), GLM-4.5 (nextn layer), Gemma 4 26B-A4B form with an assistant.
inline std::string qwen3_5_moe_model() { return checkpoint("qwen3_5_moe", "--arch qwen3_5_moe --seed 4"); }
inline std::string glm4_moe_model() { return checkpoint("glm4_moe", "--arch glm4_moe --seed 3"); }
inline std::string gemma4_moe_model() { return checkpoint("gemma4_moe", "--arch gemma4 --moe --seed 5"); }
inline std::string gemma4_moe_assistant_model() {
  std::string target = gemma4_moe_model();
  return checkpoint("gemma4_moe_assistant", "--assistant-of " + target + " --seed 6");
}
// A DFlash block-diffusion drafter of qwen3_model() (2 layers tapping its layers 1 and 0,
// block size 6).
inline std::string dflash_model() {
  std::string target = qwen3_model();
  return checkpoint("qwen3_dflash", "--dflash-of " + target + " --dflash-layers 2 --block-size 6 --seed 8");
}
inline std::string assistant_model() {
  std::string target = qwen3_model();
  return checkpoint("qwen3_assistant", "--assistant-of " + target);
}

// EAGLE-3 drafters reading a target's layer inputs (0, 1 and 3 of these 3-layer models),
// drafting among 300 of the 448 tokens.
inline std::string eagle3_model() {
  return checkpoint("qwen3_eagle3", "--eagle3-of " + qwen3_model() + " --draft-vocab 300 --seed 8");
}
inline std::string deepseek_eagle3_model() {
  return checkpoint("qwen3_ds_eagle3", "--eagle3-of " + deepseek_model() + " --draft-vocab 300 --seed 8");
}

struct RunResult {
  std::vector<int32_t> tokens;
  FinishReason reason = FinishReason::kNone;
  Timings timings;
  std::string error;
};

// Submits every request and waits for all of them.
inline std::vector<RunResult> run_all(Engine& engine, std::vector<GenerationRequest> requests) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<RunResult> results(requests.size());
  size_t done = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    auto& req = requests[i];
    auto user_token = req.on_token;
    req.on_token = [&, i, user_token](const TokenEvent& ev) {
      results[i].tokens.push_back(ev.token);
      return user_token ? user_token(ev) : true;
    };
    req.on_done = [&, i](FinishReason r, const Timings& t, const std::string& e) {
      std::lock_guard lock(mu);
      results[i].reason = r;
      results[i].timings = t;
      results[i].error = e;
      ++done;
      cv.notify_all();
    };
    engine.submit(std::move(req));
  }
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return done == results.size(); });
  return results;
}

inline RunResult run_one(Engine& engine, GenerationRequest request) {
  std::vector<GenerationRequest> v;
  v.push_back(std::move(request));
  return run_all(engine, std::move(v))[0];
}

inline EngineOptions base_options(const std::string& model) {
  EngineOptions o;
  o.model_dir = model;
  o.threads = 1;
  o.ctx_size = 512;
  return o;
}

inline EngineOptions spec_options(const std::string& model, const std::string& mode, int n) {
  EngineOptions o = base_options(model);
  o.speculative.mode = mode;
  o.speculative.num_draft_tokens = n;
  return o;
}

inline GenerationRequest greedy_request(std::vector<int32_t> prompt, int n) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = n;
  return r;
}

}  // namespace nextn::testing
