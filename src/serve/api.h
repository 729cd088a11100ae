// OpenAI's request and response shapes for /v1/completions and /v1/chat/completions: parsing with
// every refusal an ApiError that names the parameter, and the response bodies.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "exactq/tokenizer.h"
#include "serve/chat_template.h"
#include "serve/job.h"

namespace exactq::serve {

// An error answered with OpenAI's body: {"error": {"message", "type", "param", "code"}}.
struct ApiError : std::runtime_error {
  int status;
  std::string type, param, code;
  ApiError(int status, std::string message, std::string param = {}, std::string code = {},
           std::string type = "invalid_request_error");
};
std::string error_body(const ApiError& error);

struct ApiContext {
  std::string model_id;
  const Tokenizer* tokenizer = nullptr;
  std::int64_t vocab = 0;
  std::int64_t context = 0;
  const std::optional<ChatTemplate>* chat_template = nullptr;
  std::string chat_error;  // why chat is refused where there is no template
};

struct ParsedRequest {
  GenerationSpec spec;
  bool stream = false;
  bool stream_usage = false;  // stream_options.include_usage
};

// Throw ApiError: malformed JSON or a body that is not an object, a parameter of the wrong type
// or out of range, an unknown parameter, a prompt that is empty or leaves no room in the context
// (400); another model's name (404).
ParsedRequest parse_completion(std::string_view body, const ApiContext& context);
ParsedRequest parse_chat(std::string_view body, const ApiContext& context);

// The non-streamed response bodies, and the streamed chunks (without the SSE framing).
// With request.spec.logprobs >= 0 and a tokenizer, the choice's logprobs carry each generated
// token's (Outcome::logprobs).
nlohmann::json completion_response(const std::string& id, const std::string& model, std::int64_t created,
                                   const ParsedRequest& request, const Outcome& outcome, bool chat,
                                   const Tokenizer* tokenizer = nullptr);
nlohmann::json completion_chunk(const std::string& id, const std::string& model, std::int64_t created, bool chat,
                                const std::string& text, const char* finish_reason,
                                const nlohmann::json& logprobs = nullptr);
// The logprobs object of `tokens` (each with its entry of `logprobs`), as completion_response
// writes it for all of them: `offset` is the decoded text before the first of them (advanced past
// them), text offsets are clamped to `text_bytes`. Streamed chunks of a response together carry
// the tokens, values and offsets of its non-streamed logprobs.
nlohmann::json logprobs_json(const Tokenizer& tokenizer, const ParsedRequest& request,
                             std::span<const std::int32_t> tokens, std::span<const TokenLogprobs> logprobs,
                             std::size_t& offset, std::size_t text_bytes, bool chat);
nlohmann::json usage(const ParsedRequest& request, const Outcome& outcome);

}  // namespace exactq::serve
