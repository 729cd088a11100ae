// The decoder's ops on the CPU backend, block vs chain, bitwise: M rows (at positions p..p+M-1)
// computed in one call equal the same rows computed one call each, for M = 1..16, random positions,
// cache lengths and windows. Each op's comparison is run in the same test on a variant that
// depends on M (a different order or rounding when M > 1), which it must catch: the negative
// control that shows the comparison can fail.
#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "exactq/backend.h"
#include "order/attention.h"
#include "order/dense.h"
#include "order/elementwise.h"
#include "order/norm.h"
#include "order/rope.h"
#include "test_util.h"

namespace exactq::test {
namespace {

using Bytes = std::vector<std::byte>;

struct Ops {
  std::unique_ptr<Backend> backend = make_cpu_backend();
  std::unique_ptr<Buffer> put(const Bytes& b) {
    auto buffer = backend->allocate(b.size());
    backend->upload(*buffer, b);
    return buffer;
  }
  Bytes get(const Buffer& b) {
    Bytes out(b.size());
    backend->download(b, out);
    return out;
  }
  // Positions start, start + 1, ..., for m rows (std::int32_t, as the ops take them).
  std::unique_ptr<Buffer> positions(std::int64_t start, std::int64_t m) {
    std::vector<std::int32_t> p(static_cast<std::size_t>(m));
    for (std::int64_t i = 0; i < m; ++i) p[std::size_t(i)] = std::int32_t(start + i);
    return put(Bytes(reinterpret_cast<const std::byte*>(p.data()), reinterpret_cast<const std::byte*>(p.data() + m)));
  }
};

Bytes slice(const Bytes& b, std::size_t row, std::size_t row_bytes) {
  return Bytes(b.begin() + std::ptrdiff_t(row * row_bytes), b.begin() + std::ptrdiff_t((row + 1) * row_bytes));
}

// Rows of `block(m)` vs `single(i)` for every i < m: the count of rows whose bytes differ.
std::size_t rows_differing(std::size_t m, std::size_t row_bytes, const Bytes& block,
                           const std::function<Bytes(std::size_t)>& single) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < m; ++i) n += slice(block, i, row_bytes) != single(i);
  return n;
}

constexpr DType kTypes[] = {DType::bf16, DType::f16, DType::f32};

TEST(DecoderOps, RmsNormRowsAreWidthInvariant) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Ops o;
  std::size_t control = 0;
  for (DType t : kTypes)
    for (std::size_t m = 1; m <= 16; ++m) {
      const std::int64_t h = 1 + std::int64_t(rng() % 700);
      const bool gemma = rng() % 2;
      const Bytes x = random_values(m * std::size_t(h), t, 3.0f, rng), w = random_values(std::size_t(h), t, 1.0f, rng);
      const std::size_t row = std::size_t(h) * ref_size(t);
      auto xb = o.put(x), wb = o.put(w), yb = o.put(Bytes(x.size()));
      o.backend->rmsnorm(*xb, *wb, std::int64_t(m), h, t, 1e-5f, gemma, *yb);
      const Bytes block = o.get(*yb);
      EXPECT_EQ(rows_differing(m, row, block, [&](std::size_t i) {
                  auto xi = o.put(slice(x, i, row)), yi = o.put(Bytes(row));
                  o.backend->rmsnorm(*xi, *wb, 1, h, t, 1e-5f, gemma, *yi);
                  return o.get(*yi);
                }), 0u) << "h " << h << " m " << m;
      // Control: a norm that sums sequentially when it runs more than one row.
      if (m > 1 && h > 64)
        control += rows_differing(m, row, block, [&](std::size_t i) {
          std::vector<float> xf(static_cast<std::size_t>(h));
          for (std::int64_t j = 0; j < h; ++j) xf[std::size_t(j)] = ref_load(x.data(), i * std::size_t(h) + std::size_t(j), t);
          float s = 0;
          for (float v : xf) s = order::fma(v, v, s);
          const float r = order::norm_inverse_rms(s, int(h), 1e-5f);
          Bytes y(row);
          for (std::int64_t j = 0; j < h; ++j)
            ref_store(y.data(), std::size_t(j), t,
                      order::norm_apply(xf[std::size_t(j)], r, order::norm_weight(ref_load(w.data(), std::size_t(j), t), gemma)));
          return y;
        });
    }
  EXPECT_GT(control, 0u) << "the negative control (a width-dependent sum) must be caught";
}

