// qmv_streamed on CUDA: qmv's order, up to V vectors per pass over the weights (docs/design.md §4).
// M vectors go in ceil(M / Vmax) passes of equal width V (MLX's balancing); a remainder narrower
// than V runs as its own launch. Every instantiated width computes each vector exactly as qmv.
#include "cuda/family_launch.cuh"

namespace exactq::cuda_detail {

namespace {
inline constexpr int kMaxStreamed = 8;
inline constexpr int kTemplatedDtypeMaxV = 4;  // see dispatch_dtype

template <typename F>
void dispatch_vectors(int v, F&& f) {
  dispatch_value<2, 3, 4, 5, 6, 7, 8>(v, "qmv_streamed V", std::forward<F>(f));
}
}  // namespace

void launch_qmv_streamed(const QuantizedMatrixView& w, const void* x, std::int64_t m, void* y,
                         const QmvOptions& options, cudaStream_t stream) {
  const int vmax = options.streamed_max_vectors < kMaxStreamed ? options.streamed_max_vectors : kMaxStreamed;
  const std::int64_t passes = (m + vmax - 1) / vmax;
  const int width = int((m + passes - 1) / passes);
  const std::int64_t full = m / width;
  const int rest = int(m - full * width);
  auto launch = [&](int v, std::int64_t offset, std::int64_t tiles) {
    if (v == 1) return launch_qmv(w, x, offset, tiles, y, options, stream);
    dispatch_vectors(v, [&]<int V>() {
      dispatch_bits(w.bits, [&]<int BITS>() {
        if constexpr (V <= kTemplatedDtypeMaxV) {
          dispatch_dtype(w.dtype, [&]<int PARAM>() { launch_family<BITS, V, kFamilyRows, PARAM>(w, x, offset, tiles, y, options, stream); });
        } else {
          launch_family<BITS, V, kFamilyRows, kRuntimeDtype>(w, x, offset, tiles, y, options, stream);
        }
      });
    });
  };
  launch(width, 0, full);
  if (rest > 0) launch(rest, full * width, 1);
}

cuda::KernelResources qmv_streamed_resources(int bits, int vectors) {
  if (vectors == 1) return qmv_resources(bits);
  cuda::KernelResources r;
  dispatch_vectors(vectors, [&]<int V>() {
    dispatch_bits(bits, [&]<int BITS>() {
      r = family_resources<BITS, V, kFamilyRows, V <= kTemplatedDtypeMaxV ? int(DType::bf16) : kRuntimeDtype>();
    });
  });
  return r;
}

}  // namespace exactq::cuda_detail

namespace exactq::cuda {
int max_streamed_vectors() { return 8; }
}  // namespace exactq::cuda
