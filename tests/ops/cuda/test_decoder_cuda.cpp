// The decoder on the CUDA backend: every op gives the CPU mirror's bytes, and the whole forward
// gives the CPU's logits, byte for byte, for every architecture with the exact and narrow
// families; CUDA's own block vs chain identity holds for exact, mma and narrow, and wide differs
// (the negative control). Attention, split over key chunks, is also tested alone on long caches.
// Each test skips without a usable GPU.
#include <gtest/gtest.h>

#include <algorithm>

#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <tuple>

#include "engine/decoder_fixture.h"
#include "exactq/cuda.h"
#include "ops/cuda/decoder_ops.h"
#include "order/attention.h"
#include "order/rope.h"

#define REQUIRE_CUDA_BACKEND()                                                            \
  do {                                                                                    \
    if (!::exactq::cuda_backend_available()) GTEST_SKIP() << "no usable CUDA device here"; \
  } while (0)

namespace exactq::test {
namespace {

using Bytes = std::vector<std::byte>;

// Runs `op` on both backends with the same host inputs (uploaded to each) and returns the bytes of
// the output buffer (index `output` of the inputs) from each.
struct Both {
  using Op = std::function<void(Backend&, std::vector<std::unique_ptr<Buffer>>&)>;
  std::unique_ptr<Backend> cpu = make_cpu_backend(), cuda = make_cuda_backend();
  std::pair<Bytes, Bytes> run(const std::vector<Bytes>& inputs, std::size_t output, const Op& op) {
    return {on(*cpu, inputs, output, op), on(*cuda, inputs, output, op)};
  }
  // The same on one backend.
  static Bytes on(Backend& b, const std::vector<Bytes>& inputs, std::size_t output, const Op& op) {
    std::vector<std::unique_ptr<Buffer>> buffers;
    for (const Bytes& in : inputs) {
      buffers.push_back(b.allocate(in.size()));
      b.upload(*buffers.back(), in);
    }
    op(b, buffers);
    b.synchronize();
    Bytes out(inputs[output].size());
    b.download(*buffers[output], out);
    return out;
  }
};

// Positions as the ops take them: std::int32_t per row.
Bytes positions_of(const std::vector<std::int32_t>& p) {
  Bytes b(p.size() * sizeof(std::int32_t));
  std::memcpy(b.data(), p.data(), b.size());
  return b;
}
Bytes consecutive_positions(std::int64_t start, std::int64_t m) {
  std::vector<std::int32_t> p(static_cast<std::size_t>(m));
  for (std::int64_t i = 0; i < m; ++i) p[std::size_t(i)] = std::int32_t(start + i);
  return positions_of(p);
}

// x with value i set to v: an input change the comparison must see.
Bytes poked(Bytes x, std::size_t i, DType t, float v) {
  ref_store(x.data(), i, t, v);
  return x;
}

// A norm weight row with every value v replaced by 4 v + 1: a change that reaches every
// normalized value, so every output row (a single value changed can round away in a short row).
Bytes changed_weights(Bytes w, DType t) {
  for (std::size_t i = 0; i < w.size() / ref_size(t); ++i) ref_store(w.data(), i, t, 4.0f * ref_load(w.data(), i, t) + 1.0f);
  return w;
}

// A buffer on b holding `host`, and a buffer's bytes back on the host (after b's ops finish).
std::unique_ptr<Buffer> put(Backend& b, const Bytes& host) {
  auto buffer = b.allocate(host.size());
  b.upload(*buffer, host);
  return buffer;
}
Bytes get(Backend& b, const Buffer& buffer) {
  Bytes host(buffer.bytes().size());
  b.synchronize();
  b.download(buffer, host);
  return host;
}

constexpr DType kTypes[] = {DType::bf16, DType::f16, DType::f32};

TEST(CudaDecoderOps, EveryOpGivesTheCpuBytes) {
  REQUIRE_CUDA_BACKEND();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Both both;
  std::size_t controls = 0;
  for (DType t : kTypes) {
    SCOPED_TRACE(int(t));
    const std::int64_t m = 1 + std::int64_t(rng() % 16), h = 1 + std::int64_t(rng() % 3000);
    const bool gemma = rng() % 2;
    const Bytes x = random_values(std::size_t(m * h), t, 3.0f, rng), w = random_values(std::size_t(h), t, 1.0f, rng);
    auto norm = [&](Backend& b, auto& v) { b.rmsnorm(*v[0], *v[1], m, h, t, 1e-6f, gemma, *v[2]); };
    const auto [cpu_n, cuda_n] = both.run({x, w, Bytes(x.size())}, 2, norm);
    EXPECT_EQ(cpu_n, cuda_n) << "rmsnorm h " << h;
    controls += both.run({poked(x, 0, t, 1000.0f), w, Bytes(x.size())}, 2, norm).second != cpu_n;

    const std::int64_t n = 1 + std::int64_t(rng() % 200), k = 1 + std::int64_t(rng() % 2000);
    const Bytes wd = random_values(std::size_t(n * k), t, 0.05f, rng), xd = random_values(std::size_t(m * k), t, 1.0f, rng);
    auto dense = [&](const Bytes& weights) {
      return [&, weights](Backend& b, auto& v) { b.dense_mv(*b.load_dense(t, n, k, weights), *v[0], m, *v[1]); };
    };
    const auto [cpu_d, cuda_d] = both.run({xd, Bytes(std::size_t(m * n) * ref_size(t))}, 1, dense(wd));
    EXPECT_EQ(cpu_d, cuda_d) << "dense_mv " << n << "x" << k;

    const std::int64_t heads = 1 + std::int64_t(rng() % 8), kv = heads % 2 ? heads : heads / 2;
    const std::int64_t d = 8 * (1 + std::int64_t(rng() % 32)), start = std::int64_t(rng() % 3000);
    order::RopeParams p;
    p.dims = int(d);
    p.base = 500000.0;
    const auto steps = order::rope_phase_steps(order::rope_inverse_frequencies(p));
    Bytes steps_bytes(steps.size() * 8);
    std::memcpy(steps_bytes.data(), steps.data(), steps_bytes.size());
    const Bytes qx = random_values(std::size_t(m * heads * d), t, 1.0f, rng);
    std::vector<std::int32_t> scattered(static_cast<std::size_t>(m));  // rows at any positions, in any order
    for (auto& x : scattered) x = std::int32_t(rng() % 100000);
    for (bool interleaved : {false, true})
      for (const Bytes& at : {consecutive_positions(start, m), positions_of(scattered)}) {
        const auto [cpu_r, cuda_r] = both.run(
            {qx, steps_bytes, at}, 0, [&](Backend& b, auto& v) { b.rope(*v[0], m, heads, d, t, *v[2], *v[1], interleaved); });
        EXPECT_EQ(cpu_r, cuda_r) << "rope start " << start;
      }
    {  // rope_write: q and k rotated, k and v into caches at distinct rows in any order
      const std::int64_t cache_rows = start + m + 1 + std::int64_t(rng() % 64);
      std::vector<std::int32_t> rows(static_cast<std::size_t>(cache_rows));
      for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = std::int32_t(i);
      std::shuffle(rows.begin(), rows.end(), rng);
      rows.resize(std::size_t(m));
      const Bytes kx = random_values(std::size_t(m * kv * d), t, 1.0f, rng), vx = random_values(kx.size() / ref_size(t), t, 1.0f, rng);
      const Bytes cache = random_values(std::size_t(cache_rows * kv * d), t, 1.0f, rng);
      for (bool interleaved : {false, true}) {
        auto fused = [&](Backend& b, auto& v) {
          b.rope_write(*v[0], *v[1], *v[2], m, heads, kv, d, t, *v[5], *v[5], *v[6], interleaved, *v[3], *v[4]);
        };
        for (std::size_t output : {0u, 1u, 3u, 4u}) {
          const std::vector<Bytes> in{qx, kx, vx, cache, cache, positions_of(rows), steps_bytes};
          const auto [cpu_w, cuda_w] = both.run(in, output, fused);
          EXPECT_EQ(cpu_w, cuda_w) << "rope_write output " << output << (interleaved ? " interleaved" : "");
          if (output == 3 && interleaved)
            controls += both.run({qx, poked(kx, 0, t, 1000.0f), vx, cache, cache, positions_of(rows), steps_bytes}, 3, fused)
                            .second != cpu_w;
        }
      }
    }

    const std::int64_t positions = start + m;
    const Bytes keys = random_values(std::size_t(positions * kv * d), t, 1.0f, rng);
    const Bytes values = random_values(keys.size() / ref_size(t), t, 1.0f, rng);
    for (std::int64_t window : {std::int64_t(0), 1 + std::int64_t(rng() % 200)}) {
      const AttentionShape shape{heads, kv, d, order::attention_scale(double(d)), window};
      auto attend = [&](Backend& b, auto& v) {
        b.attention(*v[0], *v[1], *v[2], m, *v[4], *v[4], start + m - 1, shape, t, *v[3]);
      };
      const Bytes at = consecutive_positions(start, m);
      const auto [cpu_a, cuda_a] = both.run({qx, keys, values, Bytes(qx.size()), at}, 3, attend);
      EXPECT_EQ(cpu_a, cuda_a) << "attention start " << start << " window " << window;
      controls += both.run({qx, keys, poked(values, std::size_t(start * kv * d), t, 1000.0f), Bytes(qx.size()), at}, 3,
                           attend).second != cpu_a;
    }

    const std::int64_t count = m * n;
    const Bytes g = random_values(std::size_t(count), t, 4.0f, rng), u = random_values(std::size_t(count), t, 1.0f, rng);
    for (Activation act : {Activation::silu, Activation::gelu_tanh}) {
      const auto [c1, c2] = both.run({g, u, Bytes(g.size())}, 2, [&](Backend& b, auto& v) { b.gated_activation(*v[0], *v[1], count, act, t, *v[2]); });
      EXPECT_EQ(c1, c2) << "gated";
    }
    const auto [a1, a2] = both.run({g, u, Bytes(g.size())}, 2, [&](Backend& b, auto& v) { b.add(*v[0], *v[1], count, t, *v[2]); });
    EXPECT_EQ(a1, a2) << "add";
    const Bytes bias = random_values(std::size_t(n), t, 1.0f, rng);
    const auto [b1, b2] = both.run({g, bias}, 0, [&](Backend& b, auto& v) { b.add_bias(*v[0], *v[1], m, n, t); });
    EXPECT_EQ(b1, b2) << "add_bias";
    const auto [s1, s2] = both.run({g}, 0, [&](Backend& b, auto& v) { b.scale(*v[0], count, 61.9f, t); });
    EXPECT_EQ(s1, s2) << "scale";
    Bytes logits = random_values(std::size_t(count), t, 1.0f, rng);
    ref_store(logits.data(), std::size_t(rng() % std::uint64_t(n)), t, 50.0f);  // a tie in row 0
    ref_store(logits.data(), std::size_t(n - 1), t, 50.0f);
    const auto [i1, i2] = both.run({logits, Bytes(std::size_t(m) * 4)}, 1, [&](Backend& b, auto& v) { b.argmax(*v[0], m, n, t, *v[1]); });
    EXPECT_EQ(i1, i2) << "argmax";

    const std::int64_t vocab = 40 + std::int64_t(rng() % 40), ek = 64 * (1 + std::int64_t(rng() % 4));
    const QuantizedMatrix table = random_matrix(vocab, ek, 4, 64, t, rng);
    std::vector<std::int32_t> ids(static_cast<std::size_t>(m));
    for (auto& id : ids) id = std::int32_t(rng() % std::uint64_t(vocab));
    Bytes id_bytes(ids.size() * 4);
    std::memcpy(id_bytes.data(), ids.data(), id_bytes.size());
    const auto [e1, e2] = both.run({id_bytes, Bytes(std::size_t(m * ek) * ref_size(t))}, 1,
                                   [&](Backend& b, auto& v) { b.embed(*b.load(table.view()), *v[0], m, *v[1]); });
    EXPECT_EQ(e1, e2) << "embed";
  }
  EXPECT_EQ(controls, 3 * 4u) << "a changed input must change the compared bytes";
}

// Backend::norm_qmv on CUDA: y and h_out equal the CPU's add_rmsnorm (rmsnorm without a delta)
// then qmv, for 4 and 8 bits in bf16 and f16, groups 32, 64 and 128, K from 128 to 8192, 1 to 3
// vectors, with and without the (1 + w) weights; what it has no kernel for (3 bits, f32, another
// kernel) returns false and writes nothing. Control: changed norm weights change y.
TEST(CudaDecoderOps, NormFusedIntoQmvGivesTheTwoOpsBytes) {
  REQUIRE_CUDA_BACKEND();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const auto cpu = make_cpu_backend(), cuda = make_cuda_backend();
  std::size_t controls = 0, cases = 0;
  for (int c = 0; c < 14; ++c) {
    const int bits = c % 2 ? 8 : 4, group = c % 3 == 0 ? 32 : c % 3 == 1 ? 64 : 128;
    const DType t = c % 4 == 2 ? DType::f16 : DType::bf16;
    const std::int64_t k = c == 0 ? 4096 : c == 1 ? 8192 : 128 * (1 + std::int64_t(rng() % 64));
    const std::int64_t n = 1 + std::int64_t(rng() % 700), m = 1 + std::int64_t(rng() % 3);
    const bool with_delta = c % 5 != 4, one_plus = c % 3 == 1;
    const float eps = 1e-5f;
    SCOPED_TRACE("bits " + std::to_string(bits) + " group " + std::to_string(group) + " dtype " + std::to_string(int(t)) +
                 " " + std::to_string(n) + "x" + std::to_string(k) + " m " + std::to_string(m));
    const QuantizedMatrix w = random_matrix(n, k, bits, group, t, rng);
    const Bytes h = random_values(std::size_t(m * k), t, 2.0f, rng), delta = random_values(std::size_t(m * k), t, 1.0f, rng);
    const Bytes weight = random_values(std::size_t(k), t, one_plus ? 0.2f : 1.0f, rng);
    const Bytes y0(std::size_t(m * n) * ref_size(t));

    auto cpu_h = put(*cpu, h), cpu_delta = put(*cpu, delta), cpu_w = put(*cpu, weight), cpu_x = put(*cpu, h), cpu_y = put(*cpu, y0);
    if (with_delta)
      cpu->add_rmsnorm(*cpu_h, *cpu_delta, *cpu_w, m, k, t, eps, one_plus, *cpu_x);
    else
      cpu->rmsnorm(*cpu_h, *cpu_w, m, k, t, eps, one_plus, *cpu_x);
    cpu->qmv(Kernel::qmv, *cpu->load(w.view()), *cpu_x, m, *cpu_y);
    const Bytes want_y = get(*cpu, *cpu_y), want_h = get(*cpu, *cpu_h);

    auto fused = [&](const Bytes& norm_weight) {
      auto gh = put(*cuda, h), gd = put(*cuda, delta), gw = put(*cuda, norm_weight), out = put(*cuda, Bytes(h.size()));
      auto gy = put(*cuda, y0);
      EXPECT_TRUE(cuda->norm_qmv(Kernel::qmv, *cuda->load(w.view()), *gh, with_delta ? gd.get() : nullptr, *gw, m, eps,
                                 one_plus, out.get(), *gy));
      return std::pair(get(*cuda, *gy), get(*cuda, *out));
    };
    const auto [y, h_out] = fused(weight);
    EXPECT_TRUE(y == want_y) << "y: " << differing_bytes(want_y, y) << " bytes differ";
    EXPECT_TRUE(h_out == want_h) << "h_out: " << differing_bytes(want_h, h_out) << " bytes differ";
    controls += fused(changed_weights(weight, t)).first != want_y;
    ++cases;
  }
  EXPECT_EQ(controls, cases) << "a changed norm weight must change y";

  // No kernel: 3 bits, f32, qmv_streamed. Nothing is written.
  for (const auto& [bits, t, kernel] : {std::tuple(3, DType::bf16, Kernel::qmv), std::tuple(4, DType::f32, Kernel::qmv),
                                        std::tuple(4, DType::bf16, Kernel::qmv_streamed)}) {
    const std::int64_t n = 64, k = 256, m = 2;
    const QuantizedMatrix w = random_matrix(n, k, bits, 64, t, rng);
    const Bytes h = random_values(std::size_t(m * k), t, 1.0f, rng), weight = random_values(std::size_t(k), t, 1.0f, rng);
    auto gh = put(*cuda, h), gw = put(*cuda, weight), out = put(*cuda, Bytes(h.size())), gy = put(*cuda, Bytes(std::size_t(m * n) * ref_size(t)));
    EXPECT_FALSE(cuda->norm_qmv(kernel, *cuda->load(w.view()), *gh, nullptr, *gw, m, 1e-5f,
                                false, out.get(), *gy));
    EXPECT_EQ(get(*cuda, *gy), Bytes(std::size_t(m * n) * ref_size(t)));
  }
}

// Backend::norm_qmv's epilogues on CUDA, against the CPU's ops one by one: gated gives
// add_rmsnorm, qmv of the stacked [gate; up], then gated_activation of its halves; rope_write gives
// add_rmsnorm, qmv of the stacked [q; k; v], then rope_write on the parts, with keys and values
// written at distinct rows in any order, each row rotated at a position of its own sequence
// (cache rows not its positions: Backend::rope_write's cache_rows). 4 and 8 bits, bf16 and f16, 1 to 3 vectors, split
// and interleaved RoPE, both activations. Where the pairs do not tile the kernel's tasks (N / 2 odd), it returns false
// and writes nothing. Control: changed norm weights change y (and the key cache).
TEST(CudaDecoderOps, NormQmvEpiloguesGiveTheOpsBytes) {
  REQUIRE_CUDA_BACKEND();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  const auto cpu = make_cpu_backend(), cuda = make_cuda_backend();
  std::size_t controls = 0, cases = 0;
  for (int c = 0; c < 16; ++c) {
    const bool rope = c % 2 == 1, interleaved = c % 4 == 3;
    const int bits = c % 3 == 2 ? 8 : 4, group = c % 5 == 0 ? 32 : c % 5 < 3 ? 64 : 128;
    const DType t = c % 6 < 3 ? DType::bf16 : DType::f16;
    const std::int64_t k = c < 2 ? 4096 : 128 * (1 + std::int64_t(rng() % 48)), m = 1 + std::int64_t(rng() % 3);
    const Activation act = c % 4 < 2 ? Activation::silu : Activation::gelu_tanh;
    const std::int64_t kv = 1 + std::int64_t(rng() % 2), heads = kv * (1 + std::int64_t(rng() % 4));
    const std::int64_t d = std::int64_t(16) << (rng() % 4), inter = 2 * (1 + std::int64_t(rng() % 300));
    const std::int64_t n = rope ? (heads + 2 * kv) * d : 2 * inter, cache_rows = m + 1 + std::int64_t(rng() % 40);
    SCOPED_TRACE(std::string(rope ? "rope_write" : "gated") + " bits " + std::to_string(bits) + " group " +
                 std::to_string(group) + " dtype " + std::to_string(int(t)) + " " + std::to_string(n) + "x" +
                 std::to_string(k) + " m " + std::to_string(m) + (interleaved ? " interleaved" : ""));
    const QuantizedMatrix w = random_matrix(n, k, bits, group, t, rng);
    const Bytes h = random_values(std::size_t(m * k), t, 2.0f, rng), delta = random_values(std::size_t(m * k), t, 1.0f, rng);
    const Bytes weight = random_values(std::size_t(k), t, 1.0f, rng);
    const Bytes cache = random_values(std::size_t(cache_rows * kv * d), t, 1.0f, rng);
    std::vector<std::int32_t> rows(static_cast<std::size_t>(cache_rows));
    for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = std::int32_t(i);
    std::shuffle(rows.begin(), rows.end(), rng);
    rows.resize(std::size_t(m));
    // Each row's position within its sequence, which starts at cache row rows[i] - position.
    std::vector<std::int32_t> sequence_positions(rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i)
      sequence_positions[i] = std::int32_t(rng() % std::uint64_t(rows[i] + 1));
    order::RopeParams rp;
    rp.dims = int(d);
    rp.base = 10000.0 + double(rng() % 1000000);
    const auto phase_steps = order::rope_phase_steps(order::rope_inverse_frequencies(rp));
    Bytes steps(phase_steps.size() * 8);
    std::memcpy(steps.data(), phase_steps.data(), steps.size());
    const std::size_t e = ref_size(t);

    // The CPU's ops one by one. y: gated [m, inter], rope_write [m, n] (q, k, v per row).
    Bytes want_y, want_keys, want_values;
    {
      auto ch = put(*cpu, h), cd = put(*cpu, delta), cw = put(*cpu, weight), cx = put(*cpu, h);
      auto stacked = put(*cpu, Bytes(std::size_t(m * n) * e));
      cpu->add_rmsnorm(*ch, *cd, *cw, m, k, t, 1e-5f, false, *cx);
      cpu->qmv(Kernel::qmv, *cpu->load(w.view()), *cx, m, *stacked);
      if (!rope) {
        auto g = put(*cpu, Bytes(std::size_t(m * inter) * e)), u = put(*cpu, Bytes(std::size_t(m * inter) * e));
        cpu->copy_rows(*stacked, 0, std::size_t(n) * e, *g, 0, std::size_t(inter) * e, std::size_t(inter) * e, m);
        cpu->copy_rows(*stacked, std::size_t(inter) * e, std::size_t(n) * e, *u, 0, std::size_t(inter) * e, std::size_t(inter) * e, m);
        cpu->gated_activation(*g, *u, m * inter, act, t, *g);
        want_y = get(*cpu, *g);
      } else {
        const std::int64_t widths[3] = {heads * d, kv * d, kv * d};
        std::unique_ptr<Buffer> part[3];
        std::size_t offset = 0;
        for (int i = 0; i < 3; ++i) {
          part[i] = put(*cpu, Bytes(std::size_t(m * widths[i]) * e));
          cpu->copy_rows(*stacked, offset, std::size_t(n) * e, *part[i], 0, std::size_t(widths[i]) * e, std::size_t(widths[i]) * e, m);
          offset += std::size_t(widths[i]) * e;
        }
        auto keys = put(*cpu, cache), values = put(*cpu, cache), at = put(*cpu, positions_of(sequence_positions));
        auto in_cache = put(*cpu, positions_of(rows)), st = put(*cpu, steps);
        cpu->rope_write(*part[0], *part[1], *part[2], m, heads, kv, d, t, *at, *in_cache, *st, interleaved, *keys,
                        *values);
        offset = 0;
        for (int i = 0; i < 3; ++i) {
          cpu->copy_rows(*part[i], 0, std::size_t(widths[i]) * e, *stacked, offset, std::size_t(n) * e, std::size_t(widths[i]) * e, m);
          offset += std::size_t(widths[i]) * e;
        }
        want_y = get(*cpu, *stacked), want_keys = get(*cpu, *keys), want_values = get(*cpu, *values);
      }
    }

    struct Out {
      bool ran;
      Bytes y, keys, values;
    };
    auto fused = [&](const Bytes& norm_weight) {
      auto gh = put(*cuda, h), gd = put(*cuda, delta), gw = put(*cuda, norm_weight), out = put(*cuda, Bytes(h.size()));
      auto gy = put(*cuda, Bytes(want_y.size()));
      auto keys = put(*cuda, cache), values = put(*cuda, cache), at = put(*cuda, positions_of(sequence_positions));
      auto in_cache = put(*cuda, positions_of(rows)), st = put(*cuda, steps);
      LinearEpilogue then{rope ? LinearEpilogue::Kind::rope_write : LinearEpilogue::Kind::gated,
                          act,
                          heads,
                          kv,
                          d,
                          at.get(),
                          in_cache.get(),
                          st.get(),
                          interleaved,
                          keys.get(),
                          values.get()};
      const bool ran = cuda->norm_qmv(Kernel::qmv, *cuda->load(w.view()), *gh, gd.get(), *gw, m, 1e-5f, false, out.get(), *gy, then);
      return Out{ran, get(*cuda, *gy), get(*cuda, *keys), get(*cuda, *values)};
    };
    const Out got = fused(weight);
    EXPECT_TRUE(got.ran);
    EXPECT_TRUE(got.y == want_y) << "y: " << differing_bytes(want_y, got.y) << " bytes differ";
    if (rope) {
      EXPECT_TRUE(got.keys == want_keys) << "keys: " << differing_bytes(want_keys, got.keys) << " bytes differ";
      EXPECT_TRUE(got.values == want_values) << "values: " << differing_bytes(want_values, got.values) << " bytes differ";
    }
    const Out changed = fused(changed_weights(weight, t));
    controls += changed.y != want_y && (!rope || changed.keys != want_keys);
    ++cases;
  }
  EXPECT_EQ(controls, cases) << "a changed norm weight must change the outputs";

  // Gate/up halves whose pairs do not tile 4-row tasks: no kernel, nothing written.
  const std::int64_t inter = 33, k = 256;
  const QuantizedMatrix w = random_matrix(2 * inter, k, 4, 64, DType::bf16, rng);
  const Bytes h = random_values(std::size_t(k), DType::bf16, 1.0f, rng), weight = random_values(std::size_t(k), DType::bf16, 1.0f, rng);
  auto gh = put(*cuda, h), gw = put(*cuda, weight), gy = put(*cuda, Bytes(std::size_t(inter) * 2));
  EXPECT_FALSE(cuda->norm_qmv(Kernel::qmv, *cuda->load(w.view()), *gh, nullptr, *gw, 1, 1e-5f, false, nullptr, *gy,
                              {LinearEpilogue::Kind::gated, Activation::silu}));
  EXPECT_EQ(get(*cuda, *gy), Bytes(std::size_t(inter) * 2));
}

// RMSNorm and argmax at the sizes of real models, where the CUDA kernels take their other paths:
// rows staged in 16-byte vectors (h a multiple of 8) or element by element, a row past 48 KB of
// shared memory (h = 16384 in f32), many small rows (per-head q/k norms), y the same buffer as x;
// argmax over vocabularies of many slices, with the largest value tied across slices (the lowest
// index must win), NaNs, -inf and an all-NaN row (index 0). Controls: a changed input changes the
// bytes of each.
TEST(CudaDecoderOps, NormAndArgmaxAtModelSizes) {
  REQUIRE_CUDA_BACKEND();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Both both;
  int controls = 0, cases = 0;
  for (DType t : kTypes) {
    SCOPED_TRACE(dtype_name(t));
    const std::pair<std::int64_t, std::int64_t> shapes[] = {{1, 4096}, {3, 3840}, {2, 5120}, {32, 128}, {5, 4093},
                                                            {1, 16384}, {7, 264}};
    for (const auto& [rows, h] : shapes) {
      const Bytes x = random_values(std::size_t(rows * h), t, 4.0f, rng), w = random_values(std::size_t(h), t, 1.0f, rng);
      for (bool in_place : {false, true}) {
        auto norm = [&, in_place](Backend& b, auto& v) { b.rmsnorm(*v[0], *v[1], rows, h, t, 1e-5f, true, in_place ? *v[0] : *v[2]); };
        const std::size_t out = in_place ? 0 : 2;
        const auto [c1, c2] = both.run({x, w, Bytes(x.size())}, out, norm);
        EXPECT_EQ(c1, c2) << "rmsnorm " << rows << "x" << h << (in_place ? " in place" : "");
        controls += both.run({poked(x, std::size_t(rows * h - 1), t, 100.0f), w, Bytes(x.size())}, out, norm).second != c1;
        ++cases;
      }
    }
    for (std::int64_t n : {std::int64_t(128256), std::int64_t(262208), std::int64_t(151937), std::int64_t(2049)}) {
      const std::int64_t m = 3;
      Bytes logits = random_values(std::size_t(m * n), t, 8.0f, rng);
      const std::int64_t a = std::int64_t(rng() % std::uint64_t(n / 2)), b = n / 2 + std::int64_t(rng() % std::uint64_t(n / 2));
      ref_store(logits.data(), std::size_t(b), t, 60.0f);  // row 0: a tie across slices, the lower index must win
      ref_store(logits.data(), std::size_t(a), t, 60.0f);
      const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
      for (std::int64_t j = 0; j < n; j += 97) ref_store(logits.data(), std::size_t(n + j), t, j % 2 ? nan : -inf);
      for (std::int64_t j = 0; j < n; ++j) ref_store(logits.data(), std::size_t(2 * n + j), t, nan);  // row 2: all NaN
      auto argmax = [&](Backend& bk, auto& v) { bk.argmax(*v[0], m, n, t, *v[1]); };
      const auto [i1, i2] = both.run({logits, Bytes(std::size_t(m) * 4)}, 1, argmax);
      EXPECT_EQ(i1, i2) << "argmax n " << n;
      std::int32_t first = -1;
      std::memcpy(&first, i2.data(), 4);
      EXPECT_EQ(first, a) << "the lowest of two equal maxima";
      Bytes moved = logits;
      ref_store(moved.data(), std::size_t(a), t, 0.0f);
      const auto other = both.run({moved, Bytes(std::size_t(m) * 4)}, 1, argmax).second;
      controls += other != i2;
      ++cases;
    }
  }
  EXPECT_EQ(controls, cases) << "a changed input must change the compared bytes";
}

// launch_attention called directly with a workspace of `workspace_bytes`, filled with NaN bytes
// first (a chunk slot read before it is written would show).
Bytes attention_with_workspace(const Bytes& q, const Bytes& keys, const Bytes& values, std::int64_t m,
                               std::int64_t start, std::int64_t bound, const AttentionShape& shape, DType t,
                               std::size_t workspace_bytes) {
  auto put = [](const Bytes& host) {
    cuda::DeviceBuffer d(host.size());
    d.upload(host);
    return d;
  };
  const cuda::DeviceBuffer qd = put(q), kd = put(keys), vd = put(values), at = put(consecutive_positions(start, m));
  cuda::DeviceBuffer out(q.size()), workspace(workspace_bytes);
  cuda::DeviceBuffer counters(cuda_detail::attention_counter_count(m, shape) * sizeof(unsigned));
  workspace.fill(0xff);
  counters.fill(0);
  const auto* positions = reinterpret_cast<const std::int32_t*>(at.bytes().data());
  const std::int64_t cache_rows =
      std::int64_t(keys.size() / (std::size_t(shape.kv_heads * shape.head_dim) * ref_size(t)));
  cuda_detail::launch_attention(qd.bytes().data(), kd.bytes().data(), vd.bytes().data(), m, positions, positions,
                                cache_rows, bound, shape, t, out.bytes().data(), workspace.bytes().data(),
                                workspace.size(), reinterpret_cast<unsigned*>(counters.bytes().data()), nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  Bytes host(q.size());
  out.download(host);
  Bytes left(counters.size());
  counters.download(left);
  EXPECT_EQ(left, Bytes(left.size())) << "the call must leave its counters at zero";
  return host;
}

// Attention split over key chunks (attention.cu): starts past 1,000 positions (17+ chunks) with up
// to 16 rows of a verify block (each row sees its own number of chunks), windows that cut a chunk
// (and 1, 64, 128 and wider than the cache), head dims 64, 128 and 256 (and 512 with 12 query
// heads per kv head: two head groups per kv head; and a random one in f16), GQA ratios 1, 2, 4
// and 8. The cache runs past the last row and every key or value no row sees (past the last row,
// before the first row's window) holds NaN, infinities or 1e30. Each case also runs through
// launch_attention with a workspace of 1 to 3 rows, so the rows go in slices. Controls: a key of
// the last row's first visible position, or of its own, aligned with its query changes the CUDA bytes;
// in f32 at long starts, the CPU tests' control order (chunks of ceil(length / 4)) differs from
// the CUDA bytes on some row.
TEST(CudaDecoderOps, AttentionSplitOverChunksGivesTheCpuBytes) {
  REQUIRE_CUDA_BACKEND();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  Both both;
  std::size_t pokes = 0, poke_controls = 0, chunk_controls = 0;
  bool refused = false;
  const std::int64_t dims[] = {64, 128, 256}, ratios[] = {1, 2, 4, 8};
  for (DType t : kTypes)
    for (int c = 0; c < 14; ++c) {
      if (t == DType::f16 && c != 13) continue;
      std::int64_t d = dims[c % 3], ratio = ratios[c % 4], kv = 1 + std::int64_t(rng() % 2);
      std::int64_t m = c % 5 == 0 ? 16 : 1 + std::int64_t(rng() % 16);
      const std::int64_t start = c % 5 == 3 ? std::int64_t(rng() % 150) : 1025 + std::int64_t(rng() % 1500);
      if (c == 12) d = 512, ratio = 12, kv = 1, m = 1 + std::int64_t(rng() % 4);
      if (c == 13) d = 8 * (1 + std::int64_t(rng() % 64)), ratio = 1 + std::int64_t(rng() % 16), m = 1 + std::int64_t(rng() % 8);
      const std::int64_t heads = kv * ratio, last = start + m - 1;
      const std::int64_t positions = start + m + 1 + std::int64_t(rng() % 70);  // the cache runs past the last row
      std::int64_t cut = 65 + std::int64_t(rng() % 900);
      if (cut % 64 == 0) cut += 1 + std::int64_t(rng() % 63);
      const std::int64_t others[] = {1, 64, 128, positions + 5};
      const Bytes q = random_values(std::size_t(m * heads * d), t, c % 2 ? 3.0f : 1.0f, rng);
      const Bytes keys = random_values(std::size_t(positions * kv * d), t, 1.0f, rng);
      const Bytes values = random_values(keys.size() / ref_size(t), t, 1.0f, rng);
      for (std::int64_t window : {std::int64_t(0), cut, others[rng() % 4]}) {
        const std::string what = "dtype " + std::to_string(int(t)) + " m " + std::to_string(m) + " start " +
                                 std::to_string(start) + " heads " + std::to_string(heads) + "/" + std::to_string(kv) +
                                 " d " + std::to_string(d) + " window " + std::to_string(window);
        SCOPED_TRACE(what);
        const AttentionShape shape{heads, kv, d, order::attention_scale(double(d)), window};
        // Poison what no row sees: positions before the first row's window and past the last row.
        Bytes k = keys, v = values;
        const float poison[] = {NAN, INFINITY, -INFINITY, 1e30f};
        const std::int64_t lo = order::attention_first_visible(start, window);
        for (std::int64_t j = 0; j < positions; ++j)
          if (j < lo || j > last)
            for (std::int64_t i = 0; i < kv * d; ++i) {
              const std::size_t at = std::size_t(j * kv * d + i);
              ref_store(k.data(), at, t, poison[at % 4]);
              ref_store(v.data(), at, t, poison[(at + 1) % 4]);
            }
        // The bound of the grid: the last row, or anywhere up to the cache's end (no byte changes).
        const std::int64_t bound = rng() % 2 ? last : last + std::int64_t(rng() % std::uint64_t(positions - last));
        auto attend = [&](Backend& b, auto& x) {
          b.attention(*x[0], *x[1], *x[2], m, *x[4], *x[4], bound, shape, t, *x[3]);
        };
        const Bytes at = consecutive_positions(start, m);
        const auto [cpu_a, cuda_a] = both.run({q, k, v, Bytes(q.size()), at}, 3, attend);
        ASSERT_TRUE(cpu_a == cuda_a) << "attention: " << differing_bytes(cpu_a, cuda_a) << " bytes differ";
        std::size_t non_finite = 0;
        for (std::size_t i = 0; i < cuda_a.size() / ref_size(t); ++i) non_finite += !std::isfinite(ref_load(cuda_a.data(), i, t));
        EXPECT_EQ(non_finite, 0u) << "a poisoned key or value was read";

        if (window == cut) {  // slices of 1 to 3 rows through a small workspace, and one too small
          const std::size_t per_row = cuda_detail::attention_workspace_bytes(1, bound, shape);
          const std::size_t rows = 1 + rng() % 3;
          const Bytes sliced = attention_with_workspace(q, k, v, m, start, bound, shape, t, rows * per_row);
          EXPECT_TRUE(cpu_a == sliced) << rows << " rows a slice: " << differing_bytes(cpu_a, sliced) << " bytes differ";
          if (!refused) {
            EXPECT_THROW(attention_with_workspace(q, k, v, m, start, bound, shape, t, per_row - 1), std::invalid_argument);
            refused = true;
          }
        }

        // Controls: a key the last row sees, at its first visible position and at its own, made
        // 4 times the last row's head-0 query: its weight then dominates that head's softmax.
        // Where the last row sees one key alone (window 1), its softmax weight is 1 whatever the
        // key, so no key change can show.
        const std::int64_t first_seen = order::attention_first_visible(last, window);
        for (std::int64_t j : {first_seen, last}) {
          if (first_seen == last) break;
          Bytes aligned = k;
          for (std::int64_t i = 0; i < d; ++i)
            ref_store(aligned.data(), std::size_t(j * kv * d + i), t,
                      4.0f * ref_load(q.data(), std::size_t((m - 1) * heads * d + i), t));
          ++pokes;
          poke_controls += Both::on(*both.cuda, {q, aligned, v, Bytes(q.size()), at}, 3, attend) != cpu_a;
        }
        if (t == DType::f32 && window == 0 && start > 1000) {  // another chunking, head 0 of each row
          const std::size_t row = std::size_t(heads * d);
          for (std::int64_t r = 0; r < m; ++r) {
            float qf[order::kMaxHeadDim], of[order::kMaxHeadDim];
            for (std::int64_t i = 0; i < d; ++i) qf[i] = ref_load(q.data(), std::size_t(r) * row + std::size_t(i), t);
            const std::int64_t p = start + r;
            order::attention_row_chunked(qf, p, k.data(), v.data(), t, std::size_t(kv * d), {int(d), shape.scale, window},
                                         int((p + 4) / 4), of);
            for (std::int64_t i = 0; i < d; ++i)
              if (f32_bits(of[i]) != f32_bits(ref_load(cuda_a.data(), std::size_t(r) * row + std::size_t(i), t))) {
                ++chunk_controls;
                break;
              }
          }
        }
      }
    }
  EXPECT_EQ(poke_controls, pokes) << "a changed visible value must change the compared bytes";
  EXPECT_GT(chunk_controls, 0u) << "control: chunks of ceil(length / 4) must change some row's bytes";
}

std::vector<std::byte> logits_of(Decoder& d, const std::vector<std::int32_t>& tokens, bool one_by_one) {
  if (!one_by_one) {
    d.forward(tokens, 0);
    return d.logits();
  }
  std::vector<std::byte> all;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    d.forward(std::span(tokens).subspan(i, 1), std::int64_t(i));
    const auto l = d.logits();
    all.insert(all.end(), l.begin(), l.end());
  }
  return all;
}

class CudaDecoder : public ::testing::TestWithParam<DecoderCase> {};

TEST_P(CudaDecoder, LogitsEqualTheCpuAndBlocksEqualSteps) {
  REQUIRE_CUDA_BACKEND();
  const DecoderCase& c = GetParam();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  TempDir dir;
  const Checkpoint ck = write_decoder_case(c, dir.path, rng);
  auto cpu = make_cpu_backend();
  auto cuda = make_cuda_backend();
  const std::size_t n = 130 + rng() % 20;  // past two attention chunks
  const auto tokens = random_tokens(n, ck.config().vocab_size, rng);
  Decoder cpu_exact(*cpu, ck, {KernelFamily::exact, 256});
  const auto reference = logits_of(cpu_exact, tokens, true);
  for (KernelFamily family : {KernelFamily::exact, KernelFamily::narrow, KernelFamily::mma}) {
    SCOPED_TRACE(std::string(to_string(family)));
    Decoder steps(*cuda, ck, {family, 256}), block(*cuda, ck, {family, 256});
    const auto s = logits_of(steps, tokens, true), b = logits_of(block, tokens, false);
    EXPECT_TRUE(s == b) << "CUDA block vs single steps";
    if (family != KernelFamily::mma) {
      EXPECT_TRUE(s == reference) << "CUDA vs CPU";
    }
  }
  if (!c.quantized) return;
  Decoder steps(*cuda, ck, {KernelFamily::wide, 256}), block(*cuda, ck, {KernelFamily::wide, 256});
  bool differs = false;
  for (int attempt = 0; attempt < 8 && !differs; ++attempt) {
    const auto other = attempt == 0 ? tokens : random_tokens(n, ck.config().vocab_size, rng);
    differs = logits_of(steps, other, true) != logits_of(block, other, false);
  }
  EXPECT_TRUE(differs) << "the negative control: qmv_wide's blocks must round differently";
}

// Several sequences in one forward on CUDA (graphs on: a forward whose shape repeats replays its
// captured step with new inputs) against the same parts on the CPU, whose rows equal each sequence run alone
// (Decoder.SequencesInOneForwardEqualEachSequenceAlone): rounds of prefill chunks, single rows (a
// lone one of M = 1 takes the fused rope_write epilogue) and verify blocks after rollbacks, with
// every row kept or each part's last. Control: a changed token of one part changes its logits.
TEST_P(CudaDecoder, SequencesInOneForwardGiveTheCpuBytes) {
  REQUIRE_CUDA_BACKEND();
  const DecoderCase& c = GetParam();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  TempDir dir;
  const Checkpoint ck = write_decoder_case(c, dir.path, rng);
  auto cpu = make_cpu_backend();
  auto cuda = make_cuda_backend();
  const std::int64_t vocab = ck.config().vocab_size, n = 3, context = 160;
  DecoderOptions o{KernelFamily::exact, context};
  o.sequences = n;
  Decoder on_cpu(*cpu, ck, o), on_cuda(*cuda, ck, o);
  int compared = 0, controls = 0, tried = 0;
  for (int round = 0; round < 40; ++round) {
    std::vector<std::vector<std::int32_t>> tokens;
    std::vector<Decoder::Part> parts;
    const bool lone = round % 7 == 6;  // one sequence, one row
    for (std::int64_t j = 0; j < n && !(lone && !parts.empty()); ++j) {
      if (!lone && rng() % 4 == 0) continue;
      const std::int64_t length = on_cpu.length(j);
      const std::int64_t start = length > 3 && rng() % 4 == 0 ? length - 1 - std::int64_t(rng() % 3) : length;
      const std::int64_t want = lone ? 1 : round < 3 ? 20 + std::int64_t(rng() % 50) : 1 + std::int64_t(rng() % 5);
      const std::int64_t size = std::min(context - start, want);
      if (size < 1) continue;
      tokens.push_back(random_tokens(std::size_t(size), vocab, rng));
      parts.push_back({j, {}, start});
    }
    if (parts.empty()) continue;
    for (std::size_t i = 0; i < parts.size(); ++i) parts[i].tokens = tokens[i];
    const Decoder::Rows rows = rng() % 3 == 0 ? Decoder::Rows::last : Decoder::Rows::all;
    on_cpu.forward(parts, rows);
    on_cuda.forward(parts, rows);
    const auto expected = on_cpu.logits();
    ASSERT_TRUE(on_cuda.logits() == expected) << "round " << round << ", " << parts.size() << " parts";
    ++compared;
    if (round % 9 == 4) {
      auto other = tokens;
      other.back().back() = (other.back().back() + 1) % std::int32_t(vocab);
      for (std::size_t i = 0; i < parts.size(); ++i) parts[i].tokens = other[i];
      on_cuda.forward(parts, rows);
      controls += on_cuda.logits() != expected;
      ++tried;
      for (std::size_t i = 0; i < parts.size(); ++i) parts[i].tokens = tokens[i];
      on_cuda.forward(parts, rows);
    }
  }
  EXPECT_GT(compared, 30);
  EXPECT_GT(tried, 0);
  EXPECT_EQ(controls, tried) << "a changed token must change the logits";
}

// Captured steps (CUDA graphs) against the same ops issued one by one: every architecture, widths
// 1 to 16 in a random order, each width run often enough to be captured and replayed, starts that
// cross chunk boundaries and attention bounds, workspaces that grow in between (graphs captured
// before are then captured again). Control: a changed last token in one forward changes its logits.
TEST_P(CudaDecoder, CapturedStepsEqualEagerOps) {
  REQUIRE_CUDA_BACKEND();
  const DecoderCase& c = GetParam();
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  TempDir dir;
  const Checkpoint ck = write_decoder_case(c, dir.path, rng);
  auto cuda = make_cuda_backend();
  DecoderOptions captured{KernelFamily::exact, 512}, eager = captured;
  eager.graphs = false;
  Decoder g(*cuda, ck, captured), e(*cuda, ck, eager);
  const std::int64_t vocab = ck.config().vocab_size;
  auto prompt = random_tokens(40 + rng() % 30, vocab, rng);
  g.forward(prompt, 0, Decoder::Rows::last);
  e.forward(prompt, 0, Decoder::Rows::last);
  ASSERT_EQ(g.logits(), e.logits());
  int compared = 0, controls = 0;
  while (g.length() < 400) {
    const std::int64_t width = 1 + std::int64_t(rng() % 16);
    const auto tokens = random_tokens(std::size_t(width), vocab, rng);
    for (int repeat = 0; repeat < 3 && g.length() + width <= 512; ++repeat) {
      // Verify-like: run a block, then roll back to its middle now and then, as speculation does.
      const std::int64_t start = g.length();
      const auto rows = rng() % 4 ? Decoder::Rows::all : Decoder::Rows::last;
      g.forward(tokens, start, rows);
      e.forward(tokens, start, rows);
      const auto expected = e.logits();
      ASSERT_TRUE(g.logits() == expected) << "width " << width << " at " << start;
      ++compared;
      if (compared % 17 == 0) {
        auto other = tokens;  // the last row's own token: its logits, kept with either Rows, must change
        other.back() = (other.back() + 1) % std::int32_t(vocab);
        e.forward(other, start, rows);
        controls += e.logits() != expected;
        e.forward(tokens, start, rows);
      }
      const std::int64_t keep = start + 1 + std::int64_t(rng() % std::uint64_t(width));
      g.truncate(keep);
      e.truncate(keep);
    }
  }
  EXPECT_GT(compared, 30);
  EXPECT_GT(g.replayed_forwards(), compared / 3) << "most forwards replay a captured step";
  EXPECT_EQ(e.replayed_forwards(), 0);
  EXPECT_EQ(controls, compared / 17) << "a changed token must change the logits";
}

INSTANTIATE_TEST_SUITE_P(All, CudaDecoder, ::testing::ValuesIn(decoder_cases()), [](const auto& info) { return info.param.name(); });

}  // namespace
}  // namespace exactq::test
