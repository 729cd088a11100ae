// CUDA timing for the benchmark (bench/cuda_timing.cu). Device memory in, medians out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "exactq/format.h"
#include "exactq/qmv.h"
#include "timer.h"

namespace exactq::bench {

// The current device's L2 in bytes.
double l2_bytes();
// Median microseconds of one launch: launches are captured into a CUDA graph that rotates through
// `weights` (device matrices; timing_copies of them), replayed after warm-up.
double time_qmv_us(Kernel kernel, std::span<const QuantizedMatrixView> weights, std::span<const std::byte> x,
                   std::int64_t m, std::span<std::byte> y, const QmvOptions& options, int repeats);
// Bytes per second of a streaming read of `bytes` by a kernel of our own: the same-run ceiling.
double read_bandwidth(std::size_t bytes, int repeats);
// Median microseconds of that streaming read over exactly `bytes`, timed as time_qmv_us times a
// kernel (graph replay, rotating copies out of L2, optionally as programmatic dependent launches):
// what a kernel that only had to read a matrix of this size could reach, start-up and tail included.
double time_read_us(std::size_t bytes, int repeats, bool overlap_launch);
// Every kernel instantiation's resources at these bits.
std::vector<KernelResources> kernel_resources(int bits);

}  // namespace exactq::bench
