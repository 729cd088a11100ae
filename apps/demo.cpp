// `exactq demo`, the main job: the trained pair completing code with classic and speculative
// decode, block-versus-chain byte parity on realistic layer shapes, a benchmark, then classic
// against speculative decode of a made checkpoint, on the backend present (CUDA where a GPU is
// usable, the CPU mirror otherwise).
#include <algorithm>

#include <fmt/format.h>

#include "bench.h"
#include "demo.h"
#include "parity.h"

namespace exactq::cli {

void add_demo_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("demo", "The main job: parity, a benchmark, and classic vs speculative decode, on the backend present");
  auto backend_name = std::make_shared<std::string>("auto");
  auto threads = std::make_shared<int>(0);
  auto models = std::make_shared<std::string>("models");
  add_text_option(cmd, "--backend", *backend_name, "cpu, cuda or auto (cuda when a GPU is usable)");
  add_integer_option(cmd, "--threads", *threads, "CPU threads (0 = all)");
  add_text_option(cmd, "--models", *models, "the directory holding the trained pair (default: models)");
  cmd->callback([backend_name, threads, models, &exit_code] {
    check_threads(*threads);
    QmvOptions options;
    options.threads = *threads;
    auto backend = make_backend(*backend_name, options);
    const bool gpu = backend->name() == "cuda";
    std::unique_ptr<Backend> mirror;
    if (gpu) mirror = make_cpu_backend(options);
    fmt::print("exactq demo on {}\n\n", backend->description());
    std::vector<std::string> summaries;
    int worst = run_pair_demo(*backend, *models, summaries);

    fmt::print("== parity: block vs chain, every output byte ==\n");

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
    auto timer = bench::make_timer(backend->name(), options);
    run_bench(b, *timer);

    fmt::print("\n");
    worst = std::max(worst, run_engine_demo(*backend, *threads, summaries));

    fmt::print("== summary ==\n");
    for (const auto& s : summaries) fmt::print("{}\n", s);
    exit_code = worst;
  });
}

}  // namespace exactq::cli
