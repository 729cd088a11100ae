// qmv_streamed on CUDA: qmv's order, up to V vectors per pass over the weights (docs/design.md §4).
// M vectors go in passes of Vmax vectors, then one pass of the remainder; Vmax is 8, or 4 on
// matrices of many rows. Every instantiated width computes each vector exactly as qmv, so the
// widths are free to depend on M and the shape.
#include "ops/cuda/family_launch.cuh"

namespace exactq::cuda_detail {

namespace {
inline constexpr int kTemplatedDtypeMaxV = 4;  // see dispatch_dtype
// Trips per warp of the two-block kernels from which V is capped (Llama's head makes 15, Gemma's 31,
// 28672x8192 3.4, where V = 8 is the fastest per vector), and the cap.
inline constexpr std::int64_t kManyTrips = 8;
inline constexpr int kManyTripsMaxStreamed = 4;

template <typename F>
void dispatch_vectors(int v, F&& f) {
  dispatch_value<2, 3, 4, 5, 6, 7, 8>(v, "qmv_streamed V", std::forward<F>(f));
}
}  // namespace

void launch_qmv_streamed(const QuantizedMatrixView& w, const void* x, std::int64_t m, void* y,
                         const QmvOptions& options, cudaStream_t stream) {
  // Whole passes of the widest width, then one pass of the rest. Per vector the widest pass is
  // the cheapest, or within 7 % of it, on every shape measured, so equal widths
  // (MLX's balancing: M = 9 as 5 + 4) would only add narrower passes. Where the V <= 4 kernels
  // (two blocks per SM) make many trips per warp, the V >= 5 kernels (one block per SM) lack
  // loads in flight, and the cap is 4 (Gemma's head at M = 8: 873 us as one pass of 8, 643 as
  // two passes of 4).
  int vmax = options.streamed_max_vectors < kMaxStreamedVectors ? options.streamed_max_vectors : kMaxStreamedVectors;
  const std::int64_t tasks = (w.n + kFamilyRows - 1) / kFamilyRows;
  const std::int64_t two_block_warps = std::int64_t(kFamilyBlocksPerSm<kManyTripsMaxStreamed>) * kWarps * sm_count();
  if (tasks >= kManyTrips * two_block_warps) vmax = vmax < kManyTripsMaxStreamed ? vmax : kManyTripsMaxStreamed;
  const int width = int(m < vmax ? m : vmax);
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

KernelResources qmv_streamed_resources(int bits, int vectors) {
  if (vectors == 1) return qmv_resources(bits);
  KernelResources r;
  dispatch_vectors(vectors, [&]<int V>() {
    dispatch_bits(bits, [&]<int BITS>() {
      r = family_resources<BITS, V, kFamilyRows, V <= kTemplatedDtypeMaxV ? int(DType::bf16) : kRuntimeDtype>();
    });
  });
  return r;
}

}  // namespace exactq::cuda_detail
