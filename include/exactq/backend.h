// Where ops run. A Backend owns memory (Buffers), holds quantized matrices copied to it
// (Matrices), and runs the ops on them. The CPU backend (the bit-exact mirror) and the CUDA
// backend implement it; the engine and the CLI see only this interface, so every op they run
// gives the same bytes on either.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "exactq/format.h"
#include "exactq/qmv.h"

namespace exactq {

// Bytes owned by one backend: host memory on the CPU backend, device memory on CUDA. Only the ops
// of the backend that made a buffer may read or write it; the host crosses with upload/download.
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual std::span<std::byte> bytes() = 0;
  virtual std::span<const std::byte> bytes() const = 0;
  std::size_t size() const { return bytes().size(); }
};

// The gated MLP's activation (values fixed: src/order/elementwise.h takes them as integers).
enum class Activation : std::uint8_t { silu = 0, gelu_tanh = 1 };

// A quantized matrix resident on one backend.
class Matrix {
 public:
  virtual ~Matrix() = default;
  // Shape and format (n, k, bits, group, dtype) of the matrix as loaded, in MLX's layout.
  virtual const QuantizedMatrixView& view() const = 0;
};

// A dense (unquantized) matrix [n, k] resident on one backend: a linear or an embedding that the
// checkpoint keeps unquantized.
class DenseMatrix {
 public:
  virtual ~DenseMatrix() = default;
  virtual std::int64_t n() const = 0;
  virtual std::int64_t k() const = 0;
  virtual DType dtype() const = 0;
};

// One attention layer's geometry, for Backend::attention.
struct AttentionShape {
  std::int64_t heads = 0;     // query heads
  std::int64_t kv_heads = 0;  // key/value heads; query head h reads kv head h / (heads / kv_heads)
  std::int64_t head_dim = 0;  // a multiple of 8, at most 512
  float scale = 1.0f;         // f32(1/sqrt(scalar)), order::attention_scale
  std::int64_t window = 0;    // sliding window (keys j > p - window visible), 0: none
};

// Points on a backend's own clock, recorded in the order of its ops and never waiting for them: on
// CUDA, events in the backend's stream (the GPU's time, with whatever idle time the host left
// between ops); on the CPU, whose ops return when done, the host clock.
class Timeline {
 public:
  virtual ~Timeline() = default;
  // The time at which every op issued so far has finished.
  virtual void mark() = 0;
  // Microseconds between consecutive marks, in order (one fewer than the marks); waits for the
  // backend, then starts a new list.
  virtual std::vector<double> intervals_us() = 0;
};

// A captured sequence of ops (Backend::capture).
class Graph {
 public:
  virtual ~Graph() = default;
};

// The op a fused linear's output goes through before it is stored (Backend::norm_qmv's `then`),
// where the backend can do it in the linear's kernel; the bytes are those of the ops one by one.
// - store: y [m, n] = W x.
// - gated: W x is a stacked [gate; up] (n = 2 I); y [m, I] = gated_activation(gate, up).
// - rope_write: W x is a stacked [q; k; v] (n = (heads + 2 kv_heads) head_dim); y [m, n] holds
//   q, k and v as rope_write leaves them on the three parts (q and k rotated), and k and v are
//   written to keys and values at the rows' positions.
struct LinearEpilogue {
  enum class Kind : std::uint8_t { store, gated, rope_write };
  Kind kind = Kind::store;
  Activation activation = Activation::silu;  // gated
  // rope_write's arguments.
  std::int64_t heads = 0, kv_heads = 0, head_dim = 0;
  const Buffer* positions = nullptr;
  const Buffer* cache_rows = nullptr;
  const Buffer* steps = nullptr;
  bool interleaved = false;
  Buffer* keys = nullptr;
  Buffer* values = nullptr;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // "cpu" or "cuda".
  virtual std::string_view name() const = 0;
  // The device, for reports: the GPU's name, SMs and L2, or the CPU's hardware threads.
  virtual std::string description() const = 0;

  // Memory of this backend, uninitialised.
  virtual std::unique_ptr<Buffer> allocate(std::size_t bytes) = 0;
  // Throw std::invalid_argument where the sizes differ.
  virtual void upload(Buffer& to, std::span<const std::byte> from) = 0;
  virtual void download(const Buffer& from, std::span<std::byte> to) = 0;

  // A copy of `w` (in MLX's layout) on this backend. qmv_mma reads its copy in `mma_layout` where
  // the shape allows it (mma_layout::fits), else in MLX's layout: both give the same bytes.
  // Throws std::invalid_argument on an invalid matrix.
  virtual std::unique_ptr<Matrix> load(const QuantizedMatrixView& w,
                                       WeightLayout mma_layout = WeightLayout::mma_fragments) = 0;

