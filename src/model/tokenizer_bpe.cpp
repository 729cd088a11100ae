// The BPE model: the vocabulary and merges of tokenizer.json's "model", and one word's encoding
// by merges in rank order.
#include <queue>

#include <fmt/format.h>

#include "model/text.h"
#include "model/tokenizer_parts.h"

namespace exactq::tok {

namespace {

std::uint64_t pair_key(std::int32_t a, std::int32_t b) { return (std::uint64_t(std::uint32_t(a)) << 32) | std::uint32_t(b); }

// A merge's two parts: "a b" (one space, as older files write them) or ["a", "b"].
template <class W>
std::pair<std::string, std::string> merge_parts(const json& m, const W& w) {
  if (m.is_string()) {
    const std::string& s = m.get_ref<const std::string&>();
    const std::size_t space = s.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == s.size() || s.find(' ', space + 1) != std::string::npos)
      w().fail(fmt::format("merge '{}' is not two tokens separated by one space", printable(s)));
    return {s.substr(0, space), s.substr(space + 1)};
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
    return {m[0].get<std::string>(), m[1].get<std::string>()};
  w().fail(fmt::format("merge {} is not \"a b\" or [\"a\", \"b\"]", printable(m.dump())));
}

}  // namespace

Bpe parse_bpe(const json& model, const Where& w, std::string& encode_refusal) {
  const std::string type = w.string(model, "type");
  if (type != "BPE")
    (w / "type").fail(fmt::format("model type '{}' is not supported (BPE; WordPiece, Unigram and WordLevel are not)", printable(type)));
  // Options of encoding alone: refused when text is encoded (the first refusal is kept).
  const auto refuse = [&encode_refusal](const Where& at, const std::string& what) {
    try {
      at.fail(what);
    } catch (const CheckpointError& e) {
      if (encode_refusal.empty()) encode_refusal = e.what();
    }
  };
  if (const json* d = w.get(model, "dropout"); d != nullptr && !(d->is_number() && d->get<double>() == 0.0))
    refuse(w / "dropout", fmt::format("{} is not supported: encoding must be deterministic (null or 0)", printable(d->dump())));
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json* v = w.get(model, key);
    if (v != nullptr && !(v->is_string() && v->get_ref<const std::string&>().empty()))
      refuse(w / key, fmt::format("{} is not supported (null or empty)", printable(v->dump())));
  }

  Bpe bpe;
  bpe.fuse_unk = w.boolean(model, "fuse_unk", false);
  bpe.byte_fallback = w.boolean(model, "byte_fallback", false);
  bpe.ignore_merges = w.boolean(model, "ignore_merges", false);

  const json* vocab = w.get(model, "vocab");
  const Where wv = w / "vocab";
  if (vocab == nullptr || !vocab->is_object()) wv.fail("is missing or not an object");
  bpe.vocab.reserve(vocab->size());
  std::unordered_map<std::int32_t, const std::string*> by_id;
  by_id.reserve(vocab->size());
  // The field names of a refusal are formatted only on refusal: a vocabulary has 10^5 entries.
  for (const auto& [token, value] : vocab->items()) {
    const auto wt = [&, &token = token] { return Where{wv.file, fmt::format("{}['{}']", wv.path, printable(token))}; };
    const bool plain = value.is_number_unsigned() && value.get<std::uint64_t>() < std::uint64_t(kMaxId);
    const std::int32_t id = plain ? std::int32_t(value.get<std::uint64_t>()) : wt().id(value);
    if (token.empty()) wt().fail("the empty string is not a token");
    auto [it, fresh] = by_id.emplace(id, &token);
    if (!fresh) wt().fail(fmt::format("id {} is also the id of '{}'", id, printable(*it->second)));
    bpe.vocab.emplace(token, id);
  }

  if (auto unk = w.opt_string(model, "unk_token")) {
    const auto it = bpe.vocab.find(*unk);
    if (it == bpe.vocab.end()) (w / "unk_token").fail(fmt::format("'{}' is not in model.vocab", printable(*unk)));
    bpe.unk = it->second;
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = bpe.vocab.find(fmt::format("<0x{:02X}>", b));
    bpe.byte_tokens[std::size_t(b)] = it == bpe.vocab.end() ? -1 : it->second;
  }

