// `exactq parity`: block versus chain, bitwise, with a negative control.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli_common.h"

namespace exactq::cli {

struct ParityConfig {
  std::string backend = "cpu";
  std::string against;  // "" or "cpu": compare every output byte with the CPU mirror
  std::vector<Kernel> kernels = {Kernel::qmv, Kernel::qmv_streamed, Kernel::qmv_wide};
  std::int64_t n = 512;
  std::int64_t k = 3840;
  int bits = 4;
  int group = 64;
  DType dtype = DType::bf16;
  std::int64_t m_max = 8;
  std::vector<std::uint64_t> seeds = {1, 2, 3};
  QmvOptions options;
  WeightLayout mma_layout = WeightLayout::mma_fragments;  // what qmv_mma reads (same bytes either way)
  bool print_rows = true;  // the per-M table
};

struct ParityResult {
  nlohmann::json json;
  bool identity_ok = true;         // every exact-family check found 0 differing bytes
  bool control_fired = false;      // qmv_wide differs from qmv somewhere
  bool against_ok = true;          // backend == reference backend on every byte (when asked)
  int exit_code() const;
  std::string summary;
};

ParityResult run_parity(const ParityConfig& config, Backend& backend, Backend* reference);
void add_parity_command(CLI::App& app, int& exit_code);

}  // namespace exactq::cli