// The CPU backend's rmsnorm and add_rmsnorm give order/norm.h's bytes: each row against
// order::rmsnorm_row_stored (after order::residual rounded to T, for add_rmsnorm, whose h must hold
// the sums), every dtype, rows of 1 to 3000 values (multiples of the 32 lanes and not), (1 + w)
// weights, in place. Control: one changed weight changes y.
TEST(DecoderOps, NormRowsEqualTheOrder) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Ops o;
  std::size_t controls = 0, cases = 0;
  for (DType t : kTypes)
    for (int c = 0; c < 12; ++c) {
      const std::int64_t h = c % 3 == 0 ? 32 * (1 + std::int64_t(rng() % 94)) : 1 + std::int64_t(rng() % 3000);
      const std::size_t m = 1 + rng() % 4, row = std::size_t(h) * ref_size(t);
      const bool gemma = rng() % 2;
      const float eps = c % 2 ? 1e-6f : 1e-5f;
      SCOPED_TRACE("dtype " + std::to_string(int(t)) + " h " + std::to_string(h) + " m " + std::to_string(m));
      const Bytes x = random_values(m * std::size_t(h), t, 3.0f, rng), d = random_values(x.size() / ref_size(t), t, 1.0f, rng);
      const Bytes w = random_values(std::size_t(h), t, gemma ? 0.2f : 1.0f, rng);
      // The order's bytes, row by row.
      Bytes want_norm(x.size()), want_sum(x.size()), want_add(x.size());
      std::vector<float> scratch(static_cast<std::size_t>(h));
      for (std::size_t i = 0; i < m * std::size_t(h); ++i)
        ref_store(want_sum.data(), i, t, order::residual(ref_load(x.data(), i, t), ref_load(d.data(), i, t)));
      for (std::size_t r = 0; r < m; ++r) {
        order::rmsnorm_row_stored(x.data() + r * row, t, w.data(), t, int(h), eps, gemma, want_norm.data() + r * row, t,
                                  scratch.data());
        order::rmsnorm_row_stored(want_sum.data() + r * row, t, w.data(), t, int(h), eps, gemma,
                                  want_add.data() + r * row, t, scratch.data());
      }
      auto xb = o.put(x), wb = o.put(w), yb = o.put(Bytes(x.size()));
      o.backend->rmsnorm(*xb, *wb, std::int64_t(m), h, t, eps, gemma, *yb);
      EXPECT_TRUE(o.get(*yb) == want_norm) << "rmsnorm, seed case " << c;
      o.backend->rmsnorm(*xb, *wb, std::int64_t(m), h, t, eps, gemma, *xb);
      EXPECT_TRUE(o.get(*xb) == want_norm) << "rmsnorm in place";
      auto hb = o.put(x), db = o.put(d), ab = o.put(Bytes(x.size()));
      o.backend->add_rmsnorm(*hb, *db, *wb, std::int64_t(m), h, t, eps, gemma, *ab);
      EXPECT_TRUE(o.get(*ab) == want_add) << "add_rmsnorm";
      EXPECT_TRUE(o.get(*hb) == want_sum) << "add_rmsnorm's h";
      const std::size_t at = rng() % std::size_t(h);
      Bytes w2 = w;
      const float w_at = ref_load(w.data(), at, t);
      ref_store(w2.data(), at, t, std::fabs(w_at) < 1.0f ? w_at + 1.0f : 3.0f * w_at);
      auto w2b = o.put(w2), y2b = o.put(Bytes(x.size())), h2b = o.put(x);
      o.backend->add_rmsnorm(*h2b, *db, *w2b, std::int64_t(m), h, t, eps, gemma, *y2b);
      controls += o.get(*y2b) != want_add;
      ++cases;
    }
  EXPECT_EQ(controls, cases) << "a changed weight must change y";
}

