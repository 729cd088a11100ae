// qmv on CUDA: the M=1 reference order (docs/design.md §3). At M > 1 every vector gets its own
// grid row and re-reads the weights (the narrow arm). The kernel body is qmv_family.cuh at V = 1.
#include "cuda/family_launch.cuh"
#include "cuda/qmv_ring.cuh"

namespace exactq::cuda_detail {

namespace {
// Rows per warp at M = 1: 4 where the registers allow it without spills (bits <= 4: each
// activation piece and each loop step serve 4 rows), else 2; two blocks of 8 warps per SM either
// way. Measured on the H200: 4-bit with 2 rows at 3 blocks is faster on the 8-18 MB shapes
// (gemma.down 16.8 vs 17.8 us) and slower on the large ones (28672x8192 45.5 vs 43.4 us).
#ifndef EXACTQ_QMV_FOUR_ROWS_MAX_BITS  // a -D knob for tuning: 0 gives 2 rows everywhere
#define EXACTQ_QMV_FOUR_ROWS_MAX_BITS 4
#endif
template <int BITS>
inline constexpr int kQmvRows = BITS <= EXACTQ_QMV_FOUR_ROWS_MAX_BITS ? 4 : 2;

#ifndef EXACTQ_QMV_RING  // a -D knob for measuring: 0 sends 4-bit qmv through qmv_family_kernel
#define EXACTQ_QMV_RING 1
#endif

inline constexpr int kRingMaxShared = 116 * 1024;

template <int BITS, int PARAM>
void launch_ring(const QuantizedMatrixView& w, const void* x, std::int64_t vector_offset, std::int64_t m, void* y,
                 const QmvOptions& options, cudaStream_t stream) {
  check_group_parameter_count(w);
  QmvParams p{w.packed.data(), w.scales.data(), w.biases.data(), x, y, w.n, w.k, 0, w.group, ring_tile(w.k), w.dtype};
  const std::size_t smem = ring_shared_bytes<BITS>(p.tile_values);
  const std::int64_t tasks = (w.n + kRingRows - 1) / kRingRows;
  const std::int64_t resident =
      std::int64_t(resident_blocks<qmv_ring_kernel<BITS, PARAM>>(kThreads, smem, kRingMaxShared)) * sm_count();
  const unsigned grid_x = unsigned(tasks < resident ? tasks : resident);  // spread, as launch_family
  constexpr std::int64_t kMaxGridY = 65535;
  for (std::int64_t v = 0; v < m; v += kMaxGridY) {
    p.vector_offset = vector_offset + v;
    const std::int64_t count = m - v < kMaxGridY ? m - v : kMaxGridY;
    launch_overlapping(qmv_ring_kernel<BITS, PARAM>, dim3(grid_x, unsigned(count)), smem, options.overlap_launch,
                       stream, p);
  }
}
}  // namespace

void launch_qmv(const QuantizedMatrixView& w, const void* x, std::int64_t vector_offset, std::int64_t m, void* y,
                const QmvOptions& options, cudaStream_t stream) {
  dispatch_bits(w.bits, [&]<int BITS>() {
    dispatch_dtype(w.dtype, [&]<int PARAM>() {
      if constexpr (EXACTQ_QMV_RING && BITS == 4 && PARAM != int(DType::f32)) {
        if (ring_serves(w)) return launch_ring<BITS, PARAM>(w, x, vector_offset, m, y, options, stream);
      }
      launch_family<BITS, 1, kQmvRows<BITS>, PARAM>(w, x, vector_offset, m, y, options, stream);
    });
  });
}

cuda::KernelResources qmv_resources(int bits) {
  cuda::KernelResources r;
  dispatch_bits(bits, [&]<int BITS>() {
    if constexpr (EXACTQ_QMV_RING && BITS == 4) {  // the bf16 instantiation, as for the family
      cudaFuncAttributes a{};
      EXACTQ_CUDA_CHECK(cudaFuncGetAttributes(&a, qmv_ring_kernel<BITS, int(DType::bf16)>));
      const int blocks = resident_blocks<qmv_ring_kernel<BITS, int(DType::bf16)>>(
          kThreads, ring_shared_bytes<BITS>(ring_tile(4096)), kRingMaxShared);
      r = {a.numRegs, int(a.localSizeBytes), a.maxThreadsPerBlock, blocks};
    } else {
      r = family_resources<BITS, 1, kQmvRows<BITS>, int(DType::bf16)>();
    }
  });
  return r;
}

}  // namespace exactq::cuda_detail
