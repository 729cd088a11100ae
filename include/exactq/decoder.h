// The decoder forward pass: one code path for every architecture the loader accepts (Llama,
// Mistral, Qwen2, Qwen3, Gemma 3), driven by ModelConfig, running on any Backend.
//
// forward(tokens, start) computes M tokens at positions start .. start + M - 1 against the KV
// cache. Prefill, the M = 1 decode step and the M = k verify step of speculative decoding are the
// same call, and with a width-invariant kernel family every row's logits are the same bytes
// whatever M is: a verify row at position p equals the decode step at p (docs/op-contract.md).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "exactq/backend.h"
#include "exactq/model.h"

namespace exactq {

// Which qmv kernels the quantized linears use, fixed for a whole run. A family may pick a layer's
// kernel from the layer's shape, never from M.
//   exact   qmv at M = 1, qmv_streamed above: qmv's bits at every M
//   mma     qmv_mma at every M where the layer's shape allows it (else exact's kernels): its own
//           bits at every M
//   narrow  qmv once per vector: qmv's bits, slowly
//   wide    qmv at M = 1, qmv_wide above: MLX's behaviour, not width-invariant (the negative
//           control and the inexact speed arm)
enum class KernelFamily : std::uint8_t { exact, mma, narrow, wide };
std::string_view to_string(KernelFamily family);
// Throws std::invalid_argument naming the text.
KernelFamily parse_kernel_family(std::string_view text);
constexpr bool is_width_invariant(KernelFamily family) { return family != KernelFamily::wide; }

// The kernel a family runs for a quantized [n, k] matrix at width m.
Kernel kernel_for(KernelFamily family, const QuantizedMatrixView& w, std::int64_t m);

struct DecoderOptions {
  KernelFamily family = KernelFamily::exact;
  // Positions the KV cache holds. 0: the config's max_position_embeddings, at most 4096.
  std::int64_t context_length = 0;
  // Replay each width's step as one captured unit where the backend can (CUDA graphs: the second
  // forward of a width and attention bound is captured, later ones replay it). Off: every op is
  // issued on every forward. The ops and their bytes are the same either way.
  bool graphs = true;
  // Sequences the KV cache holds side by side, context_length positions each (a batch of
  // independent requests: forward over parts). 1 to 4096.
  std::int64_t sequences = 1;
};

// An intermediate activation of a forward, for the exactness probe: the output of `op` in `layer`
// (-1 outside the layers), `rows` rows of `width` values of the decoder's dtype.
struct TracePoint {
  std::int64_t layer = -1;
  std::string_view op;
  std::int64_t rows = 0, width = 0;
  std::span<const std::byte> values;
};
using Tracer = std::function<void(const TracePoint&)>;

class Decoder {
 public:
  // Copies the checkpoint's weights to the backend and allocates the KV cache. Throws
  // std::invalid_argument naming the value where the model or the options cannot run (a head dim
  // the attention order does not serve, a context length out of range).
  Decoder(Backend& backend, const Checkpoint& checkpoint, const DecoderOptions& options = {});
  ~Decoder();
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  const ModelConfig& config() const;
  const DecoderOptions& options() const;
  DType dtype() const;                  // of activations, logits and the cache
  std::int64_t vocab_size() const;      // the LM head's rows
  std::int64_t context_length() const;  // positions the cache holds per sequence
  std::int64_t sequences() const;
  // Positions [0, length) of sequence 0 (of `sequence`) are in the cache.
  std::int64_t length() const;
  std::int64_t length(std::int64_t sequence) const;

  // Forgets the cache's positions from `length` on (speculative decoding's rollback), of sequence
  // 0 or of `sequence`.
  void truncate(std::int64_t length);
  void truncate(std::int64_t sequence, std::int64_t length);

  enum class Rows : std::uint8_t { all, last };
  // Runs `tokens` at positions start .. start + M - 1 (start <= length(): later positions are
  // forgotten first), appends their keys and values, and leaves the logits of every row or only
  // of the last on the backend. Throws std::invalid_argument naming the value on an empty input,
  // a token outside [0, vocab_size) or a context overflow, before any state changes.
  void forward(std::span<const std::int32_t> tokens, std::int64_t start, Rows rows = Rows::all);

  // One forward over the rows of several sequences: part j runs its tokens in its sequence at
  // positions start .. start + size - 1, as forward(tokens, start) runs them in sequence 0. The rows
  // are the parts' in order; with Rows::last each part keeps its last row's logits. A row's logits
  // and cache entries are the bytes its sequence gets alone, whatever the other parts are (every
  // op's order is the row's own: docs/op-contract.md). A sequence appears in at most one part.
  // Throws std::invalid_argument naming the value, before any state changes.
  struct Part {
    std::int64_t sequence = 0;
    std::span<const std::int32_t> tokens;
    std::int64_t start = 0;
  };
  void forward(std::span<const Part> parts, Rows rows = Rows::all);
  // forward's checks of its parts, without running them: throws as forward would.
  void check(std::span<const Part> parts) const;

  // After forward: the rows that have logits, their bytes ([rows, vocab] in dtype()) and each
  // row's greedy token (order/argmax.h, computed on the backend).
  std::int64_t logits_rows() const;
  // How many forwards ran as a replayed captured step (DecoderOptions::graphs).
  std::int64_t replayed_forwards() const;
  std::vector<std::byte> logits();
  std::vector<std::int32_t> greedy();

  // Calls `tracer` after every op of every later forward (empty: none, the default). Each call
  // first waits for the backend; with `values`, it also copies the op's output to the host (slow:
  // for finding where two forwards part), else TracePoint::values is empty (for timing ops).
  void set_tracer(Tracer tracer, bool values = true);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace exactq