TEST(DecoderOps, DenseMatVecRowsAreWidthInvariant) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Ops o;
  std::size_t control = 0;
  for (DType t : kTypes)
    for (std::size_t m = 1; m <= 16; m += 1 + rng() % 3) {
      const std::int64_t n = 1 + std::int64_t(rng() % 90), k = 1 + std::int64_t(rng() % 600);
      const Bytes w = random_values(std::size_t(n * k), t, 0.05f, rng), x = random_values(m * std::size_t(k), t, 1.0f, rng);
      const auto matrix = o.backend->load_dense(t, n, k, w);
      const std::size_t xrow = std::size_t(k) * ref_size(t), yrow = std::size_t(n) * ref_size(t);
      auto xb = o.put(x), yb = o.put(Bytes(m * yrow));
      o.backend->dense_mv(*matrix, *xb, std::int64_t(m), *yb);
      const Bytes block = o.get(*yb);
      EXPECT_EQ(rows_differing(m, yrow, block, [&](std::size_t i) {
                  auto xi = o.put(slice(x, i, xrow)), yi = o.put(Bytes(yrow));
                  o.backend->dense_mv(*matrix, *xi, 1, *yi);
                  return o.get(*yi);
                }), 0u);
      if (m > 1 && k > 64)  // control: one sequential chain when more than one row runs
        control += rows_differing(m, yrow, block, [&](std::size_t i) {
          Bytes y(yrow);
          for (std::int64_t r = 0; r < n; ++r) {
            float s = 0;
            for (std::int64_t j = 0; j < k; ++j)
              s = order::fma(ref_load(w.data(), std::size_t(r * k + j), t), ref_load(x.data(), i * std::size_t(k) + std::size_t(j), t), s);
            ref_store(y.data(), std::size_t(r), t, s);
          }
          return y;
        });
    }
  EXPECT_GT(control, 0u);
}

TEST(DecoderOps, RopeRowsAreWidthInvariantAtAnyPosition) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Ops o;
  std::size_t control = 0;
  for (DType t : kTypes)
    for (std::size_t m = 1; m <= 16; ++m) {
      const std::int64_t d = 2 * (1 + std::int64_t(rng() % 128)), heads = 1 + std::int64_t(rng() % 4);
      const std::int64_t start = rng() % 2 ? std::int64_t(rng() % 300) : std::int64_t(rng() % 2000000);
      const bool interleaved = rng() % 2;
      order::RopeParams p;
      p.dims = int(d);
      p.base = rng() % 2 ? 10000.0 : 1e6;
      const auto steps = order::rope_phase_steps(order::rope_inverse_frequencies(p));
      Bytes steps_bytes(steps.size() * 8);
      std::memcpy(steps_bytes.data(), steps.data(), steps_bytes.size());
      auto sb = o.put(steps_bytes);
      const Bytes x = random_values(m * std::size_t(heads * d), t, 1.0f, rng);
      const std::size_t row = std::size_t(heads * d) * ref_size(t);
      auto xb = o.put(x);
      o.backend->rope(*xb, std::int64_t(m), heads, d, t, *o.positions(start, std::int64_t(m)), *sb, interleaved);
      const Bytes block = o.get(*xb);
      EXPECT_EQ(rows_differing(m, row, block, [&](std::size_t i) {
                  auto xi = o.put(slice(x, i, row));
                  o.backend->rope(*xi, 1, heads, d, t, *o.positions(start + std::int64_t(i), 1), *sb, interleaved);
                  return o.get(*xi);
                }), 0u) << "start " << start;
      if (m > 1 && start > 100000)  // control: the f32 angle float(p) * w (a GPU's usual shortcut) when M > 1
        control += rows_differing(m, row, block, [&](std::size_t i) {
          const auto w = order::rope_inverse_frequencies(p);
          Bytes y(row);
          for (std::int64_t h = 0; h < heads; ++h)
            for (std::int64_t j = 0; j < d / 2; ++j) {
              const float angle = order::mul(float(start + std::int64_t(i)), float(w[std::size_t(j)]));
              const float c = std::cos(angle), s = std::sin(angle);
              const std::size_t a = std::size_t(h * d) + (interleaved ? std::size_t(2 * j) : std::size_t(j));
              const std::size_t b = a + (interleaved ? 1 : std::size_t(d / 2));
              const float x1 = ref_load(x.data(), i * std::size_t(heads * d) + a, t), x2 = ref_load(x.data(), i * std::size_t(heads * d) + b, t);
              float y1, y2;
              order::rope_rotate_pair(x1, x2, {c, s}, y1, y2);
              ref_store(y.data(), a, t, y1);
              ref_store(y.data(), b, t, y2);
            }
          return y;
        });
    }
  EXPECT_GT(control, 0u);
}

