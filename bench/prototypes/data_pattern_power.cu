// A measurement prototype, not part of the library (session 26; built by
// `scripts/build_prototype.sh data_pattern_power`): does the VALUE of the bytes read decide the
// power, and through the 700 W cap the speed, of qmv at M = 1 and of the read ceiling on the H200?
//
// Why: the same-run read ceiling (src/cuda/read_ceiling.cu) reads buffers filled with one byte
// (0x5a), and draws about 430 W; qmv reads random codes (the bench's weights) and sits at the
// 700 W cap with the SM clock at 1290-1965 MHz (session 26, held runs). Each bit that toggles on
// the memory interface and the on-chip wires costs energy, and a constant buffer toggles none.
// If a read of random bytes draws far more than a read of constant ones, part of qmv's excess
// power is its data, not its instructions, and the ceiling is measured on easier data than the
// kernels it judges.
//
// Each phase runs ~3 s of back-to-back launches rotating over three copies, timed by CUDA events
// per batch of launches; it prints the median µs per launch over the first 0.3 s after warm-up
// ("fresh") and over the last second ("held"), and writes its start and end to the marks file
// (the clock sampler of scripts/gpu_logs.sh logs power and clocks beside it).
//
// Phases per shape: the streaming read (as read_ceiling.cu) of constant and of random bytes;
// qmv at M = 1 (the library's, 4-bit g64 bf16) on random codes and on constant codes (0x5a: codes
// 10 and 5), with the same random group parameters and activations.
#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <algorithm>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "exactq/cuda.h"
#include "exactq/dtype.h"
#include "library_prototype.h"
#include "prototype_common.cuh"

