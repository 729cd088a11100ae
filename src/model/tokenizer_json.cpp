// tokenizer.json's top level: the sections, the added tokens and the post-processor's template.
#include <fmt/format.h>

#include "model/text.h"
#include "model/tokenizer_parts.h"

namespace exactq {

namespace {

using tok::json;
using tok::Where;

// Nesting of the deepest section tokenizers writes (post_processor.processors[i].special_tokens
// .NAME.ids), with room to spare.
constexpr int kMaxDepth = 32;

std::vector<tok::Added> parse_added(const json* list, const Where& w) {
  std::vector<tok::Added> out;
  if (list == nullptr) return out;
  if (!list->is_array()) w.fail("is not a list");
  for (std::size_t i = 0; i < list->size(); ++i) {
    const Where wi = w[i];
    const json& t = (*list)[i];
    tok::Added a;
    if (!t.is_object() || !t.contains("id")) wi.fail("is not an object with an id");
    a.id = (wi / "id").id(t["id"]);
    a.content = wi.string(t, "content");
    if (a.content.empty()) (wi / "content").fail("is empty");
    a.special = wi.boolean(t, "special", false);
    a.lstrip = wi.boolean(t, "lstrip", false);
    a.rstrip = wi.boolean(t, "rstrip", false);
    a.single_word = wi.boolean(t, "single_word", false);
    a.normalized = wi.boolean(t, "normalized", !a.special);
    out.push_back(std::move(a));
  }
  return out;
}

// TemplateProcessing's "single": the special tokens before and after $A.
void parse_template(const json& p, const Where& w, Tokenizer::Impl& t) {
  const json* single = w.get(p, "single");
  const json* specials = w.get(p, "special_tokens");
  if (single == nullptr || !single->is_array()) (w / "single").fail("is missing or not a list");
  bool seen_a = false;
  for (std::size_t i = 0; i < single->size(); ++i) {
    const Where wi = (w / "single")[i];
    const json& item = (*single)[i];
    if (!item.is_object() || item.size() != 1) wi.fail(fmt::format("{} is not {{\"SpecialToken\": ...}} or {{\"Sequence\": ...}}", printable(item.dump())));
    if (const json* seq = wi.get(item, "Sequence")) {
      const std::string which = (wi / "Sequence").string(*seq, "id");
      if (which != "A" || seen_a) (wi / "Sequence").fail(fmt::format("sequence '{}' is not the one $A of a single sequence", printable(which)));
      seen_a = true;
      continue;
    }
    const json* special = wi.get(item, "SpecialToken");
    if (special == nullptr) wi.fail(fmt::format("{} is not {{\"SpecialToken\": ...}} or {{\"Sequence\": ...}}", printable(item.dump())));
    const std::string name = (wi / "SpecialToken").string(*special, "id");
    const Where ws = w / "special_tokens" / name;
    const json* entry = specials == nullptr ? nullptr : (w / "special_tokens").get(*specials, name.c_str());
    if (entry == nullptr) ws.fail("is missing: the template names it");
    const json* ids = ws.get(*entry, "ids");
    if (ids == nullptr || !ids->is_array()) (ws / "ids").fail("is missing or not a list");
    for (std::size_t k = 0; k < ids->size(); ++k) {
      const std::int32_t id = (ws / "ids")[k].id((*ids)[k]);
      if (std::size_t(id) >= t.text.size() || t.kind[std::size_t(id)] == 0)
        (ws / "ids")[k].fail(fmt::format("token id {} is not in the vocabulary", id));
      (seen_a ? t.suffix : t.prefix).push_back(id);
    }
  }
  if (!seen_a) (w / "single").fail("has no {\"Sequence\": {\"id\": \"A\"}}");
}

void parse_post_processor(const json* p, const Where& w, Tokenizer::Impl& t) {
  if (p == nullptr) return;
  std::vector<std::pair<const json*, Where>> steps;
  if (w.string(*p, "type") == "Sequence") {
    const json* list = w.get(*p, "processors");
    if (list == nullptr || !list->is_array()) (w / "processors").fail("is missing or not a list");
    for (std::size_t i = 0; i < list->size(); ++i) steps.emplace_back(&(*list)[i], (w / "processors")[i]);
  } else {
    steps.emplace_back(p, w);
  }
  bool templated = false;
  for (const auto& [step, ws] : steps) {
    const std::string type = ws.string(*step, "type");
    if (type == "ByteLevel") continue;  // it adjusts offsets only
    if (type != "TemplateProcessing")
      (ws / "type").fail(fmt::format("post-processor '{}' is not supported (Sequence, ByteLevel, TemplateProcessing)", printable(type)));
    if (templated) ws.fail("a second TemplateProcessing is not supported");
    templated = true;
    parse_template(*step, ws, t);
  }
}

}  // namespace

std::shared_ptr<Tokenizer::Impl> parse_tokenizer_json(std::string_view text, const std::string& file) {
  json root;
  try {
    root = parse_json_strict(text, kMaxDepth);
  } catch (const JsonRefused& e) {
    checkpoint_fail(file, e.what());
  }
  auto t = std::make_shared<Tokenizer::Impl>();
  t->file = file;
  const Where w{&t->file, ""};
  if (!root.is_object()) w.fail("is not a JSON object");
  const json* model = w.get(root, "model");
  if (model == nullptr || !model->is_object()) (w / "model").fail("is missing or not an object");
  t->bpe = tok::parse_bpe(*model, w / "model", t->encode_refusal);
  // The sections only encoding uses: a refusal waits until text is encoded.
  const auto deferred = [&t](auto&& parse) {
    try {
      if (t->encode_refusal.empty()) parse();
    } catch (const CheckpointError& e) {
      t->encode_refusal = e.what();
    }
  };
  deferred([&] { t->normalizer = tok::parse_normalizer(w.get(root, "normalizer"), w / "normalizer"); });
  deferred([&] { t->pre_tokenizer = tok::parse_pre_tokenizer(w.get(root, "pre_tokenizer"), w / "pre_tokenizer"); });
  t->decoder = tok::parse_decoder(w.get(root, "decoder"), w / "decoder");
  t->added = parse_added(w.get(root, "added_tokens"), w / "added_tokens");

  std::int64_t size = 0;
  for (const auto& [token, id] : t->bpe.vocab) size = std::max<std::int64_t>(size, std::int64_t(id) + 1);
  for (const auto& a : t->added) size = std::max<std::int64_t>(size, std::int64_t(a.id) + 1);
  t->text.resize(std::size_t(size));
  t->kind.assign(std::size_t(size), 0);
  for (const auto& [token, id] : t->bpe.vocab) {
    t->text[std::size_t(id)] = token;
    t->kind[std::size_t(id)] = 1;
  }
  std::unordered_map<std::string, std::int32_t> added_ids;
  for (std::size_t i = 0; i < t->added.size(); ++i) {
    const tok::Added& a = t->added[i];
    const Where wi = (w / "added_tokens")[i];
    // An added token may repeat a vocabulary entry (Llama 2 and Gemma list <s>, </s> in both),
    // but only with the same id.
    if (const auto it = t->bpe.vocab.find(a.content); it != t->bpe.vocab.end() && it->second != a.id)
      (wi / "id").fail(fmt::format("'{}' has id {} here but id {} in model.vocab", printable(a.content), a.id, it->second));
    std::string& slot = t->text[std::size_t(a.id)];
    if (t->kind[std::size_t(a.id)] != 0 && slot != a.content)
      (wi / "id").fail(fmt::format("id {} of '{}' is already the id of '{}'", a.id, printable(a.content), printable(slot)));
    if (!added_ids.emplace(a.content, a.id).second) (wi / "content").fail(fmt::format("'{}' is added twice", printable(a.content)));
    slot = a.content;
    t->kind[std::size_t(a.id)] = a.special ? 2 : 1;
    if (a.normalized) {
      if (!t->encode_refusal.empty()) continue;  // the normalizer is not there to match after
      const std::string key = t->normalizer.apply(a.content);
      if (!key.empty()) t->normalized_added.add(key, i);
    } else {
      t->raw_added.add(a.content, i);
    }
  }
  deferred([&] { parse_post_processor(w.get(root, "post_processor"), w / "post_processor", *t); });
  if (!t->encode_refusal.empty()) {
    t->prefix.clear();
    t->suffix.clear();
  }
  return t;
}

}  // namespace exactq