// Keys and values past the last query's position hold NaN, infinities and 1e30: no row may read them.
TEST(DecoderOps, AttentionRowsAreWidthInvariantAndReadNoLaterKey) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Ops o;
  std::size_t control = 0;
  for (DType t : kTypes)
    for (std::size_t m = 1; m <= 16; ++m) {
      const std::int64_t kv = 1 + std::int64_t(rng() % 2), heads = kv * (1 + std::int64_t(rng() % 3));
      const std::int64_t d = 8 * (1 + std::int64_t(rng() % 12));
      const std::int64_t start = std::int64_t(rng() % 200), positions = start + std::int64_t(m) + std::int64_t(rng() % 50);
      const std::int64_t window = rng() % 2 ? 0 : 1 + std::int64_t(rng() % 80);
      const AttentionShape shape{heads, kv, d, order::attention_scale(double(d)), window};
      Bytes k = random_values(std::size_t(positions * kv * d), t, 1.0f, rng), v = random_values(k.size() / ref_size(t), t, 1.0f, rng);
      const float poison[] = {NAN, INFINITY, -INFINITY, 1e30f};
      for (std::size_t i = std::size_t((start + std::int64_t(m)) * kv * d); i < std::size_t(positions * kv * d); ++i) {
        ref_store(k.data(), i, t, poison[i % 4]);
        ref_store(v.data(), i, t, poison[(i + 1) % 4]);
      }
      const Bytes q = random_values(m * std::size_t(heads * d), t, 2.0f, rng);
      const std::size_t row = std::size_t(heads * d) * ref_size(t);
      auto qb = o.put(q), kb = o.put(k), vb = o.put(v), out = o.put(Bytes(q.size()));
      o.backend->attention(*qb, *kb, *vb, std::int64_t(m), *o.positions(start, std::int64_t(m)),
                           *o.positions(start, std::int64_t(m)), positions - 1, shape, t, *out);
      const Bytes block = o.get(*out);
      for (std::size_t i = 0; i < block.size() / ref_size(t); ++i)
        ASSERT_TRUE(std::isfinite(ref_load(block.data(), i, t))) << "a poisoned key or value was read";
      EXPECT_EQ(rows_differing(m, row, block, [&](std::size_t i) {
                  auto qi = o.put(slice(q, i, row)), oi = o.put(Bytes(row));
                  const std::int64_t p = start + std::int64_t(i);  // the bound: its own position
                  o.backend->attention(*qi, *kb, *vb, 1, *o.positions(p, 1), *o.positions(p, 1), p, shape, t, *oi);
                  return o.get(*oi);
                }), 0u) << "start " << start << " window " << window;
      if (m > 1 && start > 20)  // control: chunks of ceil(length / 4), a split count, when M > 1
        control += rows_differing(m, row, block, [&](std::size_t i) {
          const std::int64_t p = start + std::int64_t(i);
          Bytes y(row);
          float qf[order::kMaxHeadDim], of[order::kMaxHeadDim];
          for (std::int64_t h = 0; h < heads; ++h) {
            for (std::int64_t j = 0; j < d; ++j) qf[j] = ref_load(q.data(), i * std::size_t(heads * d) + std::size_t(h * d + j), t);
            const std::size_t off = std::size_t((h / (heads / kv)) * d) * ref_size(t);
            order::attention_row_chunked(qf, p, k.data() + off, v.data() + off, t, std::size_t(kv * d),
                                         {int(d), shape.scale, window}, int((p + 4) / 4), of);
            for (std::int64_t j = 0; j < d; ++j) ref_store(y.data(), std::size_t(h * d + j), t, of[j]);
          }
          return y;
        });
    }
  EXPECT_GT(control, 0u);
}

