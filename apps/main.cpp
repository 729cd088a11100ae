// exactq: width-invariant quantized inference. One binary, subcommands:
//   demo        the main job: parity and a benchmark on the backend present (the README's first command)
//   parity      block vs chain byte parity with a negative control
//   bench       timing against a same-run read ceiling
//   make-model, convert, inspect   checkpoints in the mlx-community layout
//   generate    greedy generation from a checkpoint
//   tokenize    a model's tokenizer alone: text to ids and back
//   probe       the exactness probe: K single steps against one K-wide forward
//   bench-decode  classic greedy decode speed against the same-run read ceiling
//   bench-spec  every decoding arm in one run: speed, and byte identity with classic decode
//   serve       an OpenAI-compatible HTTP server, every response the solo run's
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string_view>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "bench.h"
#include "bench_decode.h"
#include "bench_serve.h"
#include "bench_spec.h"
#include "cli_common.h"
#include "demo.h"
#include "generate.h"
#include "make_model.h"
#include "parity.h"
#include "probe.h"
#include "serve.h"
#include "tokenize.h"

namespace {

using namespace exactq::cli;

// An error on stderr, after what the run printed on stdout so far (a captured 2>&1 log keeps the order).
int report(int code, std::string_view message) {
  std::fflush(stdout);
  fmt::print(stderr, "exactq: error: {}\n", message);
  return code;
}

// The report on stdout is the product of a run: where it could not be written (a full disk,
// /dev/full), the run says so instead of exiting 0 with the report lost in the stream's buffer.
bool stdout_written() {
  if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return true;
  fmt::print(stderr, "exactq: error: could not write the standard output ({})\n", std::strerror(errno));
  return false;
}

// "--name=" with nothing after '=': CLI11 would take the next argument as its value (another
// option, say) and complain about something else; refused here, naming the option.
void refuse_empty_assignments(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") return;
    if (arg.size() > 3 && arg.starts_with("--") && arg.ends_with('=') && arg.find('=') == arg.size() - 1)
      throw std::invalid_argument(fmt::format("{}: the value after '=' is empty (give {}VALUE or {} VALUE)", arg, arg,
                                              arg.substr(0, arg.size() - 1)));
  }
}

// Parses and runs the subcommand (its callback); the exit status.
int parse_and_run(CLI::App& app, int argc, char** argv, const int& exit_code) {
  try {
    refuse_empty_assignments(argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  } catch (const std::invalid_argument& e) {
    return report(kExitUsage, e.what());
  } catch (const std::bad_alloc&) {
    // The pre-checks bound the problem, not every buffer of a run (e.g. bench's read-ceiling buffer).
    return report(kExitFailed,
                  "out of memory: an allocation failed during the run; use a smaller shape or fewer vectors, or "
                  "give the process more memory");
  } catch (const std::exception& e) {
    return report(kExitFailed, e.what());
  }
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"exactq: width-invariant quantized mat-vec (MLX affine format) on CUDA and CPU"};
  app.require_subcommand(1);
  int exit_code = 0;
  add_demo_command(app, exit_code);
  add_parity_command(app, exit_code);
  add_bench_command(app, exit_code);
  add_make_model_command(app, exit_code);
  add_convert_command(app, exit_code);
  add_inspect_command(app, exit_code);
  add_generate_command(app, exit_code);
  add_tokenize_command(app, exit_code);
  add_probe_command(app, exit_code);
  add_bench_decode_command(app, exit_code);
  add_bench_spec_command(app, exit_code);
  add_bench_serve_command(app, exit_code);
  add_serve_command(app, exit_code);
  const int code = parse_and_run(app, argc, argv, exit_code);
  return stdout_written() ? code : std::max(code, kExitFailed);
}
