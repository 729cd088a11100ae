// qmv_wide on CUDA: MLX qmv_wide's order (docs/design.md §5), the deliberately different arm.
// A warp holds 4 rows of 8 lanes; lane j of a row takes groups j, j+8, ... Each 8-code
// sub-chunk is dequantized (s*q+b) and dotted with the activations of up to 5 vectors; the lanes
// of a row meet in the shuffle-down ladder 4, 2, 1 within their 8-lane segment.
#include "ops/cuda/family_launch.cuh"

namespace exactq::cuda_detail {

namespace {

inline constexpr int kWideRowsPerWarp = 32 / order::kWideLanes;  // a task: 4 rows, 8 lanes each

// ---- tuning: each value below moves loads and work, never a bit ----------------------------------
// Register buffers of the software pipeline: one chunk per lane in flight while one is computed
// (deeper rings take more of the 128 registers that kWideBlocksPerSm leaves a thread).
inline constexpr int kWideDepth = 2;
// Blocks of 8 warps per SM the registers are sized for (2: at most 128 registers per thread).
inline constexpr int kWideBlocksPerSm = 2;
// x's layout (below): piece-major up to 3 vectors, swizzled from 4. On an H100 piece-major was up
// to 13 % faster at V = 1-3 and never slower there (28672x8192 at V = 1: 77.4 against 87.8 us),
// and up to 4 % slower at V = 4-5 on 28672x8192 and 3840x15360.
inline constexpr int kWidePieceMaxVectors = 3;
// x's f32 tile: at most 96 KB (K up to 24576 in one tile at V = 1), and a block's dynamic shared
// memory at most 100 KB, within the device's per-block opt-in.
inline constexpr double kWideTileBudget = 96 * 1024;
inline constexpr int kWideMaxShared = 100 * 1024;

// x in shared memory, as f32, in 16-byte pieces ("units") of 4 values. The 8 lanes of a row read
// the same piece of 8 consecutive groups at once (lane j owns groups j, j+8, ...). Two layouts
// keep those 8 reads free of bank conflicts; each lane reads the same values from either, so the
// layout never enters the order and may depend on V.
// - Swizzled: value i of a tile sits at float swizzle(i): the pieces of group g rotated by
//   4 * (g % 8) values within the group, so the address of each piece is a few integer
//   instructions.
// - Piece-major (wide_piece): piece p of group g at unit ((g / 8) * pieces_per_group + p) * 8 + g % 8,
//   so those 8 reads are 128 contiguous bytes and a lane's pieces of one chunk sit at fixed offsets
//   (8 units apart) from one base: no address arithmetic per piece. Up to kWidePieceMaxVectors.
template <int V>
inline constexpr bool kWidePieceLayout = V <= kWidePieceMaxVectors;
__device__ __forceinline__ int swizzle(int i, int group_shift) {
  const int mask = (1 << group_shift) - 1;
  const int g = i >> group_shift;
  return (i & ~mask) | (((i & mask) + 4 * (g & 7)) & mask);
}
__device__ __forceinline__ int wide_piece(int value, int group_shift) {
  const int g = value >> group_shift, p = (value & ((1 << group_shift) - 1)) >> 2;
  return (((g >> 3) << (group_shift - 2)) + p) * order::kWideLanes + (g & 7);
}
// Stages values [first, first + count) of V vectors (rows v0.. of x, width k) into xs
// ([V][stride / 4] units). count is a multiple of 32 and at most stride.
template <int V>
__device__ __forceinline__ void stage_wide_activations(float4* xs, int stride, const void* x, DType dtype, std::int64_t k,
                                                       std::int64_t v0, std::int64_t first, int count, int group_shift) {
  const int quads = count / 4;
  for (int e = threadIdx.x; e < V * quads; e += blockDim.x) {
    const int v = e / quads, i = (e - v * quads) * 4;
    const std::size_t at = std::size_t((v0 + v) * k + first + i);
    float4 f;
    if (dtype == DType::f32) {
      f = *reinterpret_cast<const float4*>(static_cast<const float*>(x) + at);
    } else {
      const uint2 h = *reinterpret_cast<const uint2*>(static_cast<const std::uint16_t*>(x) + at);
      f = make_float4(widen_half(h.x & 0xffff, dtype), widen_half(h.x >> 16, dtype), widen_half(h.y & 0xffff, dtype),
                      widen_half(h.y >> 16, dtype));
    }
    if constexpr (kWidePieceLayout<V>)
      xs[v * (stride / 4) + wide_piece(i, group_shift)] = f;
    else
      *reinterpret_cast<float4*>(reinterpret_cast<float*>(xs) + v * stride + swizzle(i, group_shift)) = f;
  }
}

// Lane j of a row owns groups j, j+8, ... (the order of docs/design.md §5). Its chunks, counted
// t = 0, 1, ... within a K tile, are chunk t % cpg of its (t / cpg)-th group. A ring of kWideDepth
// register buffers, each one chunk (32 codes) of the lane's row and its group's raw parameter
// bits: the loads run kWideDepth - 1 chunks ahead of the arithmetic in that same sequence, so every sub-chunk still reaches
// the lane's R in increasing order. How the loads are scheduled, which warp takes which rows and
// how many rows a block holds do not enter any row's order.
template <int BITS, int V>
__global__ void __launch_bounds__(kThreads, kWideBlocksPerSm) qmv_wide_kernel(const QmvParams p) {
  extern __shared__ float4 shared_raw[];
  const float4* xs = shared_raw;  // [V][tile_values / 4] units, in the layout built
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int k_lane = lane % order::kWideLanes;
  const std::int64_t row_bytes = p.k * BITS / 8;
  const std::int64_t groups = p.k / p.group;
  const int chunk_shift = p.group == 32 ? 0 : (p.group == 64 ? 1 : 2);  // chunks per group, as a shift
  const int group_shift = chunk_shift + 5;                              // values per group
  const int tile_groups = p.tile_values / p.group;  // a multiple of 8: tiles keep the lane map
  const std::int64_t v0 = p.vector_offset + std::int64_t(blockIdx.y) * V;
  const int tiles = ceil_div(p.k, p.tile_values);
  // Tasks of 4 rows, one per warp at a time, dealt block-fastest (warp w of block b is number
  // w * gridDim.x + b) so that a partial last trip spreads over all SMs. Every warp runs every trip:
  // with K in several tiles, staging synchronises the block.
  const std::int64_t tasks = (p.n + kWideRowsPerWarp - 1) / kWideRowsPerWarp;
  const std::int64_t slots = std::int64_t(gridDim.x) * kWarps;
  const std::int64_t trips = (tasks + slots - 1) / slots;
  const std::int64_t first_task = std::int64_t(warp) * gridDim.x + blockIdx.x;

  for (std::int64_t trip = 0; trip < trips; ++trip) {
    const std::int64_t task = first_task + trip * slots;
    const bool active = task < tasks;
    const std::int64_t row_unclamped = task * kWideRowsPerWarp + lane / order::kWideLanes;
    const std::int64_t row = row_unclamped < p.n ? row_unclamped : p.n - 1;  // read, never written
    const std::uint8_t* wrow = p.packed + row * row_bytes;
    const std::int64_t prow = row * groups;
    float total[V];
#pragma unroll
    for (int v = 0; v < V; ++v) total[v] = 0.0f;

    for (int tile = 0; tile < tiles; ++tile) {
      const std::int64_t group0 = std::int64_t(tile) * tile_groups;
      const int count = int(groups - group0 < tile_groups ? groups - group0 : tile_groups);
      // This lane's chunks of the tile; none for a warp without a task (it only stages).
      const int lane_groups = active && k_lane < count ? (count - k_lane + order::kWideLanes - 1) / order::kWideLanes : 0;
      const int lane_chunks = lane_groups << chunk_shift;
      // Chunk t of the lane, counted from the tile's start (its values start at chunk * 32 in xs).
      auto tile_chunk = [&](int t) { return ((k_lane + order::kWideLanes * (t >> chunk_shift)) << chunk_shift) + (t & ((1 << chunk_shift) - 1)); };
      std::uint32_t w[kWideDepth][BITS], sc[kWideDepth], bi[kWideDepth];
      auto load = [&](int t, std::uint32_t (&words)[BITS], std::uint32_t& s, std::uint32_t& b) {
        const int c = tile_chunk(t);
        const std::int64_t g = group0 + (c >> chunk_shift);
        load_chunk<BITS>(wrow + ((group0 << chunk_shift) + c) * (4 * BITS), words);
        s = load_param_bits<kRuntimeDtype>(p.scales, prow + g, p.dtype);
        b = load_param_bits<kRuntimeDtype>(p.biases, prow + g, p.dtype);
      };
      // The first DEPTH - 1 chunks go out before x is staged.
#pragma unroll
      for (int d = 0; d + 1 < kWideDepth; ++d)
        if (d < lane_chunks) load(d, w[d], sc[d], bi[d]);
      if (tiles > 1 || trip == 0) {
        __syncthreads();  // everyone is done with the previous tile
        stage_wide_activations<V>(shared_raw, p.tile_values, p.x, p.dtype, p.k, v0, group0 * p.group,
                                  int(count * std::int64_t(p.group)), group_shift);
        __syncthreads();
      }
      // One chunk: its four 8-code sub-chunks dequantized (s*q+b) and dotted with each vector, in
      // increasing order, each sub-chunk's dot added into the lane's R.
      auto compute = [&](int t, const std::uint32_t (&words)[BITS], std::uint32_t s_bits, std::uint32_t b_bits) {
        const float s = param_value<kRuntimeDtype>(s_bits, p.dtype), b = param_value<kRuntimeDtype>(b_bits, p.dtype);
        const int e0 = tile_chunk(t) * kChunkValues;
        // Piece-major layout: the chunk's piece 2 * sub + h is 8 * (2 * sub + h) units after its first.
        const float4* x0 = xs + (kWidePieceLayout<V> ? wide_piece(e0, group_shift) : 0);
        auto piece = [&](int v, int n) {  // piece n (of 8) of this chunk for vector v
          if constexpr (kWidePieceLayout<V>) return x0[v * (p.tile_values / 4) + order::kWideLanes * n];
          return *reinterpret_cast<const float4*>(reinterpret_cast<const float*>(xs) + v * p.tile_values +
                                                  swizzle(e0 + 4 * n, group_shift));
        };
        [&]<int... SUB>(std::integer_sequence<int, SUB...>) {
          (
              [&] {
                constexpr int sub = SUB;
                float wdq[order::kWideSubChunk];
                decode_codes<BITS, sub * order::kWideSubChunk, order::kWideSubChunk>(words, wdq);
#pragma unroll
                for (int i = 0; i < order::kWideSubChunk; ++i) wdq[i] = order::wide_dequant(s, wdq[i], b);
#pragma unroll
                for (int v = 0; v < V; ++v) {
                  const float4 lo = piece(v, 2 * sub), hi = piece(v, 2 * sub + 1);
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
      };
      // The ring, unrolled DEPTH times so that every buffer index is a compile-time constant:
      // chunk t + DEPTH - 1 is loaded into the buffer chunk t - 1 used, then chunk t is computed.
      for (int t = 0; t < lane_chunks; t += kWideDepth) {
#pragma unroll
        for (int d = 0; d < kWideDepth; ++d) {
          if (t + d < lane_chunks) {
            constexpr int ahead = kWideDepth - 1;
            const int next = (d + ahead) % kWideDepth;
            if (t + d + ahead < lane_chunks) load(t + d + ahead, w[next], sc[next], bi[next]);
            compute(t + d, w[d], sc[d], bi[d]);
          }
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
    if (active && k_lane == 0 && row_unclamped < p.n) {
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
  return resident_blocks<qmv_wide_kernel<BITS, V>>(kThreads, smem, kWideMaxShared);
}

template <int BITS, int V>
void launch_wide(const QuantizedMatrixView& w, const void* x, std::int64_t vector_offset, std::int64_t tiles, void* y,
                 std::int64_t m, cudaStream_t stream) {
  QmvParams p{w.packed.data(), w.scales.data(), w.biases.data(), x, y, w.n, w.k, 0, w.group,
              k_tile(w.k, V, 0.0, kWideTileBudget), w.dtype};
  const std::size_t smem = std::size_t(V) * p.tile_values * 4;
  const std::int64_t tasks = (w.n + kWideRowsPerWarp - 1) / kWideRowsPerWarp;
  const std::int64_t resident = std::int64_t(wide_blocks_per_sm<BITS, V>(smem)) * sm_count();
  // As many blocks as fit, each with at least one task (fewer tasks than resident warps spread
  // over every SM; the warps without one only stage).
  unsigned grid_x = unsigned(tasks < resident ? tasks : resident);
  // With several tiles of V vectors in one launch (M > 5) and fewer tasks than resident warps:
  // blocks of whole tasks, so that the tiles' blocks share the SMs at once, instead of each tile's
  // grid spreading over every SM with idle warps and the tiles running one after another.
  // Placement only: no bit changes. 17-20 % faster at M = 6-16 on 4096x14336 and 4096x3840
  // (M = 16: 205 -> 167 and 62 -> 51 us on an H100), unchanged on 17408x5120 and 28672x8192.
  if (tiles > 1) grid_x = unsigned(std::min<std::int64_t>(grid_x, ceil_div(tasks, kWarps)));
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

KernelResources qmv_wide_resources(int bits, int vectors) {
  KernelResources r;
  dispatch_wide_vectors(vectors, [&]<int V>() {
    dispatch_bits(bits, [&]<int BITS>() {
      cudaFuncAttributes a{};
      EXACTQ_CUDA_CHECK(cudaFuncGetAttributes(&a, qmv_wide_kernel<BITS, V>));
      r = {a.numRegs, int(a.localSizeBytes), a.maxThreadsPerBlock,
           wide_blocks_per_sm<BITS, V>(std::size_t(V) * k_tile(4096, V, 0.0, kWideTileBudget) * 4)};
    });
  });
  return r;
}

}  // namespace exactq::cuda_detail