namespace {

const char* marks_path = "marks.txt";

void mark(const std::string& label) {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const int ms = int(std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char stamp[64];
  std::strftime(stamp, sizeof stamp, "%Y/%m/%d %H:%M:%S", &tm);
  if (FILE* f = std::fopen(marks_path, "a")) {
    std::fprintf(f, "%s.%03d %s\n", stamp, ms, label.c_str());
    std::fclose(f);
  }
}

// splitmix64 of the 8-byte index: random bytes, the same on every run.
__global__ void fill_random(std::uint64_t* data, std::size_t words, std::uint64_t seed) {
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += std::size_t(gridDim.x) * blockDim.x) {
    std::uint64_t z = (i + seed) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    data[i] = z ^ (z >> 31);
  }
}

void fill(std::byte* p, std::size_t bytes, bool random, std::uint64_t seed) {
  if (random) {
    fill_random<<<1024, 256>>>(reinterpret_cast<std::uint64_t*>(p), bytes / 8, seed);
    PROTOTYPE_CHECK(cudaGetLastError());
  } else {
    PROTOTYPE_CHECK(cudaMemset(p, 0x5a, bytes));
  }
  PROTOTYPE_CHECK(cudaDeviceSynchronize());
}

struct Timing {
  double fresh_us, held_us;
};

// Back-to-back launches for `seconds`, events around each batch of `batch` launches.
Timing run_phase(const std::string& name, double seconds, int batch, const std::function<void(int)>& launch) {
  cudaEvent_t a, b;
  PROTOTYPE_CHECK(cudaEventCreate(&a));
  PROTOTYPE_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3 * batch; ++i) launch(i);  // warm-up
  PROTOTYPE_CHECK(cudaDeviceSynchronize());
  mark(name + " start");
  std::vector<std::pair<double, double>> samples;  // (seconds since start, µs per launch)
  const auto t0 = std::chrono::steady_clock::now();
  int i = 0;
  for (;;) {
    PROTOTYPE_CHECK(cudaEventRecord(a));
    for (int j = 0; j < batch; ++j) launch(i++);
    PROTOTYPE_CHECK(cudaEventRecord(b));
    PROTOTYPE_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    PROTOTYPE_CHECK(cudaEventElapsedTime(&ms, a, b));
    const double at = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    samples.emplace_back(at, 1000.0 * ms / batch);
    if (at > seconds) break;
  }
  mark(name + " end");
  PROTOTYPE_CHECK(cudaGetLastError());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  auto median = [&](double from, double to) {
    std::vector<double> v;
    for (const auto& [at, us] : samples)
      if (at >= from && at < to) v.push_back(us);
    if (v.empty()) return std::nan("");
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  return {median(0, 0.3), median(seconds - 1.0, 1e9)};
}

void report(const char* what, const Timing& t, double bytes, double ceiling_us) {
  std::printf("  %-34s fresh %8.1f us (%6.1f GB/s)  held %8.1f us (%6.1f GB/s, %5.1f %% of the constant read, fresh)\n", what,
              t.fresh_us, bytes / t.fresh_us * 1e-3, t.held_us, bytes / t.held_us * 1e-3, 100.0 * ceiling_us / t.held_us);
}

void run_shape(std::int64_t n, std::int64_t k, double seconds) {
  constexpr int kBits = 4, kGroup = 64, kCopies = 3;
  const std::size_t packed_bytes = std::size_t(n * k * kBits / 8);
  const std::size_t params = std::size_t(n * (k / kGroup));
  const double bytes = double(packed_bytes) + 4.0 * double(params) + 2.0 * double(k) + 2.0 * double(n);
  std::printf("%lld x %lld, 4-bit g64 bf16: %.1f MB per launch, %d copies\n", (long long)n, (long long)k, bytes / 1e6, kCopies);

  // The read, over the same bytes a qmv launch moves.
  const std::size_t read_bytes = std::size_t(bytes) / 16 * 16;
  std::vector<exactq::cuda::DeviceBuffer> reads;
  for (int c = 0; c < kCopies; ++c) reads.emplace_back(read_bytes);
  unsigned* sink = nullptr;
  PROTOTYPE_CHECK(cudaMalloc(&sink, 4));
  int per_sm = 0;
  PROTOTYPE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, stream_kernel<4>, 512, 0));
  const int grid = per_sm * prototype_sm_count();
  auto read_launch = [&](int i) {
    stream_kernel<4><<<grid, 512>>>(reinterpret_cast<const uint4*>(reads[std::size_t(i % kCopies)].bytes().data()), read_bytes / 16, sink);
  };
  const int read_batch = 20;
  for (int c = 0; c < kCopies; ++c) fill(reads[std::size_t(c)].bytes().data(), read_bytes, false, 0);
  const Timing read_constant = run_phase("read constant " + std::to_string(n), seconds, read_batch, read_launch);
  for (int c = 0; c < kCopies; ++c) fill(reads[std::size_t(c)].bytes().data(), read_bytes, true, 1000 + c);
  const Timing read_random = run_phase("read random " + std::to_string(n), seconds, read_batch, read_launch);
  reads.clear();

  // qmv's operands: random group parameters as the bench's (a group spanning about [-r, r]),
  // random bf16 activations in [-1, 1], the codes random or constant.
  std::mt19937_64 rng(n * 31 + k);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<std::uint16_t> scales(params), biases(params), x(static_cast<std::size_t>(k));
  random_group_parameters(rng, scales, biases);
  for (auto& v : x) v = exactq::f32_to_bf16(unit(rng));
  std::vector<exactq::cuda::DeviceBuffer> packed, sc, bi;
  std::vector<exactq::QuantizedMatrixView> views;
  for (int c = 0; c < kCopies; ++c) {
    packed.emplace_back(packed_bytes);
    sc.emplace_back(params * 2);
    bi.emplace_back(params * 2);
    sc.back().upload(std::as_bytes(std::span(scales)));
    bi.back().upload(std::as_bytes(std::span(biases)));
  }
  for (int c = 0; c < kCopies; ++c) {
    exactq::QuantizedMatrixView v;
    v.packed = {reinterpret_cast<const std::uint8_t*>(packed[std::size_t(c)].bytes().data()), packed_bytes};
    v.scales = sc[std::size_t(c)].bytes();
    v.biases = bi[std::size_t(c)].bytes();
    v.n = n, v.k = k, v.bits = kBits, v.group = kGroup, v.dtype = exactq::DType::bf16;
    views.push_back(v);
  }
  exactq::cuda::DeviceBuffer dx(std::size_t(k) * 2), dy(std::size_t(n) * 2);
  dx.upload(std::as_bytes(std::span(x)));
  auto qmv_launch = [&](int i) {
    exactq::cuda::qmv(exactq::Kernel::qmv, views[std::size_t(i % kCopies)], dx.bytes(), 1, dy.bytes());
  };
  const int qmv_batch = 20;
  for (int c = 0; c < kCopies; ++c) fill(packed[std::size_t(c)].bytes().data(), packed_bytes, true, 2000 + c);
  const Timing qmv_random = run_phase("qmv random " + std::to_string(n), seconds, qmv_batch, qmv_launch);
  for (int c = 0; c < kCopies; ++c) fill(packed[std::size_t(c)].bytes().data(), packed_bytes, false, 0);
  const Timing qmv_constant = run_phase("qmv constant " + std::to_string(n), seconds, qmv_batch, qmv_launch);

  const double ceiling = read_constant.fresh_us;
  report("read, constant bytes (0x5a)", read_constant, bytes, ceiling);
  report("read, random bytes", read_random, bytes, ceiling);
  report("qmv M=1, random codes", qmv_random, bytes, ceiling);
  report("qmv M=1, constant codes (0x5a)", qmv_constant, bytes, ceiling);
  std::printf("  qmv held / random read held: %.1f %%\n", 100.0 * read_random.held_us / qmv_random.held_us);
  cudaFree(sink);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) marks_path = argv[1];
  const double seconds = argc > 2 ? std::atof(argv[2]) : 3.0;
  std::printf("%s\n", exactq::cuda::device_description().c_str());
  run_shape(128256, 4096, seconds);  // Llama-3-8B's head
  run_shape(28672, 8192, seconds);
  run_shape(262144, 3840, seconds);  // Gemma's head
  return 0;
}
