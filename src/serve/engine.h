// Runs one Job on the model, from position 0, through the same greedy_decode or
// speculative_decode call `exactq generate` makes with the same options, so the tokens are that
// command's tokens for the same prompt and max_tokens, byte for byte. Stop strings and
// cancellation end a run early at a token boundary; they never change a token that is reported.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "exactq/decoder.h"
#include "exactq/generate.h"
#include "exactq/sampling.h"
#include "exactq/speculative.h"
#include "exactq/tokenizer.h"
#include "serve/job.h"
#include "serve/metrics.h"

namespace exactq::serve {

struct EngineOptions {
  // Speculative decoding where set (the drafter is then given to the engine).
  std::optional<SpeculativeOptions> speculative;
};

// One job's generated tokens turned into what the job is given: the text up to a stop string, the
// tokens whose text is final with their log probabilities (where the spec asks for them), and at
// the end the outcome. Engine::run and the batch scheduler feed it the same tokens for the same
// spec, so the job is given the same bytes either way.
class JobRun {
 public:
  JobRun(Job& job, const Tokenizer& tokenizer);
  // The log probabilities of the tokens picked, by position: a picker's (logprob_picker) or a
  // scheduler's record.
  const std::shared_ptr<std::map<std::int64_t, TokenLogprobs>>& logprobs() const { return logprobs_; }
  // The next generated token; false where the job wants no more: cancelled (the token is not
  // taken) or its text reached a stop string.
  bool take(std::int32_t token);
  // Finishes the job: `reason` where the run ended by itself (none where a stop string or a
  // cancel ended it), `error` where it failed.
  void finish(std::optional<StopReason> reason, const std::string& error, Metrics& metrics);

 private:
  void give(std::size_t safe);
  void absorb(const std::string& piece);
  std::vector<TokenLogprobs> logprobs_of(std::size_t from, std::size_t to) const;

  Job& job_;
  const GenerationSpec& spec_;
  std::shared_ptr<std::map<std::int64_t, TokenLogprobs>> logprobs_;
  Tokenizer::Stream stream_;
  Outcome outcome_;
  std::string text_;               // every byte decoded so far, up to a stop string
  std::size_t emitted_ = 0;        // the bytes of text given to the job
  std::vector<std::size_t> ends_;  // per generated token, the bytes of text once its piece was in
  std::size_t released_ = 0;       // the tokens given to the job
  bool stopped_by_text_ = false;
  std::chrono::steady_clock::time_point start_;
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