  // y = W x for m vectors: x is [m, k] and y [m, n] in the matrix's dtype, both this backend's
  // buffers (holding at least that many values: the first are used). Asynchronous where the backend is (synchronize before reading y on the host).
  // Throws std::invalid_argument on bad arguments (exactq/qmv.h's validate_qmv_args).
  virtual void qmv(Kernel kernel, const Matrix& w, const Buffer& x, std::int64_t m, Buffer& y) = 0;

  // ---- the decoder's ops (docs/op-contract.md) ---------------------------------------------------
  // Every op computes row by row: a row's bytes depend only on that row's inputs and absolute
  // position, never on how many rows run together or where the row sits among them. Activations
  // are in the model's dtype `t`; buffers hold at least the elements an op reads or writes (the
  // first ones are used). Token and index buffers hold std::int32_t. Each throws
  // std::invalid_argument naming the value on bad arguments.

  // A copy of the dense matrix [n, k] of type `t` on this backend.
  virtual std::unique_ptr<DenseMatrix> load_dense(DType t, std::int64_t n, std::int64_t k,
                                                  std::span<const std::byte> weight) = 0;
  // bytes [from_offset, from_offset + bytes) of `from` to `to` at to_offset (ranges may not overlap).
  virtual void copy(const Buffer& from, std::size_t from_offset, Buffer& to, std::size_t to_offset,
                    std::size_t bytes) = 0;
  // `rows` rows of row_bytes: row i from from_offset + i * from_pitch to to_offset + i * to_pitch
  // (the columns of a wider matrix, such as one projection's share of a fused projection's rows).
  virtual void copy_rows(const Buffer& from, std::size_t from_offset, std::size_t from_pitch, Buffer& to,
                         std::size_t to_offset, std::size_t to_pitch, std::size_t row_bytes, std::int64_t rows) = 0;
  // y = W x for m vectors (x [m, k], y [m, n], in w's dtype), order/dense.h.
  virtual void dense_mv(const DenseMatrix& w, const Buffer& x, std::int64_t m, Buffer& y) = 0;
  // out[i] = row tokens[i] of the table, dequantized (order/elementwise.h) or copied: [m, k].
  // A token outside [0, n) is refused (the CPU) or gives a row of zeros (where checking would
  // cost a synchronization: callers check on the host first).
  virtual void embed(const Matrix& table, const Buffer& tokens, std::int64_t m, Buffer& out) = 0;
  virtual void embed(const DenseMatrix& table, const Buffer& tokens, std::int64_t m, Buffer& out) = 0;
  // RMSNorm of `rows` rows of h values (order/norm.h); weight holds h values of type t; y may be x.
  virtual void rmsnorm(const Buffer& x, const Buffer& weight, std::int64_t rows, std::int64_t h, DType t, float eps,
                       bool one_plus_weight, Buffer& y) = 0;
  // Positions are per row, in device memory (a buffer of m std::int32_t): a row's bytes depend on
  // its own position alone, so one captured step serves every position. On the CPU a position
  // out of range is refused; on CUDA, where checking would cost a synchronization, it is clamped
  // into range (no byte outside the buffers is touched): callers check on the host first.
  //
  // The residual add and the norm after it, as one op: h = h + delta (add's bytes, stored in h),
  // then y = rmsnorm(h) (rmsnorm's bytes). y may not be h or delta.
  virtual void add_rmsnorm(Buffer& h, const Buffer& delta, const Buffer& weight, std::int64_t rows, std::int64_t width,
                           DType t, float eps, bool one_plus_weight, Buffer& y) = 0;
  // The norm fused into the linear after it, where the backend has a kernel for it: x = h + delta
  // (add's bytes; x = h where delta is null), written to h_out where given (not h or delta), and
  // y = W rmsnorm(x): the bytes of add_rmsnorm (or rmsnorm) and qmv run one after the other, and
  // then of the op `then` names (LinearEpilogue). Returns false having done nothing where it has
  // none for this kernel, matrix, width or epilogue (the caller then runs the ops one by one); the
  // default has none.
  virtual bool norm_qmv(Kernel kernel, const Matrix& w, const Buffer& h, const Buffer* delta, const Buffer& weight,
                        std::int64_t m, float eps, bool one_plus_weight, Buffer* h_out, Buffer& y,
                        const LinearEpilogue& then = {}) {
    (void)kernel, (void)w, (void)h, (void)delta, (void)weight, (void)m, (void)eps, (void)one_plus_weight, (void)h_out, (void)y;
    (void)then;
    return false;
  }
  // RoPE in place on x [m, heads, head_dim]: row i is at position positions[i]; `steps` holds
  // head_dim/2 phase steps (std::uint64_t, order/rope.h); `interleaved` pairs (2i, 2i+1).
  virtual void rope(Buffer& x, std::int64_t m, std::int64_t heads, std::int64_t head_dim, DType t,
                    const Buffer& positions, const Buffer& steps, bool interleaved) = 0;
  // The cache write: row i of `rows` (row_bytes each) to row positions[i] of `cache`.
  virtual void write_rows(const Buffer& rows, const Buffer& positions, std::int64_t m, std::size_t row_bytes,
                          Buffer& cache) = 0;
  // Rows of several sequences share a cache: row i (at position positions[i] of its sequence) has
  // its key and value at cache row cache_rows[i], and its sequence's position p at cache row
  // cache_rows[i] - positions[i] + p. One sequence from cache row 0 passes positions as cache_rows.
  //
  // An attention layer's RoPE and cache write as one op, with the bytes of rope(q), rope(k),
  // write_rows(k, keys), write_rows(v, values): q [m, heads, head_dim] and k [m, kv_heads,
  // head_dim] rotated in place, then k and v [m, kv_heads, head_dim] stored at row cache_rows[i]
  // of keys and values (rows of kv_heads * head_dim values).
  virtual void rope_write(Buffer& q, Buffer& k, const Buffer& v, std::int64_t m, std::int64_t heads,
                          std::int64_t kv_heads, std::int64_t head_dim, DType t, const Buffer& positions,
                          const Buffer& cache_rows, const Buffer& steps, bool interleaved, Buffer& keys,
                          Buffer& values) = 0;
  // Attention of m query rows q [m, heads, head_dim] at positions[i], each at most max_position,
  // against their sequences' cache rows in keys/values [rows, kv_heads, head_dim] (rows up to each
  // query's position are read, none past it), into out [m, heads, head_dim]; order/attention.h.
  // max_position fixes the work's shape (on CUDA, the grid), never a byte.
  virtual void attention(const Buffer& q, const Buffer& keys, const Buffer& values, std::int64_t m,
                         const Buffer& positions, const Buffer& cache_rows, std::int64_t max_position,
                         const AttentionShape& shape, DType t, Buffer& out) = 0;
  // out = act(gate) * up, elementwise over `count` values (out may be gate or up).
  virtual void gated_activation(const Buffer& gate, const Buffer& up, std::int64_t count, Activation act, DType t,
                                Buffer& out) = 0;
  // out = a + b over `count` values (out may be a or b).
  virtual void add(const Buffer& a, const Buffer& b, std::int64_t count, DType t, Buffer& out) = 0;
  // y[i, j] += bias[j] for y [m, n].
  virtual void add_bias(Buffer& y, const Buffer& bias, std::int64_t m, std::int64_t n, DType t) = 0;
  // x = x * factor over `count` values.
  virtual void scale(Buffer& x, std::int64_t count, float factor, DType t) = 0;
  // indices[i] = order::argmax of row i of logits [m, n].
  virtual void argmax(const Buffer& logits, std::int64_t m, std::int64_t n, DType t, Buffer& indices) = 0;

