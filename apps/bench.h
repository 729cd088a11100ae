// `exactq bench`: time every kernel at every M on real shapes against a same-run read ceiling.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "timer.h"

namespace exactq::cli {

struct BenchConfig {
  std::vector<Shape> shapes;
  std::vector<std::int64_t> ms = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<Kernel> kernels = {Kernel::qmv, Kernel::qmv_streamed, Kernel::qmv_wide};
  int bits = 4;
  int group = 64;
  DType dtype = DType::bf16;
  int repeats = 0;  // 0: the backend's default
  // Seconds each point (and each size-matched read) first runs its own launches untimed, so that
  // clocks and the power limiter settle where continuous use holds them (0: time at once).
  double sustain_seconds = 0;
  bool progress = true;
  QmvOptions options;  // as given to the backend, recorded in the results
  WeightLayout mma_layout = WeightLayout::mma_fragments;  // what qmv_mma reads, recorded
};

// Runs the sweep; prints the table; returns the results (the same numbers) as JSON.
nlohmann::json run_bench(const BenchConfig& config, bench::Timer& timer);
std::string bench_markdown(const nlohmann::json& results);
std::string bench_svg(const nlohmann::json& results);
void add_bench_command(CLI::App& app, int& exit_code);

}  // namespace exactq::cli
