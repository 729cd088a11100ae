// Row staging for the decoder's row ops: a row of stored values (bf16, f16 or f32) widened into
// f32 in shared memory by every thread of a block, 16 bytes a load where the row allows it, and
// rows of f32 results rounded back to the stored type the same way. Widening is exact and the
// rounding is store_f32's, so staging changes no value: it only decides how the bytes travel.
#pragma once

#include <cstddef>
#include <cstdint>

#include "exactq/dtype.h"

namespace exactq::cuda_detail {

template <DType T>
inline constexpr int kPerVector = int(16 / dtype_size(T));  // values in one 16-byte load

// Whether rows of `h` values of T starting at `base` can move in 16-byte vectors.
template <DType T>
__host__ __device__ inline bool rows_vectorizable(const void* base, std::int64_t h) {
  return reinterpret_cast<std::uintptr_t>(base) % 16 == 0 && (h * std::int64_t(dtype_size(T))) % 16 == 0;
}

// out[i] = load_f32(row, i) for i < h, by the block's threads (no barrier here).
template <DType T>
__device__ __forceinline__ void stage_row(const void* row, std::int64_t h, bool vectors, float* out) {
  if (vectors) {
    const auto* v = static_cast<const uint4*>(row);
    for (std::int64_t j = threadIdx.x; j < h / kPerVector<T>; j += blockDim.x) {
      const uint4 raw = v[j];
#pragma unroll
      for (int u = 0; u < kPerVector<T>; ++u) out[j * kPerVector<T> + u] = load_f32(&raw, std::size_t(u), T);
    }
  } else {
    for (std::int64_t i = threadIdx.x; i < h; i += blockDim.x) out[i] = load_f32(row, std::size_t(i), T);
  }
}

// row[i] = f(i) rounded to T for i < h, by the block's threads; f(i) may read element i alone of
// whatever row it likes (it is called once per i).
template <DType T, typename F>
__device__ __forceinline__ void write_row(void* row, std::int64_t h, bool vectors, F&& f) {
  if (vectors) {
    auto* v = static_cast<uint4*>(row);
    for (std::int64_t j = threadIdx.x; j < h / kPerVector<T>; j += blockDim.x) {
      uint4 raw;
#pragma unroll
      for (int u = 0; u < kPerVector<T>; ++u) store_f32(&raw, std::size_t(u), T, f(j * kPerVector<T> + u));
      v[j] = raw;
    }
  } else {
    for (std::int64_t i = threadIdx.x; i < h; i += blockDim.x) store_f32(row, std::size_t(i), T, f(i));
  }
}

}  // namespace exactq::cuda_detail
