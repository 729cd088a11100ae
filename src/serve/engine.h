// Runs one Job on the model, from position 0, through the same greedy_decode or
// speculative_decode call `exactq generate` makes with the same options, so the tokens are that
// command's tokens for the same prompt and max_tokens, byte for byte. Stop strings and
// cancellation end a run early at a token boundary; they never change a token that is reported.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "exactq/decoder.h"
#include "exactq/speculative.h"
#include "exactq/tokenizer.h"
#include "serve/job.h"
#include "serve/metrics.h"

namespace exactq::serve {

struct EngineOptions {
  // Speculative decoding where set (the drafter is then given to the engine).
  std::optional<SpeculativeOptions> speculative;
};

class Engine {
 public:
  // drafter may be null (classic decode); it is used only where options.speculative is set.
  Engine(Decoder& decoder, Drafter* drafter, const Tokenizer& tokenizer, EngineOptions options, Metrics& metrics);
  // Runs the job to its end and finishes it; never throws (a failure finishes the job as failed).
  void run(Job& job);

  const Tokenizer& tokenizer() const { return tokenizer_; }
  std::int64_t context_length() const { return decoder_.context_length(); }
  std::int64_t vocab_size() const { return decoder_.vocab_size(); }
  bool speculative() const { return options_.speculative.has_value(); }

 private:
  Decoder& decoder_;
  Drafter* drafter_;
  const Tokenizer& tokenizer_;
  EngineOptions options_;
  Metrics& metrics_;
  std::vector<std::int32_t> stop_ids_;
};

// Where the text's first stop string starts (text.size() where none does), and how many bytes at
// the end of the text must be held back because they may begin a stop string that the next
// tokens complete.
struct StopScan {
  std::size_t match = 0;
  std::size_t hold = 0;
};
StopScan scan_stops(const std::string& text, const std::vector<std::string>& stops);

}  // namespace exactq::serve
