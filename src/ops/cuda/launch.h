// Host-side launchers of the CUDA kernels (one per kernel file), used by backend.cu's dispatch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "exactq/cuda.h"
#include "ops/cuda/qmv_params.cuh"

namespace exactq::cuda_detail {


// The largest V that qmv_streamed is instantiated for (QmvOptions::streamed_max_vectors is
// capped there).
inline constexpr int kMaxStreamedVectors = 8;

// Registers, spilled (local) bytes and occupancy of one kernel instantiation, as the compiler
// left them (the benchmark reports them: the cause of a kernel's cap, not just its symptom).
struct KernelResources {
  int registers = 0;
  int local_bytes = 0;
  int max_threads_per_block = 0;
  int blocks_per_sm = 0;  // at the launch configuration used
};


// qmv: one grid row per vector, V = 1 (qmv.cu). vector_offset/m select the vectors launched.
void launch_qmv(const QuantizedMatrixView& w, const void* x, std::int64_t vector_offset, std::int64_t m, void* y,
                const QmvOptions& options, cudaStream_t stream);
// qmv with the norm before it in its staging (Backend::norm_qmv): x = h (+ delta), written to
// h_out where given, then normalized; `fused` holds the norm's and the epilogue's fields of
// QmvParams (its last ones). False, having launched nothing, where no kernel is instantiated for
// the matrix (bits, dtype), K, the buffers' alignment or the epilogue's shape.
bool launch_qmv_norm(const QuantizedMatrixView& w, const void* h, const QmvParams& fused, std::int64_t m, void* y,
                     const QmvOptions& options, cudaStream_t stream);
// qmv_streamed: tiles of up to max_vectors vectors, each tile one pass over the weights (qmv_streamed.cu).
void launch_qmv_streamed(const QuantizedMatrixView& w, const void* x, std::int64_t m, void* y,
                         const QmvOptions& options, cudaStream_t stream);
// qmv_wide: MLX's tiles of at most 5 vectors (qmv_wide.cu).
void launch_qmv_wide(const QuantizedMatrixView& w, const void* x, std::int64_t m, void* y, cudaStream_t stream);

// qmv_mma: passes of 16 vectors through one tensor-core schedule (qmv_mma.cu).
// Always a plain launch: as a programmatic dependent launch it measured 15-45 % slower on shapes below
// 60 MB, so QmvOptions::overlap_launch is ignored.
void launch_qmv_mma(const QuantizedMatrixView& w, const void* x, std::int64_t m, void* y, cudaStream_t stream);
// The same for a matrix in the fragment layout (qmv_mma_fragments.cu); launch_qmv_mma forwards.
void launch_qmv_mma_fragments(const QuantizedMatrixView& w, const void* x, std::int64_t m, void* y,
                              cudaStream_t stream);

KernelResources qmv_resources(int bits);
KernelResources qmv_mma_resources(int bits, int vectors);  // the MLX-layout kernel
KernelResources qmv_mma_fragments_resources(int bits, int vectors);
KernelResources qmv_streamed_resources(int bits, int vectors);
KernelResources qmv_wide_resources(int bits, int vectors);

int sm_count();
// The device's shared memory in bytes: per SM, the most one block may opt in to, and what the
// system reserves of an SM's share for each resident block.
struct SharedMemoryLimits {
  int per_sm = 0, per_block = 0, reserved_per_block = 0;
};
SharedMemoryLimits shared_memory_limits();

}  // namespace exactq::cuda_detail