// The elementwise ops, the embedding and argmax: rows are independent by construction; the block
// vs chain comparison holds, and a variant that rounds differently when M > 1 is caught.
// The cache write puts row i at positions[i] and touches nothing else; positions out of range are
// refused by every op that takes them, naming the value, before anything is written.
TEST(DecoderOps, WriteRowsAndPositionsOutOfRange) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Ops o;
  const std::size_t row = 8 + rng() % 100, cache_rows = 20 + rng() % 20, m = 1 + rng() % 8;
  Bytes cache(row * cache_rows), rows(row * m);
  for (auto& b : cache) b = std::byte(rng());
  for (auto& b : rows) b = std::byte(rng());
  std::vector<std::int32_t> at(m);
  for (std::size_t i = 0; i < m; ++i) at[i] = std::int32_t((i * 7 + rng() % 3 * m) % cache_rows);
  std::sort(at.begin(), at.end());
  at.erase(std::unique(at.begin(), at.end()), at.end());
  const std::size_t n = at.size();
  const Bytes at_bytes(reinterpret_cast<const std::byte*>(at.data()), reinterpret_cast<const std::byte*>(at.data() + n));
  auto cb = o.put(cache), rb = o.put(rows), pb = o.put(at_bytes);
  o.backend->write_rows(*rb, *pb, std::int64_t(n), row, *cb);
  Bytes expected = cache;
  for (std::size_t i = 0; i < n; ++i)
    std::copy_n(rows.begin() + std::ptrdiff_t(i * row), row, expected.begin() + std::ptrdiff_t(std::size_t(at[i]) * row));
  EXPECT_EQ(o.get(*cb), expected);
  EXPECT_NE(expected, cache) << "the control: the write changed the cache";

  const Bytes written = o.get(*cb);
  for (std::int32_t bad : {std::int32_t(-1), std::int32_t(cache_rows)}) {
    std::vector<std::int32_t> p(at);
    p.back() = bad;
    auto bb = o.put(Bytes(reinterpret_cast<const std::byte*>(p.data()), reinterpret_cast<const std::byte*>(p.data() + n)));
    try {
      o.backend->write_rows(*rb, *bb, std::int64_t(n), row, *cb);
      ADD_FAILURE() << "position " << bad << " was taken";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(std::to_string(bad)), std::string::npos) << e.what();
    }
    EXPECT_EQ(o.get(*cb), written) << "nothing written";
    const AttentionShape shape{1, 1, 8, 1.0f, 0};
    auto q = o.put(Bytes(16 * n)), keys = o.put(Bytes(16 * cache_rows)), out = o.put(Bytes(16 * n));
    EXPECT_THROW(o.backend->attention(*q, *keys, *keys, std::int64_t(n), *bb, *bb, std::int64_t(cache_rows) - 1, shape,
                                      DType::bf16, *out),
                 std::invalid_argument);
    auto steps = o.put(Bytes(4 * sizeof(std::uint64_t)));
    if (bad < 0) {
      EXPECT_THROW(o.backend->rope(*q, std::int64_t(n), 1, 8, DType::bf16, *bb, *steps, false), std::invalid_argument);
    }
  }
}

