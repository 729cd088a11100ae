// Quantized mat-vec: y[m, :] = W x[m, :] for a block of M activation vectors.
//
// Three kernels, each a fixed floating-point operation order written down in docs/design.md:
//   qmv           the M=1 reference order (MLX qmv's structure); at M>1 each vector runs alone.
//   qmv_streamed  qmv's order, each decoded weight chunk reused across up to V vectors:
//                 bit-identical to qmv for every vector at every M.
//   qmv_wide      MLX qmv_wide's structure, another order: the inexact arm (negative control).
//   qmv_mma       one tensor-core schedule for every M (bf16/f16; every width on CUDA): its
//                 own order, bit-identical for every vector at every M, but not qmv's bits.
//                 The CPU side is a reference checked with a tolerance, not a mirror.
// Activations, scales, biases and outputs share the matrix's dtype. x is row-major [M, K],
// y row-major [M, N].
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "exactq/format.h"

namespace exactq {

enum class Kernel { qmv, qmv_streamed, qmv_wide, qmv_mma };

std::string_view to_string(Kernel kernel);
// Throws std::invalid_argument naming the text.
Kernel parse_kernel(std::string_view text);
// Whether the kernel keeps qmv's order (the exact family).
constexpr bool is_exact_family(Kernel kernel) { return kernel == Kernel::qmv || kernel == Kernel::qmv_streamed; }
// Whether each vector's bytes are promised to be the same at every M (its own chain), whatever
// the order: the exact family and qmv_mma.
constexpr bool is_width_invariant(Kernel kernel) { return is_exact_family(kernel) || kernel == Kernel::qmv_mma; }

// The most CPU worker threads a caller may ask for (QmvOptions::threads): far above any CPU's
// hardware threads, low enough that asking cannot exhaust the process's thread limit.
inline constexpr int kMaxThreads = 1024;

struct QmvOptions {
  // qmv_streamed: at most this many vectors share one pass over the weights (tiles of V).
  // Numerically irrelevant; a speed knob.
  int streamed_max_vectors = 8;
  // CPU: worker threads (0 = all hardware threads; at most kMaxThreads). Numerically irrelevant.
  int threads = 0;
  // CUDA, qmv and qmv_streamed: launch as a programmatic dependent launch, so a launch can start
  // while the kernel before it on the stream finishes (about 1-1.5 us less per launch on the H200).
  // It then reads its weights before that kernel's writes are visible (x and y only after): the
  // weights must not be written by the kernel just before it on the stream. qmv_mma and qmv_wide
  // ignore it (qmv_mma measured slower so). Numerically irrelevant.
  bool overlap_launch = false;
};

// Throws std::invalid_argument naming the value where `kernel` is not one of the enumerators.
void validate_kernel(Kernel kernel);
// Throws std::invalid_argument naming the bad value (streamed_max_vectors < 1, threads out of range).
void validate_options(const QmvOptions& options);
// Throws std::invalid_argument naming the bad value when the kernel is not a Kernel, the matrix, M, or a buffer size is off,
// or when the matrix's layout is not one the kernel reads (only qmv_mma reads the fragment layout).
void validate_qmv_args(Kernel kernel, const QuantizedMatrixView& w, std::span<const std::byte> x, std::int64_t m,
                       std::span<const std::byte> y);

namespace cpu {
// The CPU mirror: the exact operation order of docs/design.md, with lanes simulated.
void qmv(Kernel kernel, const QuantizedMatrixView& w, std::span<const std::byte> x, std::int64_t m,
         std::span<std::byte> y, const QmvOptions& options = {});

// The instruction set that the CPU's qmv and qmv_streamed run on, and the CPU attention and gated
// MLP (silu) with them. Every level computes each chunk's exact integer sum its own way and keeps
// every f32 step of the order as it is, so no output byte depends on the choice: it is a speed
// choice only. avx2 needs AVX2, FMA, F16C and
// BMI2; avx512 needs AVX-512 F, BW, VL, DQ and VNNI, and BMI2.
enum class Isa { scalar, avx2, avx512 };
std::string_view to_string(Isa isa);
// Throws std::invalid_argument naming the text.
Isa parse_isa(std::string_view text);
// Whether this CPU (and its operating system) can run the level. scalar always.
bool isa_available(Isa isa);
// The level in use: the environment variable EXACTQ_CPU_ISA (scalar, avx2 or avx512) where set,
// else the best one available. Throws std::invalid_argument naming the value when EXACTQ_CPU_ISA
// is unknown or names a level this CPU lacks.
Isa qmv_isa();
// Forces the level for the whole process (tests). Throws std::invalid_argument naming the level
// when this CPU lacks it.
void set_qmv_isa(Isa isa);
}  // namespace cpu

}  // namespace exactq