  const json* merges = w.get(model, "merges");
  const Where wm = w / "merges";
  if (merges != nullptr && !merges->is_array()) wm.fail("is not a list");
  if (merges == nullptr) return bpe;
  bpe.merges.reserve(merges->size());
  for (std::size_t rank = 0; rank < merges->size(); ++rank) {
    const auto wr = [&] { return wm[rank]; };
    const auto parts = merge_parts((*merges)[rank], wr);
    const std::string &a = parts.first, &b = parts.second;
    const auto find = [&](const std::string& t) {
      const auto it = bpe.vocab.find(t);
      if (it == bpe.vocab.end()) wr().fail(fmt::format("merge of '{}' and '{}': '{}' is not in model.vocab", printable(a), printable(b), printable(t)));
      return it->second;
    };
    const std::int32_t ia = find(a), ib = find(b), merged = find(a + b);
    // A pair listed twice takes its later rank, as tokenizers' map of merges keeps the last.
    bpe.merges.insert_or_assign(pair_key(ia, ib), std::pair{std::int32_t(rank), merged});
  }
  return bpe;
}

void Bpe::encode_word(std::string_view word, std::vector<std::int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges) {
    if (const auto it = vocab.find(std::string(word)); it != vocab.end()) {
      out.push_back(it->second);
      return;
    }
  }
  struct Symbol {
    std::int32_t id, prev, next;
    bool alive;
  };
  std::vector<Symbol> sym;
  sym.reserve(word.size());
  const auto push = [&sym](std::int32_t id) {
    const auto n = std::int32_t(sym.size());
    sym.push_back({id, n - 1, n + 1, true});
  };
  // The characters, each its token, or its bytes' <0xNN> tokens, or the unknown token (one per
  // run of unknown characters with fuse_unk). A character none of these covers is dropped.
  std::optional<std::int32_t> pending_unk;
  std::string ch;
  for (std::size_t i = 0; i < word.size();) {
    const std::size_t begin = i;
    utf8_next(word, i);
    ch.assign(word.substr(begin, i - begin));
    if (const auto it = vocab.find(ch); it != vocab.end()) {
      if (pending_unk) push(*std::exchange(pending_unk, std::nullopt));
      push(it->second);
      continue;
    }
    if (byte_fallback) {
      bool all = true;
      for (unsigned char b : ch) all = all && byte_tokens[b] >= 0;
      if (all) {
        if (pending_unk) push(*std::exchange(pending_unk, std::nullopt));
        for (unsigned char b : ch) push(byte_tokens[b]);
        continue;
      }
    }
    if (unk) {
      if (pending_unk && !fuse_unk) push(*pending_unk);
      pending_unk = *unk;
    }
  }
  if (pending_unk) push(*pending_unk);
  if (sym.empty()) return;
  sym.back().next = -1;

  // Merges by rank, the lowest first and the leftmost among equal ranks; an entry whose pair has
  // changed since it was queued is stale and skipped.
  struct Candidate {
    std::int32_t rank, pos, merged;
    bool operator<(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate> queue;
  const auto consider = [&](std::int32_t pos) {
    const std::int32_t next = sym[std::size_t(pos)].next;
    if (next < 0) return;
    const auto it = merges.find(pair_key(sym[std::size_t(pos)].id, sym[std::size_t(next)].id));
    if (it != merges.end()) queue.push({it->second.first, pos, it->second.second});
  };
  for (std::int32_t p = 0; p + 1 < std::int32_t(sym.size()); ++p) consider(p);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = sym[std::size_t(c.pos)];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = sym[std::size_t(left.next)];
    const auto it = merges.find(pair_key(left.id, right.id));
    if (it == merges.end() || it->second.first != c.rank || it->second.second != c.merged) continue;
    left.id = c.merged;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) sym[std::size_t(right.next)].prev = c.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(c.pos);
  }
  for (std::int32_t p = 0; p >= 0; p = sym[std::size_t(p)].next) out.push_back(sym[std::size_t(p)].id);
}

}  // namespace exactq::tok
