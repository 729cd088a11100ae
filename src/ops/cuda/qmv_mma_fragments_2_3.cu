// qmv_mma on the fragment layout at 2 and 3 bits (the kernel: qmv_mma_fragments.cuh). A
// translation unit of its own so that the widths compile in parallel.
#include "ops/cuda/qmv_mma_fragments.cuh"

namespace exactq::cuda_detail::fragments {
EXACTQ_FRAGMENT_WIDTH(2, )
EXACTQ_FRAGMENT_WIDTH(3, )
}  // namespace exactq::cuda_detail::fragments
