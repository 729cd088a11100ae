// exactq: width-invariant quantized mat-vec. One binary, subcommands:
//   demo    the main job: parity and a benchmark on the backend present (the README's first command)
//   parity  block vs chain byte parity with a negative control
//   bench   timing against a same-run read ceiling
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "bench.h"
#include "parity.h"

namespace exactq::cli {
namespace {

void add_demo_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("demo", "The main job: parity on realistic shapes, then a benchmark, on the backend present");
  auto backend_name = std::make_shared<std::string>("auto");
  auto threads = std::make_shared<int>(0);
  cmd->add_option("--backend", *backend_name, "cpu, cuda or auto (cuda when a GPU is usable)")->capture_default_str();
  cmd->add_option("--threads", *threads, "CPU threads (0 = all)")->transform(decimal_integer())->capture_default_str();
  cmd->callback([backend_name, threads, &exit_code] {
    check_threads(*threads);
    QmvOptions options;
    options.threads = *threads;
    auto backend = make_backend(*backend_name, options);
    const bool gpu = backend->name() == "cuda";
    std::unique_ptr<Backend> mirror;
    if (gpu) mirror = make_cpu_backend(options);
    fmt::print("exactq demo on {}\n\n== parity: block vs chain, every output byte ==\n", backend->device_description());

    struct Case {
      std::int64_t n, k;
      int bits, group;
      DType dtype;
      std::int64_t m_max;
    };
    // Realistic layer shapes (Gemma q, Gemma kv, Qwen o) across widths, groups and dtypes.
    const std::vector<Case> cases = {{4096, 3840, 4, 64, DType::bf16, gpu ? 16 : 8},
                                     {2048, 3840, 3, 32, DType::f16, gpu ? 16 : 5},
                                     {5120, 5120, 8, 128, DType::f32, gpu ? 16 : 4},
                                     {2048, 3840, 6, 64, DType::bf16, gpu ? 16 : 4}};
    int worst = 0;
    std::vector<std::string> summaries;
    for (const Case& k : cases) {
      ParityConfig c;
      c.n = k.n;
      c.k = k.k;
      c.bits = k.bits;
      c.group = k.group;
      c.dtype = k.dtype;
      c.m_max = k.m_max;
      c.seeds = {1, 2};
      c.options = options;
      c.print_rows = false;
      if (mirror) c.against = "cpu";
      const ParityResult r = run_parity(c, *backend, mirror.get());
      fmt::print("{}\n\n", r.summary);
      summaries.push_back(r.summary);
      worst = std::max(worst, r.exit_code());
    }

    fmt::print("== benchmark ==\n");
    BenchConfig b;
    b.shapes = parse_shapes(gpu ? "gemma12b,big" : "cpu-default");
    b.ms = gpu ? std::vector<std::int64_t>{1, 2, 3, 4, 5, 6, 8, 12, 16} : std::vector<std::int64_t>{1, 2, 4, 8};
    b.repeats = gpu ? 20 : 3;
    run_bench(b, *backend);

    fmt::print("\n== summary ==\n");
    for (const auto& s : summaries) fmt::print("{}\n", s);
    exit_code = worst;
  });
}

}  // namespace
}  // namespace exactq::cli

int main(int argc, char** argv) {
  using namespace exactq::cli;
  CLI::App app{"exactq: width-invariant quantized mat-vec (MLX affine format) on CUDA and CPU"};
  app.require_subcommand(1);
  int exit_code = 0;
  add_demo_command(app, exit_code);
  add_parity_command(app, exit_code);
  add_bench_command(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "exactq: error: {}\n", e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    fmt::print(stderr, "exactq: error: {}\n", e.what());
    return kExitFailed;
  }
  return exit_code;
}