// rope_write has the bytes of rope(q), rope(k), write_rows(k), write_rows(v) (rows at scattered
// positions, any dtype, either pair layout); the control: the composition with one row at another
// position gives other cache bytes. A position past the caches is refused before anything is written.
TEST(DecoderOps, RopeWriteIsRopeThenWriteRows) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Ops o;
  for (DType t : kTypes)
    for (bool interleaved : {false, true}) {
      const std::int64_t kv = 1 + std::int64_t(rng() % 4), heads = kv * (1 + std::int64_t(rng() % 4));
      const std::int64_t d = 8 * (1 + std::int64_t(rng() % 16)), m = 1 + std::int64_t(rng() % 12);
      const std::int64_t cache_rows = m + 1 + std::int64_t(rng() % 200);
      std::vector<std::int32_t> at(static_cast<std::size_t>(cache_rows));
      for (std::size_t i = 0; i < at.size(); ++i) at[i] = std::int32_t(i);
      std::shuffle(at.begin(), at.end(), rng);
      at.resize(std::size_t(m) + 1);  // m distinct positions in any order, and a free one for the control
      const std::int32_t free_row = at.back();
      at.pop_back();
      auto positions_of = [](const std::vector<std::int32_t>& p) {
        return Bytes(reinterpret_cast<const std::byte*>(p.data()), reinterpret_cast<const std::byte*>(p.data() + p.size()));
      };
      order::RopeParams rp;
      rp.dims = int(d);
      rp.base = 10000.0 + double(rng() % 490000);
      const auto steps = order::rope_phase_steps(order::rope_inverse_frequencies(rp));
      const Bytes steps_bytes(reinterpret_cast<const std::byte*>(steps.data()),
                              reinterpret_cast<const std::byte*>(steps.data() + steps.size()));
      const Bytes q = random_values(std::size_t(m * heads * d), t, 2.0f, rng), k = random_values(std::size_t(m * kv * d), t, 2.0f, rng);
      const Bytes v = random_values(std::size_t(m * kv * d), t, 2.0f, rng);
      const Bytes keys = random_values(std::size_t(cache_rows * kv * d), t, 1.0f, rng);
      const Bytes values = random_values(std::size_t(cache_rows * kv * d), t, 1.0f, rng);
      const std::size_t row = std::size_t(kv * d) * ref_size(t);
      auto composed = [&](const std::vector<std::int32_t>& p) {
        auto qb = o.put(q), kb = o.put(k), vb = o.put(v), keys_b = o.put(keys), values_b = o.put(values);
        auto pb = o.put(positions_of(p)), sb = o.put(steps_bytes);
        o.backend->rope(*qb, m, heads, d, t, *pb, *sb, interleaved);
        o.backend->rope(*kb, m, kv, d, t, *pb, *sb, interleaved);
        o.backend->write_rows(*kb, *pb, m, row, *keys_b);
        o.backend->write_rows(*vb, *pb, m, row, *values_b);
        return std::vector<Bytes>{o.get(*qb), o.get(*kb), o.get(*keys_b), o.get(*values_b)};
      };
      auto qb = o.put(q), kb = o.put(k), vb = o.put(v), keys_b = o.put(keys), values_b = o.put(values);
      auto pb = o.put(positions_of(at)), sb = o.put(steps_bytes);
      o.backend->rope_write(*qb, *kb, *vb, m, heads, kv, d, t, *pb, *pb, *sb, interleaved, *keys_b, *values_b);
      const std::vector<Bytes> fused{o.get(*qb), o.get(*kb), o.get(*keys_b), o.get(*values_b)};
      EXPECT_EQ(fused, composed(at)) << "m " << m << " heads " << heads << "/" << kv << " d " << d;
      std::vector<std::int32_t> moved(at);
      moved[std::size_t(rng() % std::uint64_t(m))] = free_row;
      const std::vector<Bytes> control = composed(moved);
      EXPECT_NE(fused[2], control[2]) << "the control: a row at another position changes the key cache";

      std::vector<std::int32_t> bad(at);
      bad.back() = std::int32_t(cache_rows);
      auto bad_b = o.put(positions_of(bad));
      try {
        o.backend->rope_write(*qb, *kb, *vb, m, heads, kv, d, t, *bad_b, *bad_b, *sb, interleaved, *keys_b, *values_b);
        ADD_FAILURE() << "position " << cache_rows << " was taken";
      } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find(std::to_string(cache_rows)), std::string::npos) << e.what();
      }
      EXPECT_EQ((std::vector<Bytes>{o.get(*qb), o.get(*kb), o.get(*keys_b), o.get(*values_b)}), fused) << "nothing written";
    }
}

