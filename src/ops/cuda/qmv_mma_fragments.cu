// qmv_mma on the fragment layout: the entry points, and the 4- and 8-bit kernels. The kernel is
// in qmv_mma_fragments.cuh; 2, 3, 5 and 6 bits are compiled in qmv_mma_fragments_2_3.cu and
// qmv_mma_fragments_5_6.cu.
#include "ops/cuda/qmv_mma_fragments.cuh"

namespace exactq::cuda_detail {

namespace fragments {
EXACTQ_FRAGMENT_WIDTH(4, )
EXACTQ_FRAGMENT_WIDTH(8, )
}  // namespace fragments

void launch_qmv_mma_fragments(const QuantizedMatrixView& w, const void* x, std::int64_t m, void* y,
                              cudaStream_t stream) {
  mma::check_mma_arguments(w);
  mma_layout::check_shape(w.n, w.k, w.bits, w.group);  // validate() has checked it too
  // The kernel walks codes in 16-byte pieces and parameters in 4-byte words with 32-bit offsets.
  const std::int64_t pieces = mma_layout::padded_rows(w.n) * w.k * w.bits / 8 / 16;
  const std::int64_t param_words = mma_layout::padded_rows(w.n) * (w.k / w.group) / 2;
  if (pieces >= (std::int64_t(1) << 32) || param_words >= (std::int64_t(1) << 32))
    throw std::invalid_argument("[exactq] qmv_mma: a fragment-layout matrix of " + std::to_string(pieces * 16) +
                                " bytes of codes is beyond the kernel's 32-bit offsets (64 GB)");
  dispatch_value<2, 3, 4, 5, 6, 8>(w.bits, "qmv_mma bits",
                                   [&]<int BITS>() { fragments::launch_width<BITS>(w, x, m, y, stream); });
}

KernelResources qmv_mma_fragments_resources(int bits, int vectors) {
  KernelResources r{};
  dispatch_value<2, 3, 4, 5, 6, 8>(bits, "qmv_mma bits", [&]<int BITS>() { r = fragments::width_resources<BITS>(vectors); });
  return r;
}

}  // namespace exactq::cuda_detail
