// The exactness probe: does a model's verify forward of K tokens give, byte for byte, the logits
// of K single-token decode steps, on this backend with this kernel family? Speculative decoding
// is byte-identical to classic decode exactly when it does, so the probe's verdict gates it.
//
// For each block width K and draw: a fresh prefill of a random prompt, then (chain) K single-token
// forwards and (block) one K-wide forward from the same cache, the raw logit bytes compared row by
// row. Where they differ, a traced re-run names the first op (in forward order) and layer whose
// output differs. Draws walk different prompts, block contents and start positions; with 3 or
// more draws the last starts past `long_context` positions, so several attention chunks are in play.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "exactq/decoder.h"

namespace exactq {

struct ProbeOptions {
  std::vector<std::int64_t> blocks{2, 3, 4, 5, 6, 7, 8};  // K, each >= 2
  int draws = 3;
  std::uint64_t seed = 1;
  std::int64_t long_context = 1024;  // the last draw's prompt is longer than this (draws >= 3)
};

struct ProbeCase {
  std::int64_t block = 0;
  int draw = 0;
  std::int64_t start = 0;  // the prompt's length: the block's first position
  bool equal = true;
  // Where the logits differ: the first differing row (0-based in the block), the differing bytes
  // and the bytes compared, and the first op and layer whose output differs (layer -1: outside
  // the layers, e.g. the head).
  std::int64_t first_row = -1;
  std::int64_t differing_bytes = 0, total_bytes = 0;
  std::string first_op;
  std::int64_t first_layer = -1;
};

struct ProbeReport {
  std::vector<ProbeCase> cases;
  bool equal() const;  // every case equal
};

// Runs the probe on `backend` with `family` (the decoder is built here, its context sized for the
// longest draw). `progress` sees each case as it finishes. Throws std::invalid_argument on bad
// options (a block < 2, draws < 1) or a model whose context cannot hold the longest draw.
ProbeReport probe(Backend& backend, const Checkpoint& checkpoint, KernelFamily family, const ProbeOptions& options,
                  const std::function<void(const ProbeCase&)>& progress = {});

// The gate: the verdict for (model directory, block width, family, backend), probed once per
// process and cached. Speculative decoding may run only where it is true (fail-closed).
class ExactnessGate {
 public:
  bool allows(Backend& backend, const Checkpoint& checkpoint, const std::string& model_dir, std::int64_t block,
              KernelFamily family, const ProbeOptions& options = {});
  // The report behind the last verdict (empty before the first).
  const ProbeReport& last_report() const { return last_; }

 private:
  std::map<std::tuple<std::string, std::int64_t, KernelFamily, std::string>, bool> verdicts_;
  ProbeReport last_;
};

}  // namespace exactq
