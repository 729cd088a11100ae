// The CUDA backend: device queries, the cuda::qmv entry point that dispatches to each kernel's
// file, device memory, and the Backend interface over them.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "ops/cuda/common.cuh"
#include "ops/cuda/decoder_ops.h"
#include "ops/cuda/launch.h"
#include "ops/decoder_checks.h"
#include "exactq/backend.h"
#include "exactq/cuda.h"
#include "exactq/mma_layout.h"

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
  validate_options(options);
  const auto s = static_cast<cudaStream_t>(stream);
  switch (kernel) {
    case Kernel::qmv: launch_qmv(w, x.data(), 0, m, y.data(), options, s); break;
    case Kernel::qmv_streamed: launch_qmv_streamed(w, x.data(), m, y.data(), options, s); break;
    case Kernel::qmv_wide: launch_qmv_wide(w, x.data(), m, y.data(), s); break;
    case Kernel::qmv_mma: launch_qmv_mma(w, x.data(), m, y.data(), s); break;
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
  if (size_) {
    EXACTQ_CUDA_CHECK(cudaMemcpy(data_, host.data(), size_, cudaMemcpyHostToDevice));
    // From pageable memory cudaMemcpy may return before the bytes reach the device, ordered only
    // on the legacy stream; kernels on a non-blocking stream (the backend's) must find them there.
    EXACTQ_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
  }
}
void DeviceBuffer::download(std::span<std::byte> host) const {
  if (host.size() != size_)
    throw std::invalid_argument("[exactq] download of a buffer of " + std::to_string(size_) + " bytes into " +
                                std::to_string(host.size()));
  if (size_) EXACTQ_CUDA_CHECK(cudaMemcpy(host.data(), data_, size_, cudaMemcpyDeviceToHost));
}
void DeviceBuffer::fill(std::uint8_t value) {
  if (size_) {
    EXACTQ_CUDA_CHECK(cudaMemset(data_, value, size_));
    EXACTQ_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));  // as upload: asynchronous to the host
  }
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

}  // namespace exactq::cuda

namespace exactq {

namespace {

// Device memory of its own, or a view of another buffer's (Backend::view).
class CudaBuffer final : public Buffer {
 public:
  explicit CudaBuffer(std::size_t bytes) : memory_(bytes), bytes_(memory_.bytes()) {}
  explicit CudaBuffer(std::span<std::byte> view) : bytes_(view) {}
  std::span<std::byte> bytes() override { return bytes_; }
  std::span<const std::byte> bytes() const override { return bytes_; }

 private:
  cuda::DeviceBuffer memory_;
  std::span<std::byte> bytes_;
};

// The matrix in MLX's layout and, where qmv_mma reads the fragment layout, a second copy in it
// (converted once on the host at load time).
class CudaMatrix final : public Matrix {
 public:
  CudaMatrix(const QuantizedMatrixView& w, WeightLayout mma_layout) {
    w.validate();
    if (w.layout == WeightLayout::mma_fragments) {
      fragments_ = cuda::DeviceMatrix::upload(copy_of(w));
      mlx_ = cuda::DeviceMatrix::upload(to_mlx_layout(w));
    } else {
      mlx_ = cuda::DeviceMatrix::upload(copy_of(w));
      if (mma_layout == WeightLayout::mma_fragments && mma_layout::fits(w.bits, w.group, w.k))
        fragments_ = cuda::DeviceMatrix::upload(to_mma_fragments(w));
    }
  }
  const QuantizedMatrixView& view() const override { return mlx_.view; }
  const QuantizedMatrixView& view_for(Kernel kernel) const {
    return kernel == Kernel::qmv_mma && fragments_.packed.size() > 0 ? fragments_.view : mlx_.view;
  }

