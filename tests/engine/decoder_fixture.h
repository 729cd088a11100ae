// Checkpoints for the decoder's tests: the loader tests' tiny fixture (every architecture, random
// codes and scales) written to a temporary directory, with the knobs the forward pass reads.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "exactq/decoder.h"
#include "model/checkpoint_fixture.h"

namespace exactq::test {

struct DecoderCase {
  std::string model_type = "llama";
  DType dtype = DType::bf16;
  bool tied = false;
  bool quantized = true;
  std::int64_t sliding_window = 0;  // gemma3: 0 keeps the config's default
  std::string name() const {
    return model_type + "_" + std::string(dtype == DType::bf16 ? "bf16" : dtype == DType::f16 ? "f16" : "f32") +
           (tied ? "_tied" : "") + (quantized ? "" : "_dense") +
           (sliding_window ? "_window" + std::to_string(sliding_window) : "");
  }
};

// Writes the case's checkpoint into `dir` and opens it.
inline Checkpoint write_decoder_case(const DecoderCase& c, const fs::path& dir, std::mt19937_64& rng) {
  Tiny t;
  t.model_type = c.model_type;
  t.dtype = c.dtype;
  t.tied = c.tied;
  t.quantized = c.quantized;
  Fixture f = tiny_fixture(t, rng);
  if (c.sliding_window > 0) {
    nlohmann::json& text = c.model_type == "gemma3" ? f.config["text_config"] : f.config;
    text["sliding_window"] = c.sliding_window;
    text["sliding_window_pattern"] = 2;  // layer 0 local, layer 1 global
  }
  write_fixture(dir, f);
  return Checkpoint::open(dir.string());
}

// Every architecture in bf16, and the variants that change the forward: other dtypes, a tied
// head, dense weights and Gemma's sliding window (a small window, so that it cuts).
inline std::vector<DecoderCase> decoder_cases() {
  std::vector<DecoderCase> v;
  for (const char* type : {"llama", "mistral", "qwen2", "qwen3", "gemma3_text", "gemma3"}) v.push_back({type});
  v.push_back({"llama", DType::f16});
  v.push_back({"qwen3", DType::f32});
  v.push_back({"llama", DType::bf16, true});
  v.push_back({"qwen2", DType::bf16, false, false});
  v.push_back({"gemma3_text", DType::bf16, false, true, 7});
  v.push_back({"gemma3", DType::f16, true, true, 5});
  return v;
}

inline std::vector<std::int32_t> random_tokens(std::size_t n, std::int64_t vocab, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::int32_t> pick(0, std::int32_t(vocab - 1));
  std::vector<std::int32_t> t(n);
  for (auto& x : t) x = pick(rng);
  return t;
}

}  // namespace exactq::test
