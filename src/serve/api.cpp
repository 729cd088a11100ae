#include "serve/api.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <span>

#include <fmt/format.h>

namespace exactq::serve {

namespace {

using nlohmann::json;

const char* type_name(const json& v) {
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

[[noreturn]] void bad(const std::string& param, const std::string& message) { throw ApiError(400, param + ": " + message, param); }

json parse_object(std::string_view body) {
  json j = json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded()) throw ApiError(400, "the request body is not valid JSON", "", "invalid_json");
  if (!j.is_object()) throw ApiError(400, fmt::format("the request body must be a JSON object, not {}", type_name(j)));
  return j;
}

void refuse_unknown(const json& j, const std::set<std::string>& known) {
  for (const auto& [key, value] : j.items())
    if (!known.contains(key)) bad(key, "not a parameter this server accepts");
}

void check_model(const json& j, const ApiContext& c) {
  if (!j.contains("model") || j["model"].is_null()) return;
  if (!j["model"].is_string()) bad("model", fmt::format("must be a string, not {}", type_name(j["model"])));
  const std::string name = j["model"].get<std::string>();
  if (name != c.model_id)
    throw ApiError(404, fmt::format("The model '{}' does not exist; this server serves '{}'", name, c.model_id), "model",
                   "model_not_found");
}

// An optional parameter that only has one value until sampling lands: absent, null or that value.
void require_default(const json& j, const char* key, double value) {
  if (!j.contains(key) || j[key].is_null()) return;
  if (!j[key].is_number()) bad(key, fmt::format("must be a number, not {}", type_name(j[key])));
  if (j[key].get<double>() != value)
    bad(key, fmt::format("only {} is supported (this server decodes greedily)", value));
}

std::int64_t integer(const json& j, const char* key, std::int64_t fallback, std::int64_t lo) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  const json& v = j[key];
  if (!v.is_number_integer() && !v.is_number_unsigned()) bad(key, fmt::format("must be an integer, not {}", type_name(v)));
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(INT64_MAX)) bad(key, "is too large");
  const std::int64_t n = v.get<std::int64_t>();
  if (n < lo) bad(key, fmt::format("must be at least {}, not {}", lo, n));
  return n;
}

void parse_common(const json& j, const ApiContext& c, ParsedRequest& r, const char* max_tokens_key, std::int64_t fallback) {
  check_model(j, c);
  r.spec.max_tokens = integer(j, max_tokens_key, fallback, 1);
  if (j.contains("stream") && !j["stream"].is_null()) {
    if (!j["stream"].is_boolean()) bad("stream", fmt::format("must be a boolean, not {}", type_name(j["stream"])));
    r.stream = j["stream"].get<bool>();
  }
  if (j.contains("stream_options") && !j["stream_options"].is_null()) {
    const json& o = j["stream_options"];
    if (!o.is_object()) bad("stream_options", "must be an object");
    if (o.contains("include_usage") && !o["include_usage"].is_boolean()) bad("stream_options.include_usage", "must be a boolean");
    r.stream_usage = o.value("include_usage", false);
  }
  if (j.contains("stop") && !j["stop"].is_null()) {
    const json& s = j["stop"];
    if (s.is_string()) {
      r.spec.stop.push_back(s.get<std::string>());
    } else if (s.is_array()) {
      if (s.size() > 16) bad("stop", "at most 16 stop strings");
      for (const auto& item : s) {
        if (!item.is_string()) bad("stop", fmt::format("must hold strings, not {}", type_name(item)));
        r.spec.stop.push_back(item.get<std::string>());
      }
    } else {
      bad("stop", fmt::format("must be a string or an array of strings, not {}", type_name(s)));
    }
    for (const auto& stop : r.spec.stop)
      if (stop.empty()) bad("stop", "a stop string is empty");
  }
  auto number = [&](const char* key, double fallback) {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    if (!j[key].is_number()) bad(key, fmt::format("must be a number, not {}", type_name(j[key])));
    return j[key].get<double>();
  };
  r.spec.sampling.temperature = number("temperature", 0);
  r.spec.sampling.top_p = number("top_p", 1);
  r.spec.sampling.top_k = integer(j, "top_k", 0, 0);
  if (r.spec.sampling.temperature < 0) bad("temperature", "must be at least 0");
  if (!(r.spec.sampling.top_p > 0 && r.spec.sampling.top_p <= 1)) bad("top_p", "must be in (0, 1]");
  require_default(j, "n", 1);
  require_default(j, "presence_penalty", 0);
  require_default(j, "frequency_penalty", 0);
  if (j.contains("seed") && !j["seed"].is_null()) {
    const json& seed = j["seed"];
    if (!seed.is_number_integer() && !seed.is_number_unsigned()) bad("seed", fmt::format("must be an integer, not {}", type_name(seed)));
    r.spec.sampling.seed = seed.is_number_unsigned() ? seed.get<std::uint64_t>() : std::uint64_t(seed.get<std::int64_t>());
  }
  if (j.contains("logit_bias") && !j["logit_bias"].is_null() && !(j["logit_bias"].is_object() && j["logit_bias"].empty()))
    bad("logit_bias", "is not supported");
  if (j.contains("user") && !j["user"].is_null() && !j["user"].is_string()) bad("user", "must be a string");
}

