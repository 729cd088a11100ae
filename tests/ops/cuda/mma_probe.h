// Host entry of the mma column-independence probe (mma_probe.cu). All pointers are device memory.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace exactq::test {
// d[16][8] = A[16][k] * B[k][8] by k/16 mma.sync.m16n8k16 steps (bf16 or f16 operands, f32
// accumulation). a is row-major [16][k]; b is stored by column, [8][k].
cudaError_t run_mma_probe(bool bf16, const std::uint16_t* a, const std::uint16_t* b, int k, float* d);
}  // namespace exactq::test
