// The CUDA backend's public entry points: device queries, qmv dispatch, device buffers, timing.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "cuda/common.cuh"
#include "cuda/launch.h"
#include "exactq/cuda.h"

namespace exactq::cuda_detail {

int sm_count() {
  static const int count = [] {
    int device = 0, sms = 0;
    EXACTQ_CUDA_CHECK(cudaGetDevice(&device));
    EXACTQ_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return sms;
  }();
  return count;
}

SharedMemoryLimits shared_memory_limits() {
  static const SharedMemoryLimits limits = [] {
    int device = 0;
    SharedMemoryLimits l;
    EXACTQ_CUDA_CHECK(cudaGetDevice(&device));
    EXACTQ_CUDA_CHECK(cudaDeviceGetAttribute(&l.per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
    EXACTQ_CUDA_CHECK(cudaDeviceGetAttribute(&l.per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    EXACTQ_CUDA_CHECK(cudaDeviceGetAttribute(&l.reserved_per_block, cudaDevAttrReservedSharedMemoryPerBlock, device));
    return l;
  }();
  return limits;
}

}  // namespace exactq::cuda_detail

namespace exactq::cuda {

using namespace exactq::cuda_detail;

bool device_available() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return false;
  }
  return count > 0;
}

std::string device_description() {
  int device = 0;
  cudaDeviceProp prop{};
  EXACTQ_CUDA_CHECK(cudaGetDevice(&device));
  EXACTQ_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return std::string(prop.name) + ", " + std::to_string(prop.multiProcessorCount) + " SMs, " +
         std::to_string(prop.l2CacheSize >> 20) + " MB L2, sm_" + std::to_string(prop.major) +
         std::to_string(prop.minor);
}

int multiprocessor_count() { return sm_count(); }

namespace {
// The kernels load weights and activations in 16-byte vectors and parameters and outputs as
// elements; a pointer that breaks that would fault on the device, so it is refused here.
void require_aligned(const void* p, std::size_t alignment, const char* what) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  if (address % alignment != 0) {
    char hex[32];
    std::snprintf(hex, sizeof hex, "%#llx", static_cast<unsigned long long>(address));
    throw std::invalid_argument(std::string("[exactq] ") + what + " at " + hex + " is not " +
                                std::to_string(alignment) + "-byte aligned (the CUDA kernels need it)");
  }
}
}  // namespace

void qmv(Kernel kernel, const QuantizedMatrixView& w, std::span<const std::byte> x, std::int64_t m,
         std::span<std::byte> y, const QmvOptions& options, void* stream) {
  validate_qmv_args(kernel, w, x, m, y);
  require_aligned(w.packed.data(), 16, "packed weights");
  require_aligned(x.data(), 16, "activations");
  require_aligned(w.scales.data(), dtype_size(w.dtype), "scales");
  require_aligned(w.biases.data(), dtype_size(w.dtype), "biases");
  require_aligned(y.data(), dtype_size(w.dtype), "output");
  if (options.streamed_max_vectors < 1)
    throw std::invalid_argument("[exactq] streamed_max_vectors = " + std::to_string(options.streamed_max_vectors) +
                                " must be at least 1");
  if (options.qmv_l2_prefetch_rounds < -1 || options.qmv_l2_prefetch_rounds > 64)
    throw std::invalid_argument("[exactq] qmv_l2_prefetch_rounds = " + std::to_string(options.qmv_l2_prefetch_rounds) +
                                " must be in [-1, 64]");
  if (options.qmv_split_last_trip < -1 || options.qmv_split_last_trip > 1)
    throw std::invalid_argument("[exactq] qmv_split_last_trip = " + std::to_string(options.qmv_split_last_trip) +
                                " must be -1, 0 or 1");
  const auto s = static_cast<cudaStream_t>(stream);
  switch (kernel) {
    case Kernel::qmv: launch_qmv(w, x.data(), 0, m, y.data(), options, s); break;
    case Kernel::qmv_streamed: launch_qmv_streamed(w, x.data(), m, y.data(), options, s); break;
    case Kernel::qmv_wide: launch_qmv_wide(w, x.data(), m, y.data(), s); break;
    case Kernel::qmv_mma: launch_qmv_mma(w, x.data(), m, y.data(), s); break;
  }
}

KernelResources kernel_resources(Kernel kernel, int bits, int vectors) {
  switch (kernel) {
    case Kernel::qmv: return qmv_resources(bits);
    case Kernel::qmv_streamed: return qmv_streamed_resources(bits, vectors);
    case Kernel::qmv_mma: return qmv_mma_fragments_resources(bits, vectors);  // the bench's default layout
    default: return qmv_wide_resources(bits, vectors);
  }
}

// ---- device memory ---------------------------------------------------------------------------
DeviceBuffer::DeviceBuffer(std::size_t bytes) : size_(bytes) {
  if (bytes > 0) EXACTQ_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), bytes));
}
DeviceBuffer::~DeviceBuffer() {
  if (data_) cudaFree(data_);
}
DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : data_(o.data_), size_(o.size_) {
  o.data_ = nullptr;
  o.size_ = 0;
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  std::swap(data_, o.data_);
  std::swap(size_, o.size_);
  return *this;
}
void DeviceBuffer::upload(std::span<const std::byte> host) {
  if (host.size() != size_)
    throw std::invalid_argument("[exactq] upload of " + std::to_string(host.size()) + " bytes into a buffer of " +
                                std::to_string(size_));
  if (size_) EXACTQ_CUDA_CHECK(cudaMemcpy(data_, host.data(), size_, cudaMemcpyHostToDevice));
}
void DeviceBuffer::download(std::span<std::byte> host) const {
  if (host.size() != size_)
    throw std::invalid_argument("[exactq] download of a buffer of " + std::to_string(size_) + " bytes into " +
                                std::to_string(host.size()));
  if (size_) EXACTQ_CUDA_CHECK(cudaMemcpy(host.data(), data_, size_, cudaMemcpyDeviceToHost));
}
void DeviceBuffer::fill(std::uint8_t value) {
  if (size_) EXACTQ_CUDA_CHECK(cudaMemset(data_, value, size_));
}

