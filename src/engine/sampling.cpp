// Exact sampling (exactq/sampling.h).
#include "exactq/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "exactq/dtype.h"
#include "order/argmax.h"

namespace exactq {

namespace {

// A 64-bit finalizer (xor-shift and multiply rounds): every input bit affects every output bit.
std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// The token pick(row, r) gives for each row r of the decoder's logits, the row widened to f32.
template <typename Pick>
std::vector<std::int32_t> pick_rows(Decoder& decoder, Pick&& pick) {
  const std::vector<std::byte> bytes = decoder.logits();
  const std::int64_t rows = decoder.logits_rows(), vocab = decoder.vocab_size();
  std::vector<float> row(static_cast<std::size_t>(vocab));
  std::vector<std::int32_t> tokens;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t i = 0; i < vocab; ++i) row[std::size_t(i)] = load_f32(bytes.data(), std::size_t(r * vocab + i), decoder.dtype());
    tokens.push_back(pick(std::span<const float>(row), r));
  }
  return tokens;
}

}  // namespace

void validate(const SamplingOptions& o) {
  if (!std::isfinite(o.temperature) || o.temperature < 0)
    throw std::invalid_argument("temperature = " + std::to_string(o.temperature) + " must be a finite number >= 0");
  if (o.top_k < 0) throw std::invalid_argument("top_k = " + std::to_string(o.top_k) + " must be >= 0");
  if (!(o.top_p > 0 && o.top_p <= 1)) throw std::invalid_argument("top_p = " + std::to_string(o.top_p) + " must be in (0, 1]");
}

double sampling_uniform(std::uint64_t seed, std::int64_t position, std::int32_t token) {
  std::uint64_t h = mix(seed + 0x9e3779b97f4a7c15ull);
  h = mix(h ^ std::uint64_t(position));
  h = mix(h ^ (std::uint64_t(std::uint32_t(token)) << 1));
  return (double(h >> 11) + 0.5) * 0x1p-53;  // in (0, 1): never 0 or 1, so both logs are finite
}

std::int32_t sample_token(std::span<const float> logits, const SamplingOptions& o, std::int64_t position) {
  if (logits.empty()) throw std::invalid_argument("sample_token: an empty row of logits");
  // More likely first, the lower id on ties; a NaN logit counts as the least likely.
  auto value = [&](std::size_t i) { return std::isnan(logits[i]) ? -INFINITY : logits[i]; };
  auto better = [&](std::size_t a, std::size_t b) { return value(a) > value(b) || (value(a) == value(b) && a < b); };
  if (o.greedy()) {
    std::size_t best = 0;
    for (std::size_t i = 1; i < logits.size(); ++i)
      if (better(i, best)) best = i;
    return std::int32_t(best);
  }
  std::vector<std::size_t> order(logits.size());
  std::iota(order.begin(), order.end(), std::size_t(0));
  std::size_t n = order.size();
  if (o.top_k > 0 && std::size_t(o.top_k) < n) {
    n = std::size_t(o.top_k);
    std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(n), order.end(), better);
  } else if (o.top_p < 1) {
    std::sort(order.begin(), order.end(), better);
  }
  order.resize(n);
  if (o.top_p < 1) {
    if (o.top_k > 0) std::sort(order.begin(), order.end(), better);
    // The softmax at the temperature over the candidates, in double; the smallest most-likely
    // prefix whose probability reaches top_p.
    const double top = double(logits[order[0]]) / o.temperature;
    std::vector<double> weight(n);
    double total = 0;
    for (std::size_t i = 0; i < n; ++i) total += weight[i] = std::exp(double(logits[order[i]]) / o.temperature - top);
    double sum = 0;
    std::size_t keep = 0;
    while (keep < n) {
      sum += weight[keep++];
      if (sum >= o.top_p * total) break;
    }
    order.resize(std::max<std::size_t>(keep, 1));
  }
  std::size_t best = order[0];
  double best_key = -INFINITY;
  for (const std::size_t i : order) {
    if (std::isnan(logits[i])) continue;
    const double u = sampling_uniform(o.seed, position, std::int32_t(i));
    const double key = double(logits[i]) / o.temperature - std::log(-std::log(u));
    if (key > best_key || (key == best_key && i < best)) best = i, best_key = key;
  }
  return std::int32_t(best);
}

TokenPicker sampling_picker(const SamplingOptions& options) {
  validate(options);
  if (options.greedy()) return {};
  return [options](Decoder& decoder, std::int64_t position) {
    return pick_rows(decoder, [&](std::span<const float> row, std::int64_t r) { return sample_token(row, options, position + r); });
  };
}

TokenLogprobs token_logprobs(std::span<const float> logits, std::int32_t token, int top) {
  if (logits.empty()) throw std::invalid_argument("token_logprobs: an empty row of logits");
  if (token < 0 || std::size_t(token) >= logits.size())
    throw std::invalid_argument("token_logprobs: token " + std::to_string(token) + " is outside the row");
  if (top < 0) throw std::invalid_argument("token_logprobs: top = " + std::to_string(top) + " must be >= 0");
  double max = -INFINITY;
  for (const float v : logits)
    if (!std::isnan(v)) max = std::max(max, double(v));
  double sum = 0;
  if (std::isfinite(max))
    for (const float v : logits)
      if (!std::isnan(v)) sum += std::exp(double(v) - max);
  auto logprob = [&](std::size_t i) -> double {
    const float v = logits[i];
    if (std::isnan(v) || !(sum > 0)) return -INFINITY;
    return double(v) - max - std::log(sum);
  };
  TokenLogprobs out{logprob(std::size_t(token)), {}};
  std::vector<std::size_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), std::size_t(0));
  const std::size_t n = std::min(ids.size(), std::size_t(top));
  auto value = [&](std::size_t i) -> double { return std::isnan(logits[i]) ? -INFINITY : double(logits[i]); };
  std::partial_sort(ids.begin(), ids.begin() + std::ptrdiff_t(n), ids.end(),
                    [&](std::size_t a, std::size_t b) { return value(a) > value(b) || (value(a) == value(b) && a < b); });
  for (std::size_t i = 0; i < n; ++i) out.top.emplace_back(std::int32_t(ids[i]), logprob(ids[i]));
  return out;
}

TokenPicker logprob_picker(const SamplingOptions& options, int top,
                           std::shared_ptr<std::map<std::int64_t, TokenLogprobs>> into) {
  validate(options);
  if (!into) throw std::invalid_argument("logprob_picker: no map to write into");
  return [options, top, into](Decoder& decoder, std::int64_t position) {
    return pick_rows(decoder, [&](std::span<const float> row, std::int64_t r) {
      const std::int32_t token = options.greedy() ? std::int32_t(order::argmax(row.data(), std::int64_t(row.size())))
                                                  : sample_token(row, options, position + r);
      (*into)[position + r] = token_logprobs(row, token, top);
      return token;
    });
  };
}

}  // namespace exactq
