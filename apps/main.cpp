// exactq: width-invariant quantized mat-vec. One binary, subcommands:
//   demo    the main job: parity and a benchmark on the backend present (the README's first command)
//   parity  block vs chain byte parity with a negative control
//   bench   timing against a same-run read ceiling
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "bench.h"
#include "cli_common.h"
#include "demo.h"
#include "make_model.h"
#include "parity.h"

int main(int argc, char** argv) {
  using namespace exactq::cli;
  CLI::App app{"exactq: width-invariant quantized mat-vec (MLX affine format) on CUDA and CPU"};
  app.require_subcommand(1);
  int exit_code = 0;
  add_demo_command(app, exit_code);
  add_parity_command(app, exit_code);
  add_bench_command(app, exit_code);
  add_make_model_command(app, exit_code);
  add_convert_command(app, exit_code);
  add_inspect_command(app, exit_code);
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
