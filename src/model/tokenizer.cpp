// The Tokenizer: opening a model directory (tokenizer.json and the config files' BOS/EOS),
// encode, decode and the streaming decoder.
#include "exactq/tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "model/text.h"
#include "model/tokenizer_parts.h"

namespace exactq {

namespace {

using tok::json;
using tok::Where;

std::string read_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) checkpoint_fail(path.string(), "is missing");
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  if (!f) checkpoint_fail(path.string(), "cannot be read");
  return s.str();
}

json parse_config(const std::string& text, const std::string& file) {
  try {
    json j = parse_json_strict(text, 64);
    if (!j.is_object()) checkpoint_fail(file, "is not a JSON object");
    return j;
  } catch (const JsonRefused& e) {
    checkpoint_fail(file, e.what());
  }
}

std::int32_t existing_id(const Tokenizer::Impl& t, const json& value, const Where& w) {
  const std::int32_t id = w.id(value);
  if (std::size_t(id) >= t.text.size() || t.kind[std::size_t(id)] == 0)
    w.fail(fmt::format("token id {} is not in the vocabulary of {} tokens", id, t.text.size()));
  return id;
}

// eos_token_id / bos_token_id: an id or a list of ids.
void ids_of(const Tokenizer::Impl& t, const json& object, const char* key, const Where& w, std::vector<std::int32_t>& out) {
  const json* v = w.get(object, key);
  if (v == nullptr) return;
  if (!v->is_array()) {
    out.push_back(existing_id(t, *v, w / key));
    return;
  }
  for (std::size_t i = 0; i < v->size(); ++i) out.push_back(existing_id(t, (*v)[i], (w / key)[i]));
}

// tokenizer_config.json's bos_token / eos_token: a string, or {"content": ...}.
std::optional<std::int32_t> named_token(const Tokenizer::Impl& t, const json& object, const char* key, const Where& w) {
  const json* v = w.get(object, key);
  if (v == nullptr) return std::nullopt;
  const std::string content = v->is_object() ? (w / key).string(*v, "content") : w.string(object, key);
  const std::size_t n = std::find(t.text.begin(), t.text.end(), content) - t.text.begin();
  if (n == t.text.size() || t.kind[n] == 0) (w / key).fail(fmt::format("'{}' is not a token", printable(content)));
  return std::int32_t(n);
}

void read_configs(Tokenizer::Impl& t, const TokenizerFiles& f) {
  namespace fs = std::filesystem;
  std::vector<std::int32_t> eos;
  std::optional<std::int32_t> bos;
  if (f.tokenizer_config) {
    const std::string file = (fs::path(f.dir) / "tokenizer_config.json").string();
    const json j = parse_config(*f.tokenizer_config, file);
    const Where w{&file, ""};
    bos = named_token(t, j, "bos_token", w);
    const auto eos_token = named_token(t, j, "eos_token", w);
    if (eos_token) eos.push_back(*eos_token);
    // Where set, these decide what encode adds, as the Llama and Gemma tokenizer classes of
    // transformers rebuild the post-processor from them.
    if (const json* add = w.get(j, "add_bos_token")) {
      if (w.boolean(j, "add_bos_token", false) && !bos) (w / "add_bos_token").fail("is true but bos_token is not set");
      t.prefix.clear();
      if (add->get<bool>()) t.prefix.push_back(*bos);
    }
    if (const json* add = w.get(j, "add_eos_token")) {
      if (w.boolean(j, "add_eos_token", false) && !eos_token) (w / "add_eos_token").fail("is true but eos_token is not set");
      t.suffix.clear();
      if (add->get<bool>()) t.suffix.push_back(*eos_token);
    }
  }
  for (const auto& [text, name] : {std::pair{f.config, "config.json"}, std::pair{f.generation_config, "generation_config.json"}}) {
    if (!text) continue;
    const std::string file = (fs::path(f.dir) / name).string();
    const json j = parse_config(*text, file);
    Where w{&file, ""};
    std::vector<std::int32_t> b;
    ids_of(t, j, "eos_token_id", w, eos);
    ids_of(t, j, "bos_token_id", w, b);
    if (const json* tc = w.get(j, "text_config"); tc != nullptr && tc->is_object()) {
      ids_of(t, *tc, "eos_token_id", w / "text_config", eos);
      ids_of(t, *tc, "bos_token_id", w / "text_config", b);
    }
    if (!bos && !b.empty()) bos = b.front();
  }
  std::sort(eos.begin(), eos.end());
  eos.erase(std::unique(eos.begin(), eos.end()), eos.end());
  t.eos = std::move(eos);
  t.bos = bos ? bos : t.prefix.empty() ? std::nullopt : std::optional(t.prefix.front());
}

}  // namespace

