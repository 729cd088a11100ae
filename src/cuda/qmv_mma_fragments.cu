// qmv_mma on the fragment layout: the entry points, and the 4- and 8-bit kernels. The kernel is
// in qmv_mma_fragments.cuh; 2, 3, 5 and 6 bits are compiled in qmv_mma_fragments_2_3.cu and
// qmv_mma_fragments_5_6.cu.
#include "cuda/qmv_mma_fragments.cuh"

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
  switch (w.bits) {
    case 2: return fragments::launch_width<2>(w, x, m, y, stream);
    case 3: return fragments::launch_width<3>(w, x, m, y, stream);
    case 4: return fragments::launch_width<4>(w, x, m, y, stream);
    case 5: return fragments::launch_width<5>(w, x, m, y, stream);
    case 6: return fragments::launch_width<6>(w, x, m, y, stream);
    case 8: return fragments::launch_width<8>(w, x, m, y, stream);
    default: throw std::logic_error("[exactq] qmv_mma: no kernel built for bits = " + std::to_string(w.bits));
  }
}

cuda::KernelResources qmv_mma_fragments_resources(int bits, int vectors) {
  switch (bits) {
    case 2: return fragments::width_resources<2>(vectors);
    case 3: return fragments::width_resources<3>(vectors);
    case 4: return fragments::width_resources<4>(vectors);
    case 5: return fragments::width_resources<5>(vectors);
    case 6: return fragments::width_resources<6>(vectors);
    default: return fragments::width_resources<8>(vectors);
  }
}

}  // namespace exactq::cuda_detail
