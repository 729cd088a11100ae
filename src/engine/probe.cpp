// The exactness probe and its gate (exactq/probe.h).
#include "exactq/probe.h"

#include <algorithm>
#include <random>
#include <stdexcept>

namespace exactq {

namespace {

[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument("[exactq] probe: " + what); }

std::vector<std::int32_t> random_tokens(std::size_t n, std::int64_t vocab, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::int64_t> pick(0, vocab - 1);
  std::vector<std::int32_t> t(n);
  for (auto& x : t) x = std::int32_t(pick(rng));
  return t;
}

// Every traced activation of one forward, by (layer, op) in forward order.
struct Trace {
  std::vector<std::pair<std::int64_t, std::string>> order;
  std::map<std::pair<std::int64_t, std::string>, std::vector<std::vector<std::byte>>> rows;
  void add(const TracePoint& p) {
    const auto key = std::make_pair(p.layer, std::string(p.op));
    auto& r = rows[key];
    if (r.empty()) order.push_back(key);
    const std::size_t width = p.values.size() / std::size_t(p.rows);
    for (std::int64_t i = 0; i < p.rows; ++i)
      r.emplace_back(p.values.begin() + std::ptrdiff_t(std::size_t(i) * width),
                     p.values.begin() + std::ptrdiff_t(std::size_t(i + 1) * width));
  }
};

// Re-runs chain and block with tracing; the first (layer, op) whose rows differ.
void locate(Decoder& d, std::int64_t start, const std::vector<std::int32_t>& block, ProbeCase& c) {
  Trace chain, wide;
  d.set_tracer([&](const TracePoint& p) { chain.add(p); });
  d.truncate(start);
  for (std::size_t i = 0; i < block.size(); ++i) d.forward(std::span(block).subspan(i, 1), start + std::int64_t(i));
  d.set_tracer([&](const TracePoint& p) { wide.add(p); });
  d.forward(block, start);
  d.set_tracer({});
  for (const auto& key : chain.order)
    if (chain.rows[key] != wide.rows[key]) {
      c.first_layer = key.first;
      c.first_op = key.second;
      return;
    }
  c.first_op = "(not reproduced)";
}

}  // namespace

bool ProbeReport::equal() const {
  return std::all_of(cases.begin(), cases.end(), [](const ProbeCase& c) { return c.equal; });
}

ProbeReport probe(Backend& backend, const Checkpoint& checkpoint, KernelFamily family, const ProbeOptions& o,
                  const std::function<void(const ProbeCase&)>& progress) {
  if (o.blocks.empty()) fail("no block widths");
  for (std::int64_t k : o.blocks)
    if (k < 2 || k > 4096) fail("block width " + std::to_string(k) + " is out of range [2, 4096]");
  if (o.draws < 1 || o.draws > 1000) fail("draws = " + std::to_string(o.draws) + " is out of range [1, 1000]");
  if (o.long_context < 1 || o.long_context > (std::int64_t(1) << 20))
    fail("long_context = " + std::to_string(o.long_context) + " is out of range");
  const std::int64_t widest = *std::max_element(o.blocks.begin(), o.blocks.end());
  const std::int64_t longest = std::max<std::int64_t>(o.draws >= 3 ? o.long_context + 64 : 0, 251);
  const std::int64_t context = longest + widest;
  const std::int64_t model_max = checkpoint.config().max_position_embeddings;
  if (model_max > 0 && context > model_max)
    fail("the longest draw needs " + std::to_string(context) + " positions; the model holds " + std::to_string(model_max));
  Decoder d(backend, checkpoint, {family, context});
  const std::int64_t vocab = checkpoint.embed_tokens().n;
  ProbeReport report;
  std::mt19937_64 rng(o.seed);
  for (std::int64_t k : o.blocks)
    for (int draw = 0; draw < o.draws; ++draw) {
      // Prompt lengths: short, then medium, and the last of 3+ draws past long_context.
      const bool long_draw = o.draws >= 3 && draw == o.draws - 1;
      const std::int64_t start = long_draw ? o.long_context + 1 + std::int64_t(rng() % 63)
                                           : 1 + std::int64_t(rng() % std::uint64_t(draw == 0 ? 32 : 250));
      const auto prompt = random_tokens(std::size_t(start), vocab, rng);
      const auto block = random_tokens(std::size_t(k), vocab, rng);
      ProbeCase c;
      c.block = k;
      c.draw = draw;
      c.start = start;
      d.forward(prompt, 0, Decoder::Rows::last);
      std::vector<std::byte> chain;
      for (std::int64_t i = 0; i < k; ++i) {
        d.forward(std::span(block).subspan(std::size_t(i), 1), start + i);
        const auto l = d.logits();
        chain.insert(chain.end(), l.begin(), l.end());
      }
      d.forward(block, start);
      const auto wide = d.logits();
      c.total_bytes = std::int64_t(chain.size());
      const std::size_t row = chain.size() / std::size_t(k);
      for (std::size_t i = 0; i < chain.size(); ++i)
        if (chain[i] != wide[i]) {
          if (c.first_row < 0) c.first_row = std::int64_t(i / row);
          ++c.differing_bytes;
        }
      c.equal = c.differing_bytes == 0;
      if (!c.equal) locate(d, start, block, c);
      report.cases.push_back(c);
      if (progress) progress(c);
    }
  return report;
}

bool ExactnessGate::allows(Backend& backend, const Checkpoint& checkpoint, const std::string& model_dir,
                           std::int64_t block, KernelFamily family, const ProbeOptions& options) {
  const auto key = std::make_tuple(model_dir, block, family, std::string(backend.name()));
  if (const auto it = verdicts_.find(key); it != verdicts_.end()) return it->second;
  ProbeOptions o = options;
  o.blocks = {block};
  last_ = probe(backend, checkpoint, family, o);
  return verdicts_[key] = last_.equal();
}

}  // namespace exactq