 private:
  static QuantizedMatrix copy_of(const QuantizedMatrixView& w) {
    QuantizedMatrix m;
    m.n = w.n, m.k = w.k, m.bits = w.bits, m.group = w.group, m.dtype = w.dtype, m.layout = w.layout;
    m.packed.assign(w.packed.begin(), w.packed.end());
    m.scales.assign(w.scales.begin(), w.scales.end());
    m.biases.assign(w.biases.begin(), w.biases.end());
    return m;
  }
  cuda::DeviceMatrix mlx_, fragments_;
};

template <typename Own, typename Base>
Own& own(Base& b, const char* what) {
  auto* p = dynamic_cast<Own*>(&b);
  if (p == nullptr) throw std::invalid_argument(std::string("[exactq] the cuda backend was given another backend's ") + what);
  return *p;
}

class CudaDenseMatrix final : public DenseMatrix {
 public:
  CudaDenseMatrix(DType t, std::int64_t n, std::int64_t k, std::span<const std::byte> weight)
      : memory_(weight.size()), n_(n), k_(k), dtype_(t) {
    memory_.upload(weight);
  }
  std::int64_t n() const override { return n_; }
  std::int64_t k() const override { return k_; }
  DType dtype() const override { return dtype_; }
  const std::byte* data() const { return memory_.bytes().data(); }

 private:
  cuda::DeviceBuffer memory_;
  std::int64_t n_, k_;
  DType dtype_;
};

const CudaBuffer& buffer(const Buffer& b) { return own<const CudaBuffer>(b, "buffer"); }
CudaBuffer& buffer(Buffer& b) { return own<CudaBuffer>(b, "buffer"); }
const std::byte* data(const Buffer& b) { return buffer(b).bytes().data(); }
std::byte* data(Buffer& b) { return buffer(b).bytes().data(); }
const std::int32_t* int32s(const Buffer& b) { return reinterpret_cast<const std::int32_t*>(data(b)); }

// A CUDA graph of captured ops, with the backend's workspace generation at capture: a workspace
// that grew since was freed, and the graph would read it.
class CudaGraph final : public Graph {
 public:
  CudaGraph(cudaGraphExec_t exec, std::uint64_t generation) : exec(exec), generation(generation) {}
  ~CudaGraph() override { cudaGraphExecDestroy(exec); }
  cudaGraphExec_t exec;
  std::uint64_t generation;
};

// Events in the backend's stream, created as the marks first need them and reused after.
class EventTimeline final : public Timeline {
 public:
  explicit EventTimeline(cudaStream_t stream) : stream_(stream) {}
  ~EventTimeline() override {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  void mark() override {
    if (used_ == events_.size()) {
      cudaEvent_t e;
      EXACTQ_CUDA_CHECK(cudaEventCreate(&e));
      events_.push_back(e);
    }
    EXACTQ_CUDA_CHECK(cudaEventRecord(events_[used_++], stream_));
  }
  std::vector<double> intervals_us() override {
    std::vector<double> us;
    if (used_ > 0) EXACTQ_CUDA_CHECK(cudaEventSynchronize(events_[used_ - 1]));
    for (std::size_t i = 1; i < used_; ++i) {
      float ms = 0;
      EXACTQ_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[i - 1], events_[i]));
      us.push_back(1000.0 * double(ms));
    }
    used_ = 0;
    return us;
  }

