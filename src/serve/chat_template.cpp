#include "serve/chat_template.h"

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include <nlohmann/json.hpp>

namespace exactq::serve {

namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The characters Python's str.isspace() takes for white space, in UTF-8: Jinja's `trim` is
// Python's str.strip(), which strips these and no others (U+FEFF, for one, stays).
constexpr std::string_view kPythonSpaces[] = {
    "\t", "\n", "\v", "\f", "\r", "\x1c", "\x1d", "\x1e", "\x1f", " ",
    "\xc2\x85" /* U+0085 */, "\u00a0", "\u1680", "\u2000", "\u2001", "\u2002", "\u2003", "\u2004", "\u2005", "\u2006",
    "\u2007", "\u2008", "\u2009", "\u200a", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000"};

// The length of the white-space character that `text` starts (at_end: ends) with, or 0. In
// valid UTF-8 a match is a whole character: each sequence begins with a lead byte.
std::size_t space_length(std::string_view text, bool at_end) {
  for (const std::string_view space : kPythonSpaces)
    if (at_end ? text.ends_with(space) : text.starts_with(space)) return space.size();
  return 0;
}

// Jinja's `trim`: Python's str.strip().
std::string trim(const std::string& s) {
  std::string_view t(s);
  while (const std::size_t n = space_length(t, false)) t.remove_prefix(n);
  while (const std::size_t n = space_length(t, true)) t.remove_suffix(n);
  return std::string(t);
}

// Python's str.lstrip('\n') and str.rstrip('\n'), which the Qwen3 template applies.
std::string lstrip_newlines(const std::string& s) {
  const std::size_t a = s.find_first_not_of('\n');
  return a == std::string::npos ? std::string() : s.substr(a);
}
std::string rstrip_newlines(const std::string& s) {
  const std::size_t b = s.find_last_not_of('\n');
  return b == std::string::npos ? std::string() : s.substr(0, b + 1);
}

// A Qwen3 assistant turn as its template writes it. Where the content holds "</think>", the
// reasoning (between "<think>" and the first "</think>") is split from the answer (after the
// last); before the last user query only the answer is kept, after it the reasoning is written
// as a think block, an empty one for the final turn.
std::string qwen_assistant_turn(const std::string& full, bool after_last_query, bool last) {
  std::string content = full, reasoning;
  const std::size_t close = full.find("</think>");
  if (close != std::string::npos) {
    content = lstrip_newlines(full.substr(full.rfind("</think>") + 8));
    const std::string before = rstrip_newlines(full.substr(0, close));
    const std::size_t open = before.rfind("<think>");
    reasoning = lstrip_newlines(open == std::string::npos ? before : before.substr(open + 7));
  }
  if (after_last_query && (last || !reasoning.empty()))
    return "<|im_start|>assistant\n<think>\n" + rstrip_newlines(lstrip_newlines(reasoning)) + "\n</think>\n\n" +
           lstrip_newlines(content) + "<|im_end|>\n";
  return "<|im_start|>assistant\n" + content + "<|im_end|>\n";
}

// Qwen3's last user query: the last user message that is not a tool's response wrapped in
// <tool_response> tags; the last message's index where there is none.
std::size_t qwen_last_query(const std::vector<ChatMessage>& messages) {
  for (std::size_t i = messages.size(); i-- > 0;) {
    const std::string& c = messages[i].content;
    if (messages[i].role == "user" && !(c.starts_with("<tool_response>") && c.ends_with("</tool_response>"))) return i;
  }
  return messages.size() - 1;
}

bool has(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }

// The template's first characters, for an error message that names it.
std::string excerpt(const std::string& source) {
  std::string head = source.substr(0, 80);
  for (char& c : head)
    if (c == '\n') c = ' ';
  return head + (source.size() > 80 ? "..." : "");
}

}  // namespace

const char* to_string(ChatFormat format) {
  switch (format) {
    case ChatFormat::chatml: return "ChatML";
    case ChatFormat::llama3: return "Llama 3";
    case ChatFormat::gemma: return "Gemma";
  }
  return "?";
}

TemplateLookup recognise_chat_template(const std::string& source, const std::string& bos_text) {
  TemplateLookup found;
  ChatTemplate t;
  t.bos = bos_text;
  if (has(source, "<|start_header_id|>") && has(source, "<|eot_id|>")) {
    t.format = ChatFormat::llama3;
    t.llama_dated_system = has(source, "Cutting Knowledge Date");
  } else if (has(source, "<start_of_turn>") && has(source, "<end_of_turn>")) {
    t.format = ChatFormat::gemma;
  } else if (has(source, "<|im_start|>") && has(source, "<|im_end|>")) {
    t.format = ChatFormat::chatml;
    // A default system turn written as a literal in the template (Qwen2, Qwen2.5): the source
    // holds the Jinja escape \n as two characters.
    static const std::regex system_literal(R"(<\|im_start\|>system\\n([^'"{}<]*)<\|im_end\|>)");
    std::smatch m;
    if (std::regex_search(source, m, system_literal)) t.default_system = m[1].str();
    // The markers of the reasoning handling that qwen_assistant_turn renders.
    t.qwen_reasoning = has(source, "</think>") && has(source, "last_query_index");
  } else {
    found.error = "the model's chat template is not one exactq renders (it recognises ChatML/Qwen, Llama 3 and "
                  "Gemma templates): '" + excerpt(source) + "'; use /v1/completions with the prompt text";
    return found;
  }
  found.chat_template = t;
  return found;
}