TEST(DecoderOps, ElementwiseEmbeddingAndArgmaxRowsAreWidthInvariant) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Ops o;
  std::size_t control = 0;
  for (DType t : kTypes)
    for (std::size_t m = 2; m <= 16; m += 1 + rng() % 4) {
      const std::int64_t n = 1 + std::int64_t(rng() % 300);
      const std::size_t row = std::size_t(n) * ref_size(t);
      const Bytes a = random_values(m * std::size_t(n), t, 4.0f, rng), b = random_values(a.size() / ref_size(t), t, 1.0f, rng);
      for (Activation act : {Activation::silu, Activation::gelu_tanh}) {
        auto ab = o.put(a), bb = o.put(b), out = o.put(Bytes(a.size()));
        o.backend->gated_activation(*ab, *bb, std::int64_t(m) * n, act, t, *out);
        const Bytes block = o.get(*out);
        EXPECT_EQ(rows_differing(m, row, block, [&](std::size_t i) {
                    auto ai = o.put(slice(a, i, row)), bi = o.put(slice(b, i, row)), oi = o.put(Bytes(row));
                    o.backend->gated_activation(*ai, *bi, n, act, t, *oi);
                    return o.get(*oi);
                  }), 0u);
        if (t != DType::f32)  // control: act(gate) rounded to T before the multiply
          control += rows_differing(m, row, block, [&](std::size_t i) {
            Bytes y(row), tmp(4 * ref_size(t));
            for (std::int64_t j = 0; j < n; ++j) {
              const std::size_t at = i * std::size_t(n) + std::size_t(j);
              const float g = ref_load(a.data(), at, t);
              ref_store(tmp.data(), 0, t, act == Activation::silu ? order::silu(g) : order::gelu_tanh(g));
              ref_store(y.data(), std::size_t(j), t, order::mul(ref_load(tmp.data(), 0, t), ref_load(b.data(), at, t)));
            }
            return y;
          });
      }
      // add, add_bias and scale run in place or into another buffer with the same bytes per row.
      auto ab = o.put(a), bb = o.put(b), out = o.put(Bytes(a.size()));
      o.backend->add(*ab, *bb, std::int64_t(m) * n, t, *out);
      const Bytes sum = o.get(*out);
      auto bias = o.put(slice(b, 0, row));
      o.backend->add_bias(*ab, *bias, std::int64_t(m), n, t);
      const Bytes biased = o.get(*ab);
      o.backend->scale(*bb, std::int64_t(m) * n, 3.3f, t);
      const Bytes scaled = o.get(*bb);
      EXPECT_EQ(rows_differing(m, row, sum, [&](std::size_t i) {
                  auto ai = o.put(slice(a, i, row)), bi = o.put(slice(b, i, row));
                  o.backend->add(*ai, *bi, n, t, *ai);
                  return o.get(*ai);
                }), 0u);
      EXPECT_EQ(rows_differing(m, row, biased, [&](std::size_t i) {
                  auto ai = o.put(slice(a, i, row));
                  o.backend->add_bias(*ai, *bias, 1, n, t);
                  return o.get(*ai);
                }), 0u);
      EXPECT_EQ(rows_differing(m, row, scaled, [&](std::size_t i) {
                  auto bi = o.put(slice(b, i, row));
                  o.backend->scale(*bi, n, 3.3f, t);
                  return o.get(*bi);
                }), 0u);
      // argmax with planted ties: the lowest index wins in every row, alone or in a block.
      Bytes logits = random_values(m * std::size_t(n), t, 1.0f, rng);
      for (std::size_t i = 0; i < m; ++i) {
        const std::size_t first = rng() % std::size_t(n), second = first + (std::size_t(n) - first) / 2;
        ref_store(logits.data(), i * std::size_t(n) + first, t, 100.0f);
        ref_store(logits.data(), i * std::size_t(n) + second, t, 100.0f);
      }
      auto lb = o.put(logits), ib = o.put(Bytes(m * 4));
      o.backend->argmax(*lb, std::int64_t(m), n, t, *ib);
      const Bytes ids = o.get(*ib);
      EXPECT_EQ(rows_differing(m, 4, ids, [&](std::size_t i) {
                  auto li = o.put(slice(logits, i, row)), ii = o.put(Bytes(4));
                  o.backend->argmax(*li, 1, n, t, *ii);
                  return o.get(*ii);
                }), 0u);
      control += rows_differing(m, 4, ids, [&](std::size_t i) {  // control: the highest index wins a tie
        std::int32_t best = 0;
        for (std::int64_t j = 1; j < n; ++j)
          if (ref_load(logits.data(), i * std::size_t(n) + std::size_t(j), t) >= ref_load(logits.data(), i * std::size_t(n) + std::size_t(best), t))
            best = std::int32_t(j);
        Bytes y(4);
        std::memcpy(y.data(), &best, 4);
        return y;
      });
    }
  EXPECT_GT(control, 0u);
}

