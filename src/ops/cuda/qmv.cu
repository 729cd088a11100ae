// qmv on CUDA: the M=1 reference order (docs/design.md §3). At M > 1 every vector gets its own
// grid row and re-reads the weights (the narrow arm). The kernel body is qmv_family.cuh at V = 1.
#include "ops/cuda/family_launch.cuh"

namespace exactq::cuda_detail {

namespace {
// Rows per warp at M = 1: 4 where the registers allow it without spills (bits <= 4: each
// activation piece and each loop step serve 4 rows), else 2; two blocks of 8 warps per SM either
// way. 4-bit with 2 rows at 3 blocks per SM measured faster on the 8-18 MB shapes (gemma.down
// 16.8 vs 17.8 us) and slower on the large ones (28672x8192 45.5 vs 43.4 us).
template <int BITS>
inline constexpr int kQmvRows = BITS <= 4 ? 4 : 2;
// The widest row qmv_norm makes in shared memory: with its weight row 32 KB at 16 bits, beside a
// tile of x of 8192 values.
inline constexpr std::int64_t kQmvNormMaxK = 8192;
}  // namespace

void launch_qmv(const QuantizedMatrixView& w, const void* x, std::int64_t vector_offset, std::int64_t m, void* y,
                const QmvOptions& options, cudaStream_t stream) {
  dispatch_bits(w.bits, [&]<int BITS>() {
    dispatch_dtype(w.dtype, [&]<int PARAM>() { launch_family<BITS, 1, kQmvRows<BITS>, PARAM>(w, x, vector_offset, m, y, options, stream); });
  });
}

bool launch_qmv_norm(const QuantizedMatrixView& w, const void* h, const QmvParams& fused, std::int64_t m, void* y,
                     const QmvOptions& options, cudaStream_t stream) {
  // Instantiated where checkpoints are: 4 and 8 bits, bf16 and f16 (others run the ops one by one).
  const bool aligned = [&] {
    for (const void* b : {h, fused.delta, fused.norm_weight, static_cast<const void*>(fused.h_out)})
      if (reinterpret_cast<std::uintptr_t>(b) % 16 != 0) return false;
    return true;
  }();
  if ((w.bits != 4 && w.bits != 8) || (w.dtype != DType::bf16 && w.dtype != DType::f16) || !aligned ||
      w.k > kQmvNormMaxK)
    return false;
  bool fits = true;
  dispatch_value<4, 8>(w.bits, "bits", [&]<int BITS>() { fits = epilogue_fits<kQmvRows<BITS>>(fused, w.n); });
  if (!fits) return false;
  dispatch_value<4, 8>(w.bits, "bits", [&]<int BITS>() {
    if (w.dtype == DType::bf16)
      launch_family<BITS, 1, kQmvRows<BITS>, int(DType::bf16), true>(w, h, 0, m, y, options, stream, &fused);
    else
      launch_family<BITS, 1, kQmvRows<BITS>, int(DType::f16), true>(w, h, 0, m, y, options, stream, &fused);
  });
  return true;
}

KernelResources qmv_resources(int bits) {
  KernelResources r;
  dispatch_bits(bits, [&]<int BITS>() { r = family_resources<BITS, 1, kQmvRows<BITS>, int(DType::bf16)>(); });
  return r;
}

}  // namespace exactq::cuda_detail