DeviceMatrix DeviceMatrix::upload(const QuantizedMatrix& host) {
  host.view().validate();
  DeviceMatrix d;
  d.packed = DeviceBuffer(host.packed.size());
  d.scales = DeviceBuffer(host.scales.size());
  d.biases = DeviceBuffer(host.biases.size());
  d.packed.upload(std::as_bytes(std::span(host.packed)));
  d.scales.upload(host.scales);
  d.biases.upload(host.biases);
  const auto packed = d.packed.bytes();
  d.view = {std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(packed.data()), packed.size()),
            d.scales.bytes(), d.biases.bytes(), host.n, host.k, host.bits, host.group, host.dtype, host.layout};
  return d;
}

// ---- timing ----------------------------------------------------------------------------------
double time_qmv_us(Kernel kernel, std::span<const QuantizedMatrixView> weights, std::span<const std::byte> x,
                   std::int64_t m, std::span<std::byte> y, const QmvOptions& options, int repeats) {
  if (weights.empty()) throw std::invalid_argument("[exactq] time_qmv_us: no weights");
  if (repeats < 1) throw std::invalid_argument("[exactq] time_qmv_us: repeats = " + std::to_string(repeats));
  // Each graph replay runs `launches` kernels cycling through the weight copies, so a copy is
  // evicted from L2 before it comes round again.
  const int launches = int(std::max<std::size_t>(weights.size(), 8));
  return cuda_detail::median_replay_us(launches, repeats, [&](cudaStream_t stream, int i) {
    qmv(kernel, weights[std::size_t(i) % weights.size()], x, m, y, options, stream);
  });
}

}  // namespace exactq::cuda
