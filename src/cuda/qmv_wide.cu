// qmv_wide on CUDA: MLX qmv_wide's order (docs/design.md §5), the deliberately different arm.
// A warp holds 4 rows of 8 lanes; lane j of a row takes groups j, j+8, ... Each 8-code
// sub-chunk is dequantized (s*q+b) and dotted with the activations of up to 5 vectors; the lanes
// of a row meet in the shuffle-down ladder 4, 2, 1 within their 8-lane segment.
#include "cuda/family_launch.cuh"

namespace exactq::cuda_detail {

namespace {

inline constexpr int kWideRowsPerWarp = 32 / order::kWideLanes;

template <int BITS, int V>
__global__ void __launch_bounds__(kThreads) qmv_wide_kernel(const QmvParams p) {
  extern __shared__ float4 shared_raw[];
  float* xs = reinterpret_cast<float*>(shared_raw);  // [V][tile_values], group-swizzled
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int k_lane = lane % order::kWideLanes;
  const std::int64_t row_bytes = p.k * BITS / 8;
  const std::int64_t groups = p.k / p.group;
  const int chunks_per_group = p.group / kChunkValues;
  const int group_shift = p.group == 32 ? 5 : (p.group == 64 ? 6 : 7);
  const int tile_groups = p.tile_values / p.group;
  const std::int64_t v0 = p.vector_offset + std::int64_t(blockIdx.y) * V;
  const int tiles = ceil_div(p.k, p.tile_values);
  constexpr int kRowsPerBlock = kWarps * kWideRowsPerWarp;
  const std::int64_t row_blocks = (p.n + kRowsPerBlock - 1) / kRowsPerBlock;

  auto stage = [&](int tile) {
    const std::int64_t first = std::int64_t(tile) * p.tile_values;
    const int count = int(p.k - first < p.tile_values ? p.k - first : p.tile_values);
    __syncthreads();
    stage_activations<V>(xs, p.tile_values, p.x, p.dtype, p.k, v0, first, count, group_shift);
    __syncthreads();
  };
  if (tiles == 1) stage(0);

  for (std::int64_t rb = blockIdx.x; rb < row_blocks; rb += gridDim.x) {
    const std::int64_t row_unclamped = rb * kRowsPerBlock + warp * kWideRowsPerWarp + lane / order::kWideLanes;
    const std::int64_t row = row_unclamped < p.n ? row_unclamped : p.n - 1;
    const std::uint8_t* wrow = p.packed + row * row_bytes;
    float total[V];
#pragma unroll
    for (int v = 0; v < V; ++v) total[v] = 0.0f;

    for (int tile = 0; tile < tiles; ++tile) {
      if (tiles > 1) stage(tile);
      const std::int64_t group0 = std::int64_t(tile) * tile_groups;
      const int count = int(groups - group0 < tile_groups ? groups - group0 : tile_groups);
      for (int g = k_lane; g < count; g += order::kWideLanes) {
        const std::int64_t gg = group0 + g;
        const float s = load_param<kRuntimeDtype>(p.scales, row * groups + gg, p.dtype);
        const float b = load_param<kRuntimeDtype>(p.biases, row * groups + gg, p.dtype);
        for (int ch = 0; ch < chunks_per_group; ++ch) {
          std::uint32_t words[BITS];
          load_chunk<BITS>(wrow + (gg * chunks_per_group + ch) * (4 * BITS), words);
          [&]<int... SUB>(std::integer_sequence<int, SUB...>) {
            (
                [&] {
                  constexpr int sub = SUB;
                  float wdq[order::kWideSubChunk];
                  decode_codes<BITS, sub * order::kWideSubChunk, order::kWideSubChunk>(words, wdq);
#pragma unroll
                  for (int i = 0; i < order::kWideSubChunk; ++i) wdq[i] = order::wide_dequant(s, wdq[i], b);
                  const int e = g * p.group + ch * kChunkValues + sub * order::kWideSubChunk;
#pragma unroll
                  for (int v = 0; v < V; ++v) {
                    const float4 lo = *reinterpret_cast<const float4*>(xs + v * p.tile_values + swizzle(e, group_shift));
                    const float4 hi = *reinterpret_cast<const float4*>(xs + v * p.tile_values + swizzle(e + 4, group_shift));
                    float a = 0.0f;
                    a = order::wide_step(a, lo.x, wdq[0]);
                    a = order::wide_step(a, lo.y, wdq[1]);
                    a = order::wide_step(a, lo.z, wdq[2]);
                    a = order::wide_step(a, lo.w, wdq[3]);
                    a = order::wide_step(a, hi.x, wdq[4]);
                    a = order::wide_step(a, hi.y, wdq[5]);
                    a = order::wide_step(a, hi.z, wdq[6]);
                    a = order::wide_step(a, hi.w, wdq[7]);
                    total[v] = order::add(total[v], a);
                  }
                }(),
                ...);
          }(std::make_integer_sequence<int, kChunkValues / order::kWideSubChunk>{});
        }
      }
    }
#pragma unroll
    for (int v = 0; v < V; ++v) {
      float t = total[v];
#pragma unroll
      for (int step = 0; step < order::kWideLadderSteps; ++step)
        t = order::add(t, __shfl_down_sync(0xffffffffu, t, order::wide_ladder_offset(step), order::kWideLanes));
      total[v] = t;
    }
    if (k_lane == 0 && row_unclamped < p.n) {
#pragma unroll
      for (int v = 0; v < V; ++v) store_f32(p.y, std::size_t((v0 + v) * p.n + row_unclamped), p.dtype, total[v]);
    }
  }
}

template <typename F>
void dispatch_wide_vectors(int v, F&& f) {
  dispatch_value<1, 2, 3, 4, 5>(v, "qmv_wide V", std::forward<F>(f));
}

template <int BITS, int V>
int wide_blocks_per_sm(std::size_t smem) {
  return resident_blocks<qmv_wide_kernel<BITS, V>>(kThreads, smem, 100 * 1024);
}

template <int BITS, int V>
void launch_wide(const QuantizedMatrixView& w, const void* x, std::int64_t vector_offset, std::int64_t tiles, void* y,
                 std::int64_t m, cudaStream_t stream) {
  QmvParams p{w.packed.data(), w.scales.data(), w.biases.data(), x, y, w.n, w.k, 0, w.group, k_tile(w.k, V, 0.0),
              w.dtype};
  const std::size_t smem = std::size_t(V) * p.tile_values * 4;
  constexpr int kRowsPerBlock = kWarps * kWideRowsPerWarp;
  const std::int64_t row_blocks = (w.n + kRowsPerBlock - 1) / kRowsPerBlock;
  const std::int64_t resident = std::int64_t(wide_blocks_per_sm<BITS, V>(smem)) * sm_count();
  const unsigned grid_x = unsigned(row_blocks < resident ? row_blocks : resident);
  constexpr std::int64_t kMaxGridY = 65535;
  for (std::int64_t t0 = 0; t0 < tiles; t0 += kMaxGridY) {
    const std::int64_t count = tiles - t0 < kMaxGridY ? tiles - t0 : kMaxGridY;
    p.vector_offset = vector_offset + t0 * V;
    qmv_wide_kernel<BITS, V><<<dim3(grid_x, unsigned(count)), kThreads, smem, stream>>>(p);
    EXACTQ_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace

void launch_qmv_wide(const QuantizedMatrixView& w, const void* x, std::int64_t m, void* y, cudaStream_t stream) {
  const int width = order::wide_vectors_per_tile(m);
  const std::int64_t full = m / width;
  const int rest = int(m - full * width);
  auto launch = [&](int v, std::int64_t offset, std::int64_t tiles) {
    dispatch_wide_vectors(v, [&]<int V>() {
      dispatch_bits(w.bits, [&]<int BITS>() { launch_wide<BITS, V>(w, x, offset, tiles, y, m, stream); });
    });
  };
  launch(width, 0, full);
  if (rest > 0) launch(rest, full * width, 1);
}

cuda::KernelResources qmv_wide_resources(int bits, int vectors) {
  cuda::KernelResources r;
  dispatch_wide_vectors(vectors, [&]<int V>() {
    dispatch_bits(bits, [&]<int BITS>() {
      cudaFuncAttributes a{};
      EXACTQ_CUDA_CHECK(cudaFuncGetAttributes(&a, qmv_wide_kernel<BITS, V>));
      r = {a.numRegs, int(a.localSizeBytes), a.maxThreadsPerBlock,
           wide_blocks_per_sm<BITS, V>(std::size_t(V) * k_tile(4096, V, 0.0) * 4)};
    });
  });
  return r;
}

}  // namespace exactq::cuda_detail
