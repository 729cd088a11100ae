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
}  // namespace

void launch_qmv(const QuantizedMatrixView& w, const void* x, std::int64_t vector_offset, std::int64_t m, void* y,
                const QmvOptions& options, cudaStream_t stream) {
  dispatch_bits(w.bits, [&]<int BITS>() {
    dispatch_dtype(w.dtype, [&]<int PARAM>() { launch_family<BITS, 1, kQmvRows<BITS>, PARAM>(w, x, vector_offset, m, y, options, stream); });
  });
}

KernelResources qmv_resources(int bits) {
  KernelResources r;
  dispatch_bits(bits, [&]<int BITS>() { r = family_resources<BITS, 1, kQmvRows<BITS>, int(DType::bf16)>(); });
  return r;
}

}  // namespace exactq::cuda_detail
