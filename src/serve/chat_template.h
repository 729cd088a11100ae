// Chat templates by recognition: a checkpoint's Jinja chat_template is matched against the
// families exactq renders natively (ChatML as Qwen uses it, Llama 3, Gemma), and the messages are
// rendered as that template renders them with add_generation_prompt. A template that is none of
// them is refused by name rather than rendered approximately.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace exactq::serve {

struct ChatMessage {
  std::string role;  // system, user or assistant
  std::string content;
};

enum class ChatFormat { chatml, llama3, gemma };

struct ChatTemplate {
  ChatFormat format = ChatFormat::chatml;
  std::string bos;             // the BOS token's text, where the template writes it
  std::string default_system;  // ChatML: the system turn a template adds where none is given
  bool llama_dated_system = false;  // Llama 3.1+: the system turn with the knowledge and today's date
  // Qwen3: an assistant turn's <think> reasoning is dropped before the last user query and
  // written as a think block after it.
  bool qwen_reasoning = false;
};
const char* to_string(ChatFormat format);

// The template of a model directory: tokenizer_config.json's chat_template (a string, or a list
// of named templates of which "default" is taken), or chat_template.jinja. nullopt where there is
// none; `description` then says so, or names the template that is not recognised (`error`).
struct TemplateLookup {
  std::optional<ChatTemplate> chat_template;
  std::string error;  // why chat is refused, where chat_template is empty
};
TemplateLookup find_chat_template(const std::string& model_dir, const std::string& bos_text);
// From the template's Jinja source alone.
TemplateLookup recognise_chat_template(const std::string& source, const std::string& bos_text);

// The prompt text, the generation prompt (the assistant's turn opening) included. Throws
// std::invalid_argument naming the message where a role is not one the format has, or where the
// template itself refuses the list (Gemma: roles not alternating user/assistant).
std::string render_chat(const ChatTemplate& chat_template, const std::vector<ChatMessage>& messages);

}  // namespace exactq::serve
