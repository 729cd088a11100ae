#include "serve/chat_template.h"

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace exactq::serve {

namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Jinja's `trim`: Python's str.strip() of whitespace.
std::string trim(const std::string& s) {
  const char* space = " \t\n\r\f\v";
  const std::size_t a = s.find_first_not_of(space);
  if (a == std::string::npos) return {};
  return s.substr(a, s.find_last_not_of(space) - a + 1);
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
    if (role == "system" && i > 0 && t.format != ChatFormat::chatml)
      throw std::invalid_argument("messages[" + std::to_string(i) + "]: the " + std::string(to_string(t.format)) +
                                  " template takes a system message only first");
  }
  std::string out;
  const bool system_first = !messages.empty() && messages[0].role == "system";
  switch (t.format) {
    case ChatFormat::chatml:
      if (!system_first && !t.default_system.empty()) out += "<|im_start|>system\n" + t.default_system + "<|im_end|>\n";
      for (const auto& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      out += "<|im_start|>assistant\n";
      break;
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
      std::string prefix = system_first ? trim(messages[0].content) + "\n\n" : "";
      for (std::size_t i = system_first ? 1 : 0; i < messages.size(); ++i) {
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