// ---- opening ---------------------------------------------------------------------------------

Tokenizer Tokenizer::from_files(const TokenizerFiles& files) {
  const std::string file = (std::filesystem::path(files.dir) / "tokenizer.json").string();
  auto t = parse_tokenizer_json(files.tokenizer_json, file);
  read_configs(*t, files);
  return Tokenizer(std::move(t));
}

Tokenizer Tokenizer::from_json(std::string_view tokenizer_json, const std::string& file_name) {
  auto t = parse_tokenizer_json(tokenizer_json, file_name);
  t->bos = t->prefix.empty() ? std::nullopt : std::optional(t->prefix.front());
  return Tokenizer(std::move(t));
}

Tokenizer Tokenizer::open(const std::string& model_dir) {
  namespace fs = std::filesystem;
  TokenizerFiles f;
  f.dir = model_dir;
  f.tokenizer_json = read_file(fs::path(model_dir) / "tokenizer.json");
  std::error_code ec;
  const auto optional_file = [&](const char* name) -> std::optional<std::string> {
    const fs::path p = fs::path(model_dir) / name;
    if (!fs::exists(p, ec)) return std::nullopt;
    return read_file(p);
  };
  f.tokenizer_config = optional_file("tokenizer_config.json");
  f.config = optional_file("config.json");
  f.generation_config = optional_file("generation_config.json");
  return from_files(f);
}

// ---- encode ----------------------------------------------------------------------------------

void Tokenizer::Impl::check_id(std::int32_t id) const {
  if (!has(id))
    throw std::invalid_argument(fmt::format("tokenizer: token id {} is not in the vocabulary of {} ids", id, text.size()));
}

void Tokenizer::Impl::encode_text(std::string_view input, std::vector<std::int32_t>& out) const {
  // Text between added tokens goes through the normalizer, then through the added tokens that
  // match normalized text, then the pre-tokenizer and the model; added tokens give their ids.
  const auto each_gap = [this](std::string_view s, const tok::AddedMatcher& m, bool at_start, std::vector<std::int32_t>& ids,
                               auto&& gap) {
    std::size_t at = 0;
    for (const auto& match : m.empty() ? std::vector<tok::AddedMatcher::Match>{} : m.find(s, added)) {
      if (match.begin > at) gap(s.substr(at, match.begin - at), at_start && at == 0);
      ids.push_back(added[match.index].id);
      at = match.end;
    }
    if (at < s.size()) gap(s.substr(at), at_start && at == 0);
  };
  std::vector<tok::Piece> words;
  each_gap(input, raw_added, true, out, [&](std::string_view gap, bool at_start) {
    const std::string normalized = normalizer.apply(std::string(gap));
    each_gap(normalized, normalized_added, at_start, out, [&](std::string_view piece, bool piece_at_start) {
      words.clear();
      pre_tokenizer.apply(tok::Piece{std::string(piece), piece_at_start}, words);
      for (const tok::Piece& w : words) bpe.encode_word(w.text, out);
    });
  });
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, bool add_special) const {
  if (!impl_->encode_refusal.empty()) throw CheckpointError(impl_->encode_refusal);
  if (const auto bad = tok::utf8_invalid_at(text))
    throw std::invalid_argument(fmt::format("tokenizer: the text is not UTF-8 at byte {} (0x{:02x})", *bad,
                                            static_cast<unsigned char>(text[*bad])));
  std::vector<std::int32_t> out;
  if (add_special) out = impl_->prefix;
  impl_->encode_text(text, out);
  if (add_special) out.insert(out.end(), impl_->suffix.begin(), impl_->suffix.end());
  return out;
}

// ---- decode ----------------------------------------------------------------------------------