 private:
  cudaStream_t stream_;
  std::vector<cudaEvent_t> events_;
  std::size_t used_ = 0;
};

// Every op goes to the backend's own stream, in order; upload and download wait for the ops issued
// before them, so the host never sees a buffer mid-op.
class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const QmvOptions& options) : options_(options) {
    validate_options(options);
    EXACTQ_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~CudaBackend() override {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  std::string_view name() const override { return "cuda"; }
  std::string description() const override { return cuda::device_description(); }
  std::unique_ptr<Buffer> allocate(std::size_t bytes) override { return std::make_unique<CudaBuffer>(bytes); }
  void upload(Buffer& to, std::span<const std::byte> from) override {
    const std::span<std::byte> device = own<CudaBuffer>(to, "buffer").bytes();
    if (from.size() != device.size())
      throw std::invalid_argument("[exactq] upload of " + std::to_string(from.size()) + " bytes into a buffer of " +
                                  std::to_string(device.size()));
    if (!from.empty()) {
      EXACTQ_CUDA_CHECK(cudaMemcpyAsync(device.data(), from.data(), from.size(), cudaMemcpyHostToDevice, stream_));
      synchronize();  // `from` may be gone when the call returns
    }
  }
  void download(const Buffer& from, std::span<std::byte> to) override {
    const std::span<const std::byte> device = own<const CudaBuffer>(from, "buffer").bytes();
    if (to.size() != device.size())
      throw std::invalid_argument("[exactq] download of a buffer of " + std::to_string(device.size()) + " bytes into " +
                                  std::to_string(to.size()));
    if (!to.empty()) {
      EXACTQ_CUDA_CHECK(cudaMemcpyAsync(to.data(), device.data(), to.size(), cudaMemcpyDeviceToHost, stream_));
      synchronize();
    }
  }
  std::unique_ptr<Matrix> load(const QuantizedMatrixView& w, WeightLayout mma_layout) override {
    return std::make_unique<CudaMatrix>(w, mma_layout);
  }
  void qmv(Kernel kernel, const Matrix& w, const Buffer& x, std::int64_t m, Buffer& y) override {
    validate_kernel(kernel);
    const QuantizedMatrixView& v = own<const CudaMatrix>(w, "matrix").view_for(kernel);
    std::span<const std::byte> xs = own<const CudaBuffer>(x, "buffer").bytes();
    std::span<std::byte> ys = own<CudaBuffer>(y, "buffer").bytes();
    // The first M rows of larger buffers (cuda::qmv checks the exact sizes it is given).
    if (m >= 1 && m <= (std::int64_t(1) << 24)) {
      const std::size_t e = dtype_size(v.dtype);
      if (xs.size() >= std::size_t(m * v.k) * e) xs = xs.first(std::size_t(m * v.k) * e);
      if (ys.size() >= std::size_t(m * v.n) * e) ys = ys.first(std::size_t(m * v.n) * e);
    }
    // A backend's matrices are uploaded, never written by a kernel, so the qmv family may read
    // them while the kernel before it on the stream finishes (the decoder's other kernels are all
    // launched so: common.cuh's launch_step).
    QmvOptions options = options_;
    options.overlap_launch = true;
    cuda::qmv(kernel, v, xs, m, ys, options, stream_);
  }

  bool norm_qmv(Kernel kernel, const Matrix& w, const Buffer& h, const Buffer* delta, const Buffer& weight,
                std::int64_t m, float eps, bool one_plus_weight, Buffer* h_out, Buffer& y,
                const LinearEpilogue& then) override {
    if (kernel != Kernel::qmv) return false;
    const QuantizedMatrixView& v = own<const CudaMatrix>(w, "matrix").view_for(kernel);
    // The checks of the ops it stands for: the norm's on h (and add's, with h_out as its output),
    // qmv's on h's first m rows and y, the epilogue's on y and its own operands.
    checks::rmsnorm(buffer(h), buffer(weight), m, v.k, v.dtype, eps, buffer(h));
    if (h_out) {
      if (delta)
        checks::add_rmsnorm(buffer(h), buffer(*delta), buffer(weight), m, v.k, v.dtype, eps, buffer(*h_out));
      else
        checks::add_rmsnorm(buffer(h), buffer(h), buffer(weight), m, v.k, v.dtype, eps, buffer(*h_out));
    } else if (delta) {
      throw std::invalid_argument("[exactq] norm_qmv: a delta needs an h_out for h + delta");
    }
    cuda_detail::QmvParams fused{};
    fused.norm_weight = data(weight), fused.delta = delta ? data(*delta) : nullptr;
    fused.h_out = h_out ? data(*h_out) : nullptr, fused.eps = eps, fused.one_plus_weight = one_plus_weight;
    // The y that qmv alone would write: with the gated epilogue, y holds half of it.
    std::int64_t y_values = m * v.n;
    using Kind = LinearEpilogue::Kind;
    if (then.kind == Kind::gated) {
      if (v.n % 2 != 0) throw std::invalid_argument("[exactq] norm_qmv: a gated epilogue needs an even N, not " + std::to_string(v.n));
      checks::gated_activation(buffer(y), buffer(y), m * v.n / 2, then.activation, v.dtype, buffer(y));
      fused.epilogue = cuda_detail::kGated, fused.pair_run = int(v.n / 2), fused.paired_rows = v.n;
      fused.activation = int(then.activation);
      y_values = m * v.n / 2;
    } else if (then.kind == Kind::rope_write) {
      if (!then.positions || !then.cache_rows || !then.steps || !then.keys || !then.values)
        throw std::invalid_argument(
            "[exactq] norm_qmv: rope_write needs positions, cache rows, steps, keys and values");
      if (then.heads < 1 || then.kv_heads < 1 || then.head_dim < 2 || v.n != (then.heads + 2 * then.kv_heads) * then.head_dim)
        throw std::invalid_argument("[exactq] norm_qmv: N = " + std::to_string(v.n) + " is not (heads + 2 kv_heads) head_dim of " +
                                    std::to_string(then.heads) + ", " + std::to_string(then.kv_heads) + ", " +
                                    std::to_string(then.head_dim));
      checks::rope_write(buffer(y), buffer(y), buffer(y), m, then.heads, then.kv_heads, then.head_dim, v.dtype,
                         buffer(*then.positions), buffer(*then.cache_rows), buffer(*then.steps), buffer(*then.keys),
                         buffer(*then.values));
      const std::int64_t kv_values = then.kv_heads * then.head_dim;
      const std::size_t row = std::size_t(kv_values) * dtype_size(v.dtype);
      fused.epilogue = cuda_detail::kRopeWrite;
      fused.pair_run = int(then.interleaved ? 1 : then.head_dim / 2);
      while ((1 << fused.pair_shift) < fused.pair_run) ++fused.pair_shift;  // exact where pair_run is a power of two
      fused.paired_rows = (then.heads + then.kv_heads) * then.head_dim, fused.q_rows = then.heads * then.head_dim;
      fused.head_dim = then.head_dim, fused.interleaved = then.interleaved, fused.positions = int32s(*then.positions);
      fused.cache_at = int32s(*then.cache_rows);
      fused.steps = reinterpret_cast<const std::uint64_t*>(data(*then.steps));
      fused.keys = data(*then.keys), fused.values = data(*then.values);
      fused.cache_rows = std::int64_t(std::min(buffer(*then.keys).size(), buffer(*then.values).size()) / row);
    }
    const std::span<const std::byte> xs = own<const CudaBuffer>(h, "buffer").bytes().first(std::size_t(m * v.k) * dtype_size(v.dtype));
    std::span<std::byte> ys = own<CudaBuffer>(y, "buffer").bytes();
    const std::size_t y_bytes = std::size_t(y_values) * dtype_size(v.dtype);
    if (ys.size() >= y_bytes) ys = ys.first(y_bytes);
    // The gated y holds N / 2 values a vector (gated_activation's checks above); qmv's are asked
    // of the stacked output it stands for, which is never stored.
    if (then.kind == Kind::gated && ys.size() == y_bytes) ys = {ys.data(), 2 * y_bytes};
    validate_qmv_args(kernel, v, xs, m, ys);
    QmvOptions options = options_;
    options.overlap_launch = true;  // as qmv: the weights are never written by a kernel
    return cuda_detail::launch_qmv_norm(v, data(h), fused, m, data(y), options, stream_);
  }

  std::unique_ptr<DenseMatrix> load_dense(DType t, std::int64_t n, std::int64_t k,
                                          std::span<const std::byte> weight) override {
    checks::load_dense(t, n, k, weight);
    return std::make_unique<CudaDenseMatrix>(t, n, k, weight);
  }
  void copy(const Buffer& from, std::size_t from_offset, Buffer& to, std::size_t to_offset, std::size_t bytes) override {
    checks::copy(buffer(from), from_offset, buffer(to), to_offset, bytes);
    if (bytes > 0)
      EXACTQ_CUDA_CHECK(cudaMemcpyAsync(data(to) + to_offset, data(from) + from_offset, bytes, cudaMemcpyDeviceToDevice, stream_));
  }
  void copy_rows(const Buffer& from, std::size_t from_offset, std::size_t from_pitch, Buffer& to, std::size_t to_offset,
                 std::size_t to_pitch, std::size_t row_bytes, std::int64_t rows) override {
    checks::copy_rows(buffer(from), from_offset, from_pitch, buffer(to), to_offset, to_pitch, row_bytes, rows);
    EXACTQ_CUDA_CHECK(cudaMemcpy2DAsync(data(to) + to_offset, to_pitch, data(from) + from_offset, from_pitch, row_bytes,
                                        std::size_t(rows), cudaMemcpyDeviceToDevice, stream_));
  }
  void dense_mv(const DenseMatrix& w, const Buffer& x, std::int64_t m, Buffer& y) override {
    const auto& d = own<const CudaDenseMatrix>(w, "dense matrix");
    checks::dense_mv(d, buffer(x), m, buffer(y));
    cuda_detail::launch_dense_mv(d.data(), d.n(), d.k(), d.dtype(), data(x), m, data(y), stream_);
  }
  void embed(const Matrix& table, const Buffer& tokens, std::int64_t m, Buffer& out) override {
    const QuantizedMatrixView& v = own<const CudaMatrix>(table, "matrix").view();
    checks::embed(v.n, v.k, v.dtype, buffer(tokens), m, buffer(out));
    cuda_detail::launch_embed_quantized(v, reinterpret_cast<const std::int32_t*>(data(tokens)), m, data(out), stream_);
  }
  void embed(const DenseMatrix& table, const Buffer& tokens, std::int64_t m, Buffer& out) override {
    const auto& d = own<const CudaDenseMatrix>(table, "dense matrix");
    checks::embed(d.n(), d.k(), d.dtype(), buffer(tokens), m, buffer(out));
    cuda_detail::launch_embed_dense(d.data(), d.n(), d.k(), d.dtype(), reinterpret_cast<const std::int32_t*>(data(tokens)),
                                    m, data(out), stream_);
  }
  void rmsnorm(const Buffer& x, const Buffer& weight, std::int64_t rows, std::int64_t h, DType t, float eps,
               bool one_plus_weight, Buffer& y) override {
    checks::rmsnorm(buffer(x), buffer(weight), rows, h, t, eps, buffer(y));
    cuda_detail::launch_rmsnorm(data(x), data(weight), rows, h, t, eps, one_plus_weight, data(y), stream_);
  }
  void add_rmsnorm(Buffer& h, const Buffer& delta, const Buffer& weight, std::int64_t rows, std::int64_t width, DType t,
                   float eps, bool one_plus_weight, Buffer& y) override {
    checks::add_rmsnorm(buffer(h), buffer(delta), buffer(weight), rows, width, t, eps, buffer(y));
    cuda_detail::launch_add_rmsnorm(data(h), data(delta), data(weight), rows, width, t, eps, one_plus_weight, data(y),
                                    stream_);
  }
  void rope(Buffer& x, std::int64_t m, std::int64_t heads, std::int64_t head_dim, DType t, const Buffer& positions,
            const Buffer& steps, bool interleaved) override {
    checks::rope(buffer(x), m, heads, head_dim, t, buffer(positions), buffer(steps));
    cuda_detail::launch_rope(data(x), m, heads, head_dim, t, int32s(positions),
                             reinterpret_cast<const std::uint64_t*>(data(steps)), interleaved, stream_);
  }
  void write_rows(const Buffer& rows, const Buffer& positions, std::int64_t m, std::size_t row_bytes,
                  Buffer& cache) override {
    checks::write_rows(buffer(rows), buffer(positions), m, row_bytes, buffer(cache));
    cuda_detail::launch_write_rows(data(rows), int32s(positions), m, row_bytes, data(cache),
                                   std::int64_t(buffer(cache).size() / row_bytes), stream_);
  }
  void rope_write(Buffer& q, Buffer& k, const Buffer& v, std::int64_t m, std::int64_t heads, std::int64_t kv_heads,
                  std::int64_t head_dim, DType t, const Buffer& positions, const Buffer& cache_rows,
                  const Buffer& steps, bool interleaved, Buffer& keys, Buffer& values) override {
    checks::rope_write(buffer(q), buffer(k), buffer(v), m, heads, kv_heads, head_dim, t, buffer(positions),
                       buffer(cache_rows), buffer(steps), buffer(keys), buffer(values));
    const std::size_t row = std::size_t(kv_heads * head_dim) * dtype_size(t);
    cuda_detail::launch_rope_write(data(q), data(k), data(v), m, heads, kv_heads, head_dim, t, int32s(positions),
                                   int32s(cache_rows), reinterpret_cast<const std::uint64_t*>(data(steps)), interleaved,
                                   data(keys), data(values),
                                   std::int64_t(std::min(buffer(keys).size(), buffer(values).size()) / row), stream_);
  }
  void attention(const Buffer& q, const Buffer& keys, const Buffer& values, std::int64_t m, const Buffer& positions,
                 const Buffer& cache_rows, std::int64_t max_position, const AttentionShape& shape, DType t,
                 Buffer& out) override {
    checks::attention(buffer(q), buffer(keys), buffer(values), m, buffer(positions), buffer(cache_rows), max_position,
                      shape, t, buffer(out));
    const std::size_t need = cuda_detail::attention_workspace_bytes(m, max_position, shape);
    if (attention_workspace_.size() < need) {
      // Doubling (up to the cap), so that a growing context reallocates rarely; the old buffer
      // is freed first (cudaFree waits for the kernels that use it).
      const std::size_t doubled = std::min(2 * attention_workspace_.size(), cuda_detail::kAttentionWorkspaceCap);
      synchronize();  // the ops issued before may still read the old workspace
      attention_workspace_ = cuda::DeviceBuffer();
      attention_workspace_ = cuda::DeviceBuffer(std::max(need, doubled));
      ++workspace_generation_;
    }
    const std::size_t counters = cuda_detail::attention_counter_count(m, shape) * sizeof(unsigned);
    if (attention_counters_.size() < counters) {
      synchronize();
      attention_counters_ = cuda::DeviceBuffer();
      attention_counters_ = cuda::DeviceBuffer(counters);
      attention_counters_.fill(0);  // every call leaves them at zero
      ++workspace_generation_;
    }
    const std::size_t row = std::size_t(shape.kv_heads * shape.head_dim) * dtype_size(t);
    cuda_detail::launch_attention(data(q), data(keys), data(values), m, int32s(positions), int32s(cache_rows),
                                  std::int64_t(std::min(buffer(keys).size(), buffer(values).size()) / row),
                                  max_position, shape, t, data(out), attention_workspace_.bytes().data(),
                                  attention_workspace_.size(),
                                  reinterpret_cast<unsigned*>(attention_counters_.bytes().data()), stream_);
  }
  void gated_activation(const Buffer& gate, const Buffer& up, std::int64_t count, Activation act, DType t,
                        Buffer& out) override {
    checks::gated_activation(buffer(gate), buffer(up), count, act, t, buffer(out));
    cuda_detail::launch_gated_activation(data(gate), data(up), count, act, t, data(out), stream_);
  }
  void add(const Buffer& a, const Buffer& b, std::int64_t count, DType t, Buffer& out) override {
    checks::elementwise("add", count, t, {&buffer(a), &buffer(b), &buffer(out)});
    cuda_detail::launch_add(data(a), data(b), count, t, data(out), stream_);
  }
  void add_bias(Buffer& y, const Buffer& bias, std::int64_t m, std::int64_t n, DType t) override {
    checks::add_bias(buffer(y), buffer(bias), m, n, t);
    cuda_detail::launch_add_bias(data(y), data(bias), m, n, t, stream_);
  }
  void scale(Buffer& x, std::int64_t count, float factor, DType t) override {
    checks::elementwise("scale", count, t, {&buffer(x)});
    cuda_detail::launch_scale(data(x), count, factor, t, stream_);
  }
  void argmax(const Buffer& logits, std::int64_t m, std::int64_t n, DType t, Buffer& indices) override {
    checks::argmax(buffer(logits), m, n, t, buffer(indices));
    const std::size_t need = cuda_detail::argmax_workspace_bytes(m, n);
    if (argmax_workspace_.size() < need) {
      synchronize();
      argmax_workspace_ = cuda::DeviceBuffer();
      argmax_workspace_ = cuda::DeviceBuffer(need);
      ++workspace_generation_;
    }
    cuda_detail::launch_argmax(data(logits), m, n, t, reinterpret_cast<std::int32_t*>(data(indices)),
                               argmax_workspace_.bytes().data(), stream_);
  }

  void synchronize() override { EXACTQ_CUDA_CHECK(cudaStreamSynchronize(stream_)); }
  std::unique_ptr<Timeline> timeline() override { return std::make_unique<EventTimeline>(stream_); }
  std::unique_ptr<Buffer> view(Buffer& b, std::size_t offset, std::size_t bytes) override {
    checks::view(buffer(b), offset, bytes);
    return std::make_unique<CudaBuffer>(buffer(b).bytes().subspan(offset, bytes));
  }
  std::unique_ptr<Graph> capture(const std::function<void()>& issue) override {
    const std::uint64_t generation = workspace_generation_;
    EXACTQ_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    cudaGraph_t graph = nullptr;
    try {
      issue();
    } catch (...) {
      cudaStreamEndCapture(stream_, &graph);
      if (graph) cudaGraphDestroy(graph);
      throw;
    }
    EXACTQ_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    if (workspace_generation_ != generation) {  // a workspace grew inside: capture after an eager run
      cudaGraphDestroy(graph);
      throw std::logic_error("[exactq] a workspace grew while ops were captured; run them once first");
    }
    cudaGraphExec_t exec = nullptr;
    const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    EXACTQ_CUDA_CHECK(status);
    return std::make_unique<CudaGraph>(exec, generation);
  }
  bool replay(const Graph& g) override {
    const auto& graph = own<const CudaGraph>(g, "graph");
    if (graph.generation != workspace_generation_) return false;
    EXACTQ_CUDA_CHECK(cudaGraphLaunch(graph.exec, stream_));
    return true;
  }
  const QmvOptions& options() const override { return options_; }

 private:
  QmvOptions options_;
  cudaStream_t stream_ = nullptr;
  std::uint64_t workspace_generation_ = 0;  // counts the reallocations of the workspaces below
  // argmax's candidates per slice (argmax.cu), grown like attention's.
  cuda::DeviceBuffer argmax_workspace_;
  // attention's chunk statistics (attention.cu): grown only when a call needs more than it holds,
  // so steady-state decode allocates nothing.
  cuda::DeviceBuffer attention_workspace_;
  // attention's arrival counters, one per (row, kv head, head group): zero between calls.
  cuda::DeviceBuffer attention_counters_;
};

}  // namespace

bool cuda_backend_available() { return cuda::device_available(); }

std::unique_ptr<Backend> make_cuda_backend(const QmvOptions& options) {
  if (!cuda::device_available())
    throw std::runtime_error("[exactq] cuda backend: no usable CUDA device (no GPU or no driver on this machine)");
  return std::make_unique<CudaBackend>(options);
}

}  // namespace exactq