TemplateLookup find_chat_template(const std::string& model_dir, const std::string& bos_text) {
  const std::filesystem::path dir(model_dir);
  std::string source;
  if (std::filesystem::exists(dir / "tokenizer_config.json")) {
    const auto config = nlohmann::json::parse(read_file(dir / "tokenizer_config.json"), nullptr, false);
    if (config.is_object() && config.contains("chat_template")) {
      const auto& ct = config["chat_template"];
      if (ct.is_string()) source = ct.get<std::string>();
      if (ct.is_array())
        for (const auto& item : ct)
          if (item.is_object() && item.value("name", "") == "default" && item.contains("template") && item["template"].is_string())
            source = item["template"].get<std::string>();
    }
  }
  if (source.empty() && std::filesystem::exists(dir / "chat_template.jinja")) source = read_file(dir / "chat_template.jinja");
  if (source.empty()) {
    TemplateLookup none;
    none.error = "the model has no chat template (neither tokenizer_config.json's chat_template nor "
                 "chat_template.jinja in '" + model_dir + "'); use /v1/completions with the prompt text";
    return none;
  }
  return recognise_chat_template(source, bos_text);
}

std::string render_chat(const ChatTemplate& t, const std::vector<ChatMessage>& messages) {
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant")
      throw std::invalid_argument("messages[" + std::to_string(i) + "].role: '" + role +
                                  "' is not one of system, user, assistant");
  }
  std::string out;
  const bool system_first = !messages.empty() && messages[0].role == "system";
  switch (t.format) {
    case ChatFormat::chatml: {
      if (!system_first && !t.default_system.empty()) out += "<|im_start|>system\n" + t.default_system + "<|im_end|>\n";
      const std::size_t last_query = t.qwen_reasoning && !messages.empty() ? qwen_last_query(messages) : 0;
      for (std::size_t i = 0; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        if (t.qwen_reasoning && m.role == "assistant")
          out += qwen_assistant_turn(m.content, i > last_query, i + 1 == messages.size());
        else
          out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      }
      out += "<|im_start|>assistant\n";
      break;
    }
    case ChatFormat::llama3: {
      out += t.bos;
      std::size_t first = 0;
      if (t.llama_dated_system) {
        // The date is the templates' fixed default, not today's, so a request renders the same
        // bytes whenever it is sent.
        out += "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n";
        if (system_first) {
          out += trim(messages[0].content);
          first = 1;
        }
        out += "<|eot_id|>";
      }
      for (std::size_t i = first; i < messages.size(); ++i)
        out += "<|start_header_id|>" + messages[i].role + "<|end_header_id|>\n\n" + trim(messages[i].content) + "<|eot_id|>";
      out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    }
    case ChatFormat::gemma: {
      out += t.bos;
      // The system message opens the first turn as it is (the template trims only the turns).
      std::string prefix = system_first ? messages[0].content + "\n\n" : "";
      const std::size_t first = system_first ? 1 : 0;
      for (std::size_t i = first; i < messages.size(); ++i) {
        // The template raises where the turns after the system message do not go user,
        // assistant, user, ...; a later system message passes only in an assistant's place.
        if ((messages[i].role == "user") != ((i - first) % 2 == 0))
          throw std::invalid_argument("messages[" + std::to_string(i) + "]: the Gemma template takes the roles alternating "
                                      "user/assistant/user/... (after a first system message), not '" + messages[i].role +
                                      "' here");
        const std::string role = messages[i].role == "assistant" ? "model" : messages[i].role;
        out += "<start_of_turn>" + role + "\n" + prefix + trim(messages[i].content) + "<end_of_turn>\n";
        prefix.clear();
      }
      out += "<start_of_turn>model\n";
      break;
    }
  }
  return out;
}

}  // namespace exactq::serve
