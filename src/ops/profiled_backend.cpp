// ProfiledBackend (exactq/profile.h): each op forwarded, then a mark on the inner backend's
// timeline. The bytes an op must move are counted from its arguments: a matrix's packed codes,
// scales and biases once, activations read and written once, the KV rows each query row sees.
#include "exactq/profile.h"

#include <cstring>

#include <fmt/format.h>

#include "order/attention.h"

namespace exactq {

namespace {

std::uint64_t matrix_bytes(const QuantizedMatrixView& v) {
  return v.packed.size() + v.scales.size() + v.biases.size();
}
std::uint64_t values(std::int64_t count, DType t) { return std::uint64_t(count) * dtype_size(t); }

// The K and V rows that query rows at `positions` see (each kv head's rows once per row).
std::uint64_t kv_bytes(const std::vector<std::int32_t>& positions, const AttentionShape& s, DType t) {
  std::uint64_t rows = 0;
  for (std::int32_t p : positions) rows += std::uint64_t(p - order::attention_first_visible(p, s.window) + 1);
  return 2 * rows * values(s.kv_heads * s.head_dim, t);
}

}  // namespace

ProfiledBackend::ProfiledBackend(Backend& inner) : inner_(inner), timeline_(inner.timeline()) {}
ProfiledBackend::~ProfiledBackend() = default;

void ProfiledBackend::start() {
  ops_.clear();
  recording_ = true;
  timeline_->mark();
}

std::vector<OpRecord> ProfiledBackend::stop() {
  recording_ = false;
  const std::vector<double> us = timeline_->intervals_us();
  for (std::size_t i = 0; i < ops_.size() && i < us.size(); ++i) ops_[i].us = us[i];
  return std::move(ops_);
}

void ProfiledBackend::record(std::string kind, std::string shape, std::uint64_t bytes, Clock::time_point issued) {
  if (!recording_) return;
  const double host = std::chrono::duration<double, std::micro>(Clock::now() - issued).count();
  timeline_->mark();
  ops_.push_back({std::move(kind), std::move(shape), bytes, 0.0, host});
}

// Small uploads are kept, so that an op given positions can count the KV rows it reads without
// reading the positions back from the backend in the middle of the step.
std::vector<std::int32_t> ProfiledBackend::uploaded_positions(const Buffer& positions, std::int64_t m) const {
  const auto address = reinterpret_cast<std::uintptr_t>(positions.bytes().data());
  for (const auto& [start, bytes] : uploads_)
    if (address >= start && address + std::size_t(m) * sizeof(std::int32_t) <= start + bytes.size()) {
      std::vector<std::int32_t> p(static_cast<std::size_t>(m));
      std::memcpy(p.data(), bytes.data() + (address - start), p.size() * sizeof(std::int32_t));
      return p;
    }
  return {};
}

void ProfiledBackend::upload(Buffer& to, std::span<const std::byte> from) {
  const auto t0 = Clock::now();
  inner_.upload(to, from);
  if (from.size() <= kKeptUpload)
    uploads_[reinterpret_cast<std::uintptr_t>(to.bytes().data())].assign(from.begin(), from.end());
  record("upload", fmt::format("{} B", from.size()), from.size(), t0);
}
void ProfiledBackend::download(const Buffer& from, std::span<std::byte> to) {
  const auto t0 = Clock::now();
  inner_.download(from, to);
  record("download", fmt::format("{} B", to.size()), to.size(), t0);
}
void ProfiledBackend::qmv(Kernel kernel, const Matrix& w, const Buffer& x, std::int64_t m, Buffer& y) {
  const auto t0 = Clock::now();
  inner_.qmv(kernel, w, x, m, y);
  const QuantizedMatrixView& v = w.view();
  record(std::string(to_string(kernel)), fmt::format("{}x{} {}-bit g{}, m={}", v.n, v.k, v.bits, v.group, m),
         matrix_bytes(v) + values(m * (v.n + v.k), v.dtype), t0);
}
bool ProfiledBackend::norm_qmv(Kernel kernel, const Matrix& w, const Buffer& h, const Buffer* delta, const Buffer& weight,
                               std::int64_t m, float eps, bool one_plus_weight, Buffer* h_out, Buffer& y,
                               const LinearEpilogue& then) {
  const auto t0 = Clock::now();
  if (!inner_.norm_qmv(kernel, w, h, delta, weight, m, eps, one_plus_weight, h_out, y, then)) return false;
  const QuantizedMatrixView& v = w.view();
  using Kind = LinearEpilogue::Kind;
  // Values written: y, plus k and v into the caches for rope_write, half of y for gated.
  const std::int64_t written = then.kind == Kind::gated        ? v.n / 2
                               : then.kind == Kind::rope_write ? v.n + 2 * then.kv_heads * then.head_dim
                                                               : v.n;
  const char* suffix = then.kind == Kind::gated ? "+gated" : then.kind == Kind::rope_write ? "+rope_write" : "";
  record(fmt::format("norm+{}{}", to_string(kernel), suffix), fmt::format("{}x{} {}-bit g{}, m={}", v.n, v.k, v.bits, v.group, m),
         matrix_bytes(v) + values(m * (written + (delta ? 3 : 1) * v.k + (h_out ? v.k : 0)) + v.k, v.dtype), t0);
  return true;
}
void ProfiledBackend::copy(const Buffer& from, std::size_t from_offset, Buffer& to, std::size_t to_offset,
                           std::size_t bytes) {
  const auto t0 = Clock::now();
  inner_.copy(from, from_offset, to, to_offset, bytes);
  record("copy", fmt::format("{} B", bytes), 2 * std::uint64_t(bytes), t0);
}
void ProfiledBackend::copy_rows(const Buffer& from, std::size_t from_offset, std::size_t from_pitch, Buffer& to,
                                std::size_t to_offset, std::size_t to_pitch, std::size_t row_bytes, std::int64_t rows) {
  const auto t0 = Clock::now();
  inner_.copy_rows(from, from_offset, from_pitch, to, to_offset, to_pitch, row_bytes, rows);
  record("copy_rows", fmt::format("{} rows of {} B", rows, row_bytes), 2 * std::uint64_t(rows) * row_bytes, t0);
}
void ProfiledBackend::dense_mv(const DenseMatrix& w, const Buffer& x, std::int64_t m, Buffer& y) {
  const auto t0 = Clock::now();
  inner_.dense_mv(w, x, m, y);
  record("dense_mv", fmt::format("{}x{}, m={}", w.n(), w.k(), m), values(w.n() * w.k() + m * (w.n() + w.k()), w.dtype()), t0);
}
void ProfiledBackend::embed(const Matrix& table, const Buffer& tokens, std::int64_t m, Buffer& out) {
  const auto t0 = Clock::now();
  inner_.embed(table, tokens, m, out);
  const QuantizedMatrixView& v = table.view();
  record("embed", fmt::format("{}x{}, m={}", v.n, v.k, m),
         std::uint64_t(m) * (matrix_bytes(v) / std::uint64_t(v.n)) + values(m * v.k, v.dtype), t0);
}
void ProfiledBackend::embed(const DenseMatrix& table, const Buffer& tokens, std::int64_t m, Buffer& out) {
  const auto t0 = Clock::now();
  inner_.embed(table, tokens, m, out);
  record("embed", fmt::format("{}x{} dense, m={}", table.n(), table.k(), m), 2 * values(m * table.k(), table.dtype()), t0);
}
void ProfiledBackend::rmsnorm(const Buffer& x, const Buffer& weight, std::int64_t rows, std::int64_t h, DType t,
                              float eps, bool one_plus_weight, Buffer& y) {
  const auto t0 = Clock::now();
  inner_.rmsnorm(x, weight, rows, h, t, eps, one_plus_weight, y);
  record("rmsnorm", fmt::format("{}x{}", rows, h), values(2 * rows * h + h, t), t0);
}
void ProfiledBackend::add_rmsnorm(Buffer& h, const Buffer& delta, const Buffer& weight, std::int64_t rows,
                                  std::int64_t width, DType t, float eps, bool one_plus_weight, Buffer& y) {
  const auto t0 = Clock::now();
  inner_.add_rmsnorm(h, delta, weight, rows, width, t, eps, one_plus_weight, y);
  record("add_rmsnorm", fmt::format("{}x{}", rows, width), values(4 * rows * width + width, t), t0);
}
void ProfiledBackend::rope(Buffer& x, std::int64_t m, std::int64_t heads, std::int64_t head_dim, DType t,
                           const Buffer& positions, const Buffer& steps, bool interleaved) {
  const auto t0 = Clock::now();
  inner_.rope(x, m, heads, head_dim, t, positions, steps, interleaved);
  record("rope", fmt::format("{} heads of {}, m={}", heads, head_dim, m), values(2 * m * heads * head_dim, t), t0);
}
void ProfiledBackend::write_rows(const Buffer& rows, const Buffer& positions, std::int64_t m, std::size_t row_bytes,
                                 Buffer& cache) {
  const auto t0 = Clock::now();
  inner_.write_rows(rows, positions, m, row_bytes, cache);
  record("write_rows", fmt::format("{} rows of {} B", m, row_bytes), 2 * std::uint64_t(m) * row_bytes, t0);
}
void ProfiledBackend::rope_write(Buffer& q, Buffer& k, const Buffer& v, std::int64_t m, std::int64_t heads,
                                 std::int64_t kv_heads, std::int64_t head_dim, DType t, const Buffer& positions,
                                 const Buffer& cache_rows, const Buffer& steps, bool interleaved, Buffer& keys,
                                 Buffer& values_) {
  const auto t0 = Clock::now();
  inner_.rope_write(q, k, v, m, heads, kv_heads, head_dim, t, positions, cache_rows, steps, interleaved, keys, values_);
  // q and k read and written, k and v read again and written to the caches.
  record("rope_write", fmt::format("{}+{} heads of {}, m={}", heads, kv_heads, head_dim, m),
         values(2 * m * (heads + kv_heads) * head_dim + 4 * m * kv_heads * head_dim, t), t0);
}
void ProfiledBackend::attention(const Buffer& q, const Buffer& keys, const Buffer& values_, std::int64_t m,
                                const Buffer& positions, const Buffer& cache_rows, std::int64_t max_position,
                                const AttentionShape& shape, DType t, Buffer& out) {
  const auto t0 = Clock::now();
  inner_.attention(q, keys, values_, m, positions, cache_rows, max_position, shape, t, out);
  record("attention",
         fmt::format("{}/{} heads of {}{}, m={}", shape.heads, shape.kv_heads, shape.head_dim,
                     shape.window > 0 ? fmt::format(", window {}", shape.window) : "", m),
         kv_bytes(uploaded_positions(positions, m), shape, t) + values(2 * m * shape.heads * shape.head_dim, t), t0);
}
void ProfiledBackend::gated_activation(const Buffer& gate, const Buffer& up, std::int64_t count, Activation act,
                                       DType t, Buffer& out) {
  const auto t0 = Clock::now();
  inner_.gated_activation(gate, up, count, act, t, out);
  record("gated_activation", fmt::format("{}", count), values(3 * count, t), t0);
}
void ProfiledBackend::add(const Buffer& a, const Buffer& b, std::int64_t count, DType t, Buffer& out) {
  const auto t0 = Clock::now();
  inner_.add(a, b, count, t, out);
  record("add", fmt::format("{}", count), values(3 * count, t), t0);
}
void ProfiledBackend::add_bias(Buffer& y, const Buffer& bias, std::int64_t m, std::int64_t n, DType t) {
  const auto t0 = Clock::now();
  inner_.add_bias(y, bias, m, n, t);
  record("add_bias", fmt::format("{}x{}", m, n), values(2 * m * n + n, t), t0);
}
void ProfiledBackend::scale(Buffer& x, std::int64_t count, float factor, DType t) {
  const auto t0 = Clock::now();
  inner_.scale(x, count, factor, t);
  record("scale", fmt::format("{}", count), values(2 * count, t), t0);
}
void ProfiledBackend::argmax(const Buffer& logits, std::int64_t m, std::int64_t n, DType t, Buffer& indices) {
  const auto t0 = Clock::now();
  inner_.argmax(logits, m, n, t, indices);
  record("argmax", fmt::format("{}x{}", m, n), values(m * n, t) + std::uint64_t(m) * 4, t0);
}

}  // namespace exactq
