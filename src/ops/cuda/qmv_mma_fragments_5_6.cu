// qmv_mma on the fragment layout at 5 and 6 bits (the kernel: qmv_mma_fragments.cuh). A
// translation unit of its own so that the widths compile in parallel.
#include "ops/cuda/qmv_mma_fragments.cuh"

namespace exactq::cuda_detail::fragments {
EXACTQ_FRAGMENT_WIDTH(5, )
EXACTQ_FRAGMENT_WIDTH(6, )
}  // namespace exactq::cuda_detail::fragments