TEST(DecoderOps, QuantizedEmbeddingRowsAreTheDequantizedRows) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Ops o;
  for (DType t : kTypes) {
    const std::int64_t vocab = 50 + std::int64_t(rng() % 50), k = 64 * (1 + std::int64_t(rng() % 4));
    const QuantizedMatrix table = random_matrix(vocab, k, 4, 64, t, rng);
    const auto matrix = o.backend->load(table.view());
    const std::size_t m = 1 + rng() % 16;
    std::vector<std::int32_t> ids(m);
    for (auto& id : ids) id = std::int32_t(rng() % std::uint64_t(vocab));
    Bytes id_bytes(m * 4);
    std::memcpy(id_bytes.data(), ids.data(), id_bytes.size());
    auto ib = o.put(id_bytes), out = o.put(Bytes(m * std::size_t(k) * ref_size(t)));
    o.backend->embed(*matrix, *ib, std::int64_t(m), *out);
    const Bytes rows = o.get(*out);
    // The oracle: scale * code + bias with one rounding, the code read bit by bit from the packing.
    for (std::size_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < k; j += 7) {
        const std::size_t g = std::size_t(ids[i] * (k / 64) + j / 64);
        const std::uint32_t code = ref_unpack(table.packed.data() + std::size_t(ids[i]) * std::size_t(k / 2), j, 4);
        const double want = double(ref_load(table.scales.data(), g, t)) * code + double(ref_load(table.biases.data(), g, t));
        Bytes one(ref_size(t));
        // s * code (at most 28 bits) + b of a like magnitude is exact in double: float() is fma's rounding.
        ref_store(one.data(), 0, t, float(want));
        EXPECT_EQ(slice(rows, i * std::size_t(k) + std::size_t(j), ref_size(t)), one) << "row " << i << " col " << j;
      }
    // A token outside the table is refused, naming it.
    std::int32_t bad = std::int32_t(vocab);
    Bytes bad_bytes(4);
    std::memcpy(bad_bytes.data(), &bad, 4);
    auto bb = o.put(bad_bytes);
    EXPECT_THROW(o.backend->embed(*matrix, *bb, 1, *out), std::invalid_argument);
  }
}

}  // namespace
}  // namespace exactq::test
