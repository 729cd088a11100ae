// A probe of the one hardware property qmv_mma will stand on (docs/design.md §5b): an output
// column of mma.sync.m16n8k16 depends only on its own column of B. One warp accumulates a
// 16 x K by K x 8 product over K/16 mma steps; the caller compares column 0 bit for bit while
// the other columns of B change. Built for bf16 and f16 operands with f32 accumulation.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "mma_probe.h"

namespace exactq::test {
namespace {

// a: A row-major [16][k] (16-bit values), b: B stored by column [8][k], d: [16][8] f32.
template <bool BF16>
__global__ void mma_probe_kernel(const std::uint16_t* a, const std::uint16_t* b, int k, float* d) {
  const int lane = threadIdx.x, group = lane >> 2, tig = lane & 3;
  float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  auto pack = [](std::uint16_t lo, std::uint16_t hi) { return std::uint32_t(lo) | (std::uint32_t(hi) << 16); };
  for (int k0 = 0; k0 < k; k0 += 16) {
    const std::uint16_t* a0 = a + group * k + k0;
    const std::uint16_t* a8 = a + (group + 8) * k + k0;
    const std::uint32_t ra0 = pack(a0[2 * tig], a0[2 * tig + 1]);
    const std::uint32_t ra1 = pack(a8[2 * tig], a8[2 * tig + 1]);
    const std::uint32_t ra2 = pack(a0[2 * tig + 8], a0[2 * tig + 9]);
    const std::uint32_t ra3 = pack(a8[2 * tig + 8], a8[2 * tig + 9]);
    const std::uint16_t* bc = b + group * k + k0;  // column n = group
    const std::uint32_t rb0 = pack(bc[2 * tig], bc[2 * tig + 1]);
    const std::uint32_t rb1 = pack(bc[2 * tig + 8], bc[2 * tig + 9]);
    if constexpr (BF16) {
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
          "{%0,%1,%2,%3};\n"
          : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
          : "r"(ra0), "r"(ra1), "r"(ra2), "r"(ra3), "r"(rb0), "r"(rb1));
    } else {
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
          "{%0,%1,%2,%3};\n"
          : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
          : "r"(ra0), "r"(ra1), "r"(ra2), "r"(ra3), "r"(rb0), "r"(rb1));
    }
  }
  d[group * 8 + 2 * tig] = c[0];
  d[group * 8 + 2 * tig + 1] = c[1];
  d[(group + 8) * 8 + 2 * tig] = c[2];
  d[(group + 8) * 8 + 2 * tig + 1] = c[3];
}

}  // namespace

cudaError_t run_mma_probe(bool bf16, const std::uint16_t* a, const std::uint16_t* b, int k, float* d) {
  if (bf16)
    mma_probe_kernel<true><<<1, 32>>>(a, b, k, d);
  else
    mma_probe_kernel<false><<<1, 32>>>(a, b, k, d);
  const cudaError_t launch = cudaGetLastError();
  return launch != cudaSuccess ? launch : cudaDeviceSynchronize();
}

}  // namespace exactq::test