void check_prompt(const ParsedRequest& r, const ApiContext& c, const char* param) {
  if (r.spec.prompt.empty()) bad(param, "the prompt gives no tokens");
  if (std::int64_t(r.spec.prompt.size()) >= c.context)
    throw ApiError(400, fmt::format("{}: the prompt has {} tokens; this server's context holds {}, so at most {} fit", param,
                                    r.spec.prompt.size(), c.context, c.context - 1), param, "context_length_exceeded");
}

std::vector<std::int32_t> encode(const ApiContext& c, const std::string& text, bool add_special, const char* param) {
  try {
    return c.tokenizer->encode(text, add_special);
  } catch (const std::exception& e) {
    bad(param, e.what());
  }
}

}  // namespace

ApiError::ApiError(int status_, std::string message, std::string param_, std::string code_, std::string type_)
    : std::runtime_error(std::move(message)), status(status_), type(std::move(type_)), param(std::move(param_)),
      code(std::move(code_)) {}

std::string error_body(const ApiError& e) {
  auto nullable = [](const std::string& s) { return s.empty() ? json(nullptr) : json(s); };
  return json{{"error", {{"message", e.what()}, {"type", e.type}, {"param", nullable(e.param)}, {"code", nullable(e.code)}}}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

ParsedRequest parse_completion(std::string_view body, const ApiContext& c) {
  const json j = parse_object(body);
  refuse_unknown(j, {"model", "prompt", "max_tokens", "stop", "stream", "stream_options", "temperature", "top_p", "top_k", "n",
                     "seed", "user", "presence_penalty", "frequency_penalty", "logit_bias", "echo", "logprobs", "best_of"});
  ParsedRequest r;
  parse_common(j, c, r, "max_tokens", 16);
  if (j.contains("echo") && !j["echo"].is_null() && j["echo"] != false) bad("echo", "only false is supported");
  if (j.contains("logprobs") && !j["logprobs"].is_null()) {
    const std::int64_t n = integer(j, "logprobs", 0, 0);
    if (n > 5) bad("logprobs", fmt::format("at most 5 alternatives, not {}", n));
    r.spec.logprobs = int(n);
  }
  require_default(j, "best_of", 1);
  if (!j.contains("prompt")) bad("prompt", "is required");
  const json& p = j["prompt"];
  if (p.is_string()) {
    r.spec.prompt = encode(c, p.get<std::string>(), true, "prompt");
  } else if (p.is_array() && !p.empty() && (p[0].is_number_integer() || p[0].is_number_unsigned())) {
    for (std::size_t i = 0; i < p.size(); ++i) {
      const json& v = p[i];
      if (!v.is_number_integer() && !v.is_number_unsigned()) bad("prompt", fmt::format("item {} is {}, not a token id", i, type_name(v)));
      const std::int64_t id = v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(INT64_MAX) ? -1 : v.get<std::int64_t>();
      if (id < 0 || id >= c.vocab) bad("prompt", fmt::format("token {} is outside the model's vocabulary [0, {})", v.dump(), c.vocab));
      r.spec.prompt.push_back(std::int32_t(id));
    }
  } else if (p.is_array() && !p.empty()) {
    bad("prompt", "a batch of prompts is not supported: send one prompt (a string or an array of token ids) per request");
  } else {
    bad("prompt", fmt::format("must be a string or a non-empty array of token ids, not {}", p.is_array() ? "an empty array" : type_name(p)));
  }
  check_prompt(r, c, "prompt");
  return r;
}

ParsedRequest parse_chat(std::string_view body, const ApiContext& c) {
  const json j = parse_object(body);
  refuse_unknown(j, {"model", "messages", "max_tokens", "max_completion_tokens", "stop", "stream", "stream_options",
                     "temperature", "top_p", "top_k", "n", "seed", "user", "presence_penalty", "frequency_penalty",
                     "logit_bias", "logprobs", "top_logprobs"});
  ParsedRequest r;
  const bool completion_key = j.contains("max_completion_tokens") && !j["max_completion_tokens"].is_null();
  parse_common(j, c, r, completion_key ? "max_completion_tokens" : "max_tokens", 0);
  if (j.contains("logprobs") && !j["logprobs"].is_null()) {
    if (!j["logprobs"].is_boolean()) bad("logprobs", fmt::format("must be a boolean, not {}", type_name(j["logprobs"])));
    if (j["logprobs"].get<bool>()) r.spec.logprobs = 0;
  }
  if (j.contains("top_logprobs") && !j["top_logprobs"].is_null()) {
    const std::int64_t n = integer(j, "top_logprobs", 0, 0);
    if (n > 20) bad("top_logprobs", fmt::format("at most 20, not {}", n));
    if (r.spec.logprobs < 0) bad("top_logprobs", "needs logprobs: true");
    r.spec.logprobs = int(n);
  }
  if (!j.contains("messages")) bad("messages", "is required");
  const json& ms = j["messages"];
  if (!ms.is_array() || ms.empty()) bad("messages", "must be a non-empty array of messages");
  std::vector<ChatMessage> messages;
  for (std::size_t i = 0; i < ms.size(); ++i) {
    const json& m = ms[i];
    const std::string at = fmt::format("messages[{}]", i);
    if (!m.is_object()) bad(at, "must be an object");
    if (!m.contains("role") || !m["role"].is_string()) bad(at + ".role", "must be a string");
    if (!m.contains("content")) bad(at + ".content", "is required");
    ChatMessage message{m["role"].get<std::string>(), ""};
    const json& content = m["content"];
    if (content.is_string()) {
      message.content = content.get<std::string>();
    } else if (content.is_array()) {
      for (const auto& part : content) {
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
          bad(at + ".content", "only text parts ({\"type\": \"text\", \"text\": ...}) are supported");
        message.content += part["text"].get<std::string>();
      }
    } else {
      bad(at + ".content", fmt::format("must be a string or an array of text parts, not {}", type_name(content)));
    }
    messages.push_back(std::move(message));
  }
  if (c.chat_template == nullptr || !c.chat_template->has_value()) throw ApiError(400, c.chat_error, "messages", "no_chat_template");
  std::string text;
  try {
    text = render_chat(**c.chat_template, messages);
  } catch (const std::invalid_argument& e) {
    bad("messages", e.what());
  }
  // The template writes the special tokens itself (as apply_chat_template's tokenization does).
  r.spec.prompt = encode(c, text, false, "messages");
  check_prompt(r, c, "messages");
  if (r.spec.max_tokens == 0) r.spec.max_tokens = c.context - std::int64_t(r.spec.prompt.size());
  return r;
}

json usage(const ParsedRequest& r, const Outcome& o) {
  const auto p = std::int64_t(r.spec.prompt.size()), n = std::int64_t(o.tokens.size());
  return {{"prompt_tokens", p}, {"completion_tokens", n}, {"total_tokens", p + n}};
}

namespace {

// A token's text (special tokens as their text) and its bytes.
std::string token_string(const Tokenizer& t, std::int32_t id) { return t.decode(std::span<const std::int32_t>(&id, 1)); }
json bytes_of(const std::string& s) {
  json b = json::array();
  for (const unsigned char c : s) b.push_back(int(c));
  return b;
}

}  // namespace

// OpenAI's logprobs objects for the generated tokens: the completions' (tokens, token_logprobs,
// top_logprobs, text_offset) or the chat's content list. Log probabilities that are -inf (a NaN
// logit) are written as null.
json logprobs_json(const Tokenizer& t, const ParsedRequest& r, std::span<const std::int32_t> tokens_in,
                   std::span<const TokenLogprobs> logprobs, std::size_t& offset, std::size_t text_bytes, bool chat) {
  const std::size_t n = std::min(tokens_in.size(), logprobs.size());
  auto number = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
  if (chat) {
    json content = json::array();
    for (std::size_t i = 0; i < n; ++i) {
      const std::string text = token_string(t, tokens_in[i]);
      json top = json::array();
      for (const auto& [id, lp] : logprobs[i].top) {
        const std::string alt = token_string(t, id);
        top.push_back({{"token", alt}, {"logprob", number(lp)}, {"bytes", bytes_of(alt)}});
      }
      content.push_back({{"token", text}, {"logprob", number(logprobs[i].logprob)}, {"bytes", bytes_of(text)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json tokens = json::array(), values = json::array(), offsets = json::array(), tops = json::array();
  for (std::size_t i = 0; i < n; ++i) {
    tokens.push_back(token_string(t, tokens_in[i]));
    values.push_back(number(logprobs[i].logprob));
    offsets.push_back(std::min(offset, text_bytes));
    offset += t.decode(tokens_in.subspan(i, 1), true).size();
    json top = json::object();
    for (const auto& [id, lp] : logprobs[i].top) top[token_string(t, id)] = number(lp);
    tops.push_back(top);
  }
  return {{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", r.spec.logprobs > 0 ? tops : json(nullptr)},
          {"text_offset", offsets}};
}

json completion_response(const std::string& id, const std::string& model, std::int64_t created, const ParsedRequest& r,
                         const Outcome& o, bool chat, const Tokenizer* tokenizer) {
  json choice = {{"index", 0}, {"finish_reason", to_string(o.finish)}};
  std::size_t offset = 0;
  const json logprobs = r.spec.logprobs >= 0 && tokenizer
                            ? logprobs_json(*tokenizer, r, o.tokens, o.logprobs, offset, o.text.size(), chat)
                            : json(nullptr);
  if (chat) {
    choice["message"] = {{"role", "assistant"}, {"content", o.text}};
    choice["logprobs"] = logprobs;
  } else {
    choice["text"] = o.text;
    choice["logprobs"] = logprobs;
    choice["token_ids"] = o.tokens;
  }
  return {{"id", id}, {"object", chat ? "chat.completion" : "text_completion"}, {"created", created}, {"model", model},
          {"choices", json::array({choice})}, {"usage", usage(r, o)}};
}

json completion_chunk(const std::string& id, const std::string& model, std::int64_t created, bool chat,
                      const std::string& text, const char* finish_reason, const json& logprobs) {
  json choice = {{"index", 0}, {"finish_reason", finish_reason ? json(finish_reason) : json(nullptr)}};
  if (chat) {
    choice["delta"] = finish_reason ? json::object() : json{{"content", text}};
    if (!logprobs.is_null()) choice["logprobs"] = logprobs;
  } else {
    choice["text"] = text, choice["logprobs"] = logprobs;
  }
  return {{"id", id}, {"object", chat ? "chat.completion.chunk" : "text_completion"}, {"created", created},
          {"model", model}, {"choices", json::array({choice})}};
}

}  // namespace exactq::serve