// decode() is the stream run to its end, so that the two cannot differ.
std::string Tokenizer::decode(std::span<const std::int32_t> ids, bool skip_special) const {
  Stream s = stream(skip_special);
  std::string out;
  for (const std::int32_t id : ids) out += s.step(id);
  return out + s.finish();
}

struct Tokenizer::Stream::State {
  bool skip_special = false;
  bool first = true;
  int strip_left = 0;
  std::string pending;  // decoded bytes not yet given out
  std::string run;      // the bytes of the byte tokens (ByteFallback) since the last other token
};

Tokenizer::Stream Tokenizer::stream(bool skip_special) const {
  Stream s;
  s.impl_ = impl_;
  s.state_ = std::make_shared<Stream::State>();
  s.state_->skip_special = skip_special;
  s.state_->strip_left = impl_->decoder.strip_start;
  return s;
}

namespace {

// A run of byte tokens ends: valid UTF-8 gives its text, anything else one U+FFFD per byte.
void end_run(std::string& run, std::string& pending) {
  if (run.empty()) return;
  if (!tok::utf8_invalid_at(run)) pending += run;
  else
    for (std::size_t i = 0; i < run.size(); ++i) pending += "\xef\xbf\xbd";
  run.clear();
}

// Strip after Fuse: removes up to strip_left leading copies of `strip` from what comes first.
// False while the output so far could still turn out to begin with one (it waits).
bool strip_start(std::string& pending, int& strip_left, const std::string& strip, bool last) {
  while (strip_left > 0 && pending.starts_with(strip)) {
    pending.erase(0, strip.size());
    --strip_left;
  }
  if (strip_left > 0 && !last && std::string_view(strip).starts_with(pending)) return false;
  strip_left = 0;
  return true;
}

}  // namespace

std::string Tokenizer::Stream::step(std::int32_t id) {
  const Impl& t = *impl_;
  State& s = *state_;
  // An id no token has (a padded embedding's) decodes to nothing, as in tokenizers.
  if (!t.has(id) || (s.skip_special && t.kind[std::size_t(id)] == 2)) return {};
  tok::DecodedPiece piece = t.decoder.piece(t.text[std::size_t(id)], s.first);
  s.first = false;
  if (piece.byte_token) {
    s.run += piece.bytes;  // its text depends on the whole run: it waits for the run's end
    return {};
  }
  end_run(s.run, s.pending);
  s.pending += piece.bytes;
  if (!strip_start(s.pending, s.strip_left, t.decoder.strip_content, false)) return {};
  // An incomplete UTF-8 sequence at the end waits for the bytes that may complete it.
  const std::size_t cut = s.pending.size() - tok::utf8_incomplete_tail(s.pending);
  std::string out = tok::utf8_lossy(std::string_view(s.pending).substr(0, cut));
  s.pending.erase(0, cut);
  return out;
}

std::string Tokenizer::Stream::finish() {
  State& s = *state_;
  end_run(s.run, s.pending);
  strip_start(s.pending, s.strip_left, impl_->decoder.strip_content, true);
  std::string out = tok::utf8_lossy(s.pending);
  s.pending.clear();
  return out;
}

// ---- vocabulary ------------------------------------------------------------------------------

std::optional<std::int32_t> Tokenizer::bos_id() const { return impl_->bos; }
const std::vector<std::int32_t>& Tokenizer::eos_ids() const { return impl_->eos; }
bool Tokenizer::is_eos(std::int32_t id) const { return std::binary_search(impl_->eos.begin(), impl_->eos.end(), id); }
std::int32_t Tokenizer::vocab_size() const { return std::int32_t(impl_->text.size()); }
bool Tokenizer::has_token(std::int32_t id) const { return impl_->has(id); }

const std::string& Tokenizer::token_text(std::int32_t id) const {
  impl_->check_id(id);
  return impl_->text[std::size_t(id)];
}

std::optional<std::int32_t> Tokenizer::token_id(std::string_view text) const {
  if (const auto it = impl_->bpe.vocab.find(std::string(text)); it != impl_->bpe.vocab.end()) return it->second;
  for (const tok::Added& a : impl_->added)
    if (a.content == text) return a.id;
  return std::nullopt;
}

bool Tokenizer::is_special(std::int32_t id) const {
  impl_->check_id(id);
  return impl_->kind[std::size_t(id)] == 2;
}

}  // namespace exactq
