// qmv on CUDA: the M=1 reference order (docs/design.md §3). At M > 1 every vector gets its own
// grid row and re-reads the weights (the narrow arm). The kernel body is qmv_family.cuh at V = 1.
#include "cuda/family_launch.cuh"

namespace exactq::cuda_detail {

namespace {
inline constexpr int kQmvRows = 2;
}  // namespace

void launch_qmv(const QuantizedMatrixView& w, const void* x, std::int64_t vector_offset, std::int64_t m, void* y,
                cudaStream_t stream) {
  // Two rows per warp: at the 64 registers that 4 blocks per SM allow, four rows spill.
  dispatch_bits(w.bits, [&]<int BITS>() { launch_family<BITS, 1, kQmvRows>(w, x, vector_offset, m, y, vector_offset + m, stream); });
}

cuda::KernelResources qmv_resources(int bits) {
  cuda::KernelResources r;
  dispatch_bits(bits, [&]<int BITS>() { r = family_resources<BITS, 1, kQmvRows>(); });
  return r;
}

}  // namespace exactq::cuda_detail
