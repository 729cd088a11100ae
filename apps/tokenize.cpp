// `exactq tokenize --model DIR (--text T | --file F | --decode IDS) [--no-special] [--json]`: the
// model's tokenizer (DIR/tokenizer.json and its config files) without the model: text to ids, or
// ids to text, as `generate` would see them.
#include "tokenize.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "exactq/tokenizer.h"
#include "generate.h"

namespace exactq::cli {

namespace {

struct Args {
  std::string model, text, file, decode;
  bool no_special = false, json = false;
};

std::string read_text_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw std::invalid_argument("--file: '" + path + "' is not a readable file");
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  if (!in && !in.eof()) throw std::invalid_argument("--file: '" + path + "' cannot be read");
  return s.str();
}

nlohmann::json tokens_of(const Tokenizer& t, const std::vector<std::int32_t>& ids) {
  nlohmann::json tokens = nlohmann::json::array();
  for (const std::int32_t id : ids) tokens.push_back(t.has_token(id) ? nlohmann::json(t.token_text(id)) : nlohmann::json(nullptr));
  return tokens;
}

std::string joined(const std::vector<std::int32_t>& ids) {
  std::string out;
  for (const std::int32_t id : ids) out += (out.empty() ? "" : ",") + std::to_string(id);
  return out;
}

void run(const Args& a) {
  if (int(!a.text.empty()) + int(!a.file.empty()) + int(!a.decode.empty()) != 1)
    throw std::invalid_argument("tokenize: give exactly one of --text, --file and --decode");
  const Tokenizer t = Tokenizer::open(a.model);
  const bool add_special = !a.no_special;
  if (!a.decode.empty()) {
    const std::vector<std::int32_t> ids = parse_token_ids(a.decode, "--decode");
    const std::string text = t.decode(ids, a.no_special);
    if (!a.json) {
      fmt::print("{}\n", text);
      return;
    }
    const nlohmann::json j = {{"ids", ids}, {"tokens", tokens_of(t, ids)}, {"text", t.decode(ids)},
                              {"text_without_special", t.decode(ids, true)}};
    fmt::print("{}\n", j.dump());
    return;
  }
  const std::string text = a.file.empty() ? a.text : read_text_file(a.file);
  const std::vector<std::int32_t> ids = t.encode(text, add_special);
  if (!a.json) {
    fmt::print("{}\n", joined(ids));
    return;
  }
  const nlohmann::json j = {{"ids", ids}, {"tokens", tokens_of(t, ids)}, {"count", ids.size()},
                            {"decoded", t.decode(ids)}, {"decoded_without_special", t.decode(ids, true)}};
  fmt::print("{}\n", j.dump());
}

}  // namespace

void add_tokenize_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("tokenize", "Text to token ids and back with a model's tokenizer.json (no weights needed)");
  cmd->footer(
      "Prints the ids separated by commas (or with --decode the text); --json prints one JSON object with the ids,\n"
      "the tokens' strings and the decoded text. Special tokens (BOS) are added as generate adds them unless --no-special.\n"
      "Exit status: 0 done, 2 bad arguments, text that is not UTF-8 or a malformed tokenizer (the message names the value).");
  auto a = std::make_shared<Args>();
  add_text_option(cmd, "--model", a->model, "the model directory (tokenizer.json, and its config files where present)")->required();
  add_text_option(cmd, "--text", a->text, "the text to encode");
  add_text_option(cmd, "--file", a->file, "a file whose text (UTF-8) to encode");
  add_text_option(cmd, "--decode", a->decode, "token ids to decode instead, e.g. 1,2,3");
  cmd->add_flag("--no-special", a->no_special, "encode without the special tokens; decode without printing them");
  cmd->add_flag("--json", a->json, "print one JSON object (ids, tokens, text) instead");
  cmd->callback([a, &exit_code] {
    run(*a);
    exit_code = 0;
  });
}

}  // namespace exactq::cli
