// qmv on CUDA: the M=1 reference order (docs/design.md §3). At M > 1 every vector gets its own
// grid row and re-reads the weights (the narrow arm). The kernel body is qmv_family.cuh at V = 1.
#include "cuda/family_launch.cuh"

namespace exactq::cuda_detail {

void launch_qmv(const QuantizedMatrixView& w, const void* x, std::int64_t vector_offset, std::int64_t m, void* y,
                cudaStream_t stream) {
  dispatch_bits(w.bits, [&]<int BITS>() {
    if (family_cost<BITS, 1, 2>(w) < family_cost<BITS, 1, 4>(w))
      launch_family<BITS, 1, 2>(w, x, vector_offset, m, y, vector_offset + m, stream);
    else
      launch_family<BITS, 1, 4>(w, x, vector_offset, m, y, vector_offset + m, stream);
  });
}

cuda::KernelResources qmv_resources(int bits) {
  cuda::KernelResources r;
  dispatch_bits(bits, [&]<int BITS>() { r = family_resources<BITS, 1>(); });
  return r;
}

}  // namespace exactq::cuda_detail
