// The step's timeline: a Backend that forwards every call to another one and, while recording,
// marks the other backend's Timeline after each op (exactq/backend.h). On CUDA the marks are
// events in the stream, so an op's time is the GPU's, inside the running step, with no wait
// between ops; an interval also holds any time the GPU sat idle waiting for the host to issue the
// op, which the host issue times show. No byte of any op changes: the calls are forwarded as given.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exactq/backend.h"

namespace exactq {

// One op as recorded: what it was (kind and shape), the bytes it must move at least (its inputs
// read once, its outputs written once), its time on the backend's clock and the host's time to
// issue it.
struct OpRecord {
  std::string kind;   // "qmv", "rmsnorm", "attention", ...
  std::string shape;  // e.g. "14336x4096 4-bit g64, m=1"
  std::uint64_t bytes = 0;
  double us = 0;        // between the previous op's end and this op's end, on the backend's clock
  double host_us = 0;   // the host's time inside the call
};

class ProfiledBackend final : public Backend {
 public:
  explicit ProfiledBackend(Backend& inner);
  ~ProfiledBackend() override;

  // Starts recording: a mark now, then one after every op until stop().
  void start();
  // Stops, waits for the backend and returns the ops since start() with their times.
  std::vector<OpRecord> stop();

  std::string_view name() const override { return inner_.name(); }
  std::string description() const override { return inner_.description(); }
  std::unique_ptr<Buffer> allocate(std::size_t bytes) override { return inner_.allocate(bytes); }
  void upload(Buffer& to, std::span<const std::byte> from) override;
  void download(const Buffer& from, std::span<std::byte> to) override;
  std::unique_ptr<Matrix> load(const QuantizedMatrixView& w, WeightLayout mma_layout) override {
    return inner_.load(w, mma_layout);
  }
  void qmv(Kernel kernel, const Matrix& w, const Buffer& x, std::int64_t m, Buffer& y) override;
  std::unique_ptr<DenseMatrix> load_dense(DType t, std::int64_t n, std::int64_t k,
                                          std::span<const std::byte> weight) override {
    return inner_.load_dense(t, n, k, weight);
  }
  void copy(const Buffer& from, std::size_t from_offset, Buffer& to, std::size_t to_offset, std::size_t bytes) override;
  void copy_rows(const Buffer& from, std::size_t from_offset, std::size_t from_pitch, Buffer& to, std::size_t to_offset,
                 std::size_t to_pitch, std::size_t row_bytes, std::int64_t rows) override;
  void dense_mv(const DenseMatrix& w, const Buffer& x, std::int64_t m, Buffer& y) override;
  void embed(const Matrix& table, const Buffer& tokens, std::int64_t m, Buffer& out) override;
  void embed(const DenseMatrix& table, const Buffer& tokens, std::int64_t m, Buffer& out) override;
  void rmsnorm(const Buffer& x, const Buffer& weight, std::int64_t rows, std::int64_t h, DType t, float eps,
               bool one_plus_weight, Buffer& y) override;
  void add_rmsnorm(Buffer& h, const Buffer& delta, const Buffer& weight, std::int64_t rows, std::int64_t width, DType t,
                   float eps, bool one_plus_weight, Buffer& y) override;
  bool norm_qmv(Kernel kernel, const Matrix& w, const Buffer& h, const Buffer* delta, const Buffer& weight,
                std::int64_t m, float eps, bool one_plus_weight, Buffer* h_out, Buffer& y,
                const LinearEpilogue& then = {}) override;
  void rope(Buffer& x, std::int64_t m, std::int64_t heads, std::int64_t head_dim, DType t, const Buffer& positions,
            const Buffer& steps, bool interleaved) override;
  void write_rows(const Buffer& rows, const Buffer& positions, std::int64_t m, std::size_t row_bytes,
                  Buffer& cache) override;
  void rope_write(Buffer& q, Buffer& k, const Buffer& v, std::int64_t m, std::int64_t heads, std::int64_t kv_heads,
                  std::int64_t head_dim, DType t, const Buffer& positions, const Buffer& cache_rows,
                  const Buffer& steps, bool interleaved, Buffer& keys, Buffer& values) override;
  void attention(const Buffer& q, const Buffer& keys, const Buffer& values, std::int64_t m, const Buffer& positions,
                 const Buffer& cache_rows, std::int64_t max_position, const AttentionShape& shape, DType t,
                 Buffer& out) override;
  void gated_activation(const Buffer& gate, const Buffer& up, std::int64_t count, Activation act, DType t,
                        Buffer& out) override;
  void add(const Buffer& a, const Buffer& b, std::int64_t count, DType t, Buffer& out) override;
  void add_bias(Buffer& y, const Buffer& bias, std::int64_t m, std::int64_t n, DType t) override;
  void scale(Buffer& x, std::int64_t count, float factor, DType t) override;
  void argmax(const Buffer& logits, std::int64_t m, std::int64_t n, DType t, Buffer& indices) override;
  void synchronize() override { inner_.synchronize(); }
  std::unique_ptr<Timeline> timeline() override { return inner_.timeline(); }
  std::unique_ptr<Buffer> view(Buffer& b, std::size_t offset, std::size_t bytes) override {
    return inner_.view(b, offset, bytes);
  }
  // While recording, the timeline must see each op as it is issued: nothing is captured or
  // replayed then, and the caller issues the ops themselves. Otherwise graphs are the inner's.
  std::unique_ptr<Graph> capture(const std::function<void()>& issue) override {
    return recording_ ? nullptr : inner_.capture(issue);
  }
  bool replay(const Graph& graph) override { return !recording_ && inner_.replay(graph); }
  const QmvOptions& options() const override { return inner_.options(); }

 private:
  using Clock = std::chrono::steady_clock;
  // Marks the end of the op just issued (started at `issued`), when recording.
  void record(std::string kind, std::string shape, std::uint64_t bytes, Clock::time_point issued);

  std::vector<std::int32_t> uploaded_positions(const Buffer& positions, std::int64_t m) const;

  static constexpr std::size_t kKeptUpload = 1 << 16;
  Backend& inner_;
  std::unique_ptr<Timeline> timeline_;
  std::map<std::uintptr_t, std::vector<std::byte>> uploads_;  // the last small upload to each address
  bool recording_ = false;
  std::vector<OpRecord> ops_;
};

}  // namespace exactq