  // Waits until every op issued so far has finished.
  virtual void synchronize() = 0;
  // A timeline on this backend's clock (profiling: exactq/profile.h).
  virtual std::unique_ptr<Timeline> timeline() = 0;

  // Bytes [offset, offset + bytes) of `b`, as a buffer of their own that shares b's memory (b
  // must outlive it). Throws std::invalid_argument where the range exceeds b.
  virtual std::unique_ptr<Buffer> view(Buffer& b, std::size_t offset, std::size_t bytes) = 0;

  // The ops that `issue` makes, recorded without running them, to be replayed as one unit (a CUDA
  // graph): the same ops on the same buffers, so the same bytes. nullptr where the backend runs
  // ops as they come (the CPU). `issue` must not wait for the backend, upload or download.
  virtual std::unique_ptr<Graph> capture(const std::function<void()>& issue) = 0;
  // Runs a captured graph; false (running nothing) where it can no longer run: memory it uses
  // was released since (a workspace that grew), so the caller captures it again.
  virtual bool replay(const Graph& graph) = 0;

  // The options every op runs with (numerically irrelevant: no byte depends on them).
  virtual const QmvOptions& options() const = 0;
};

// The CPU backend. Throws std::invalid_argument on bad options.
std::unique_ptr<Backend> make_cpu_backend(const QmvOptions& options = {});
// Whether this build has the CUDA backend and a usable GPU is present now.
bool cuda_backend_available();
// The CUDA backend on the current device. Throws std::runtime_error where this build has no CUDA
// backend or no GPU is usable, std::invalid_argument on bad options.
std::unique_ptr<Backend> make_cuda_backend(const QmvOptions& options = {});
// "cpu", "cuda", or "auto" (cuda where cuda_backend_available(), else cpu). Throws
// std::invalid_argument naming an unknown name.
std::unique_ptr<Backend> make_backend(std::string_view name, const QmvOptions& options = {});

// qmv with host activations and outputs: uploads x, runs, downloads y (sizes as Backend::qmv).
void qmv_host(Backend& backend, Kernel kernel, const Matrix& w, std::span<const std::byte> x, std::int64_t m,
              std::span<std::byte> y);

}  // namespace exactq
