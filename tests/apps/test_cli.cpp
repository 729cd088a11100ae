// The `exactq parity` command line, run as a child process (path in EXACTQ_CLI): exit status
// 0 with a PASS line on a valid shape, 2 with the offending value named on bad arguments, 3 when
// the shape is too small for the negative control to fire, and a JSON report via --json.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/cli_runner.h"
#include "test_util.h"

namespace exactq::test {
namespace {

TEST(Cli, ParityPassesOnValidShape) {
  // One fixed seed and one fresh one (the CLI's seeds must be non-negative 63-bit integers).
  const std::uint64_t fresh = fresh_seed() % 1000000007;
  SCOPED_TRACE(seed_note(fresh));
  const Outcome o = run_cli("parity --n 37 --k 320 --dtype f32 --m-max 4 --seeds 1," + std::to_string(fresh));
  EXPECT_EQ(o.exit_code, 0) << o.output;
  EXPECT_TRUE(contains(o.output, "\nPASS  37x320 4-bit g64 f32 [cpu]")) << o.output;
  EXPECT_FALSE(contains(o.output, "FAIL")) << o.output;
  // Negative control in the same run: the summary reports differing bytes for qmv_wide.
  EXPECT_FALSE(contains(o.output, "negative control qmv_wide vs qmv: 0 of")) << o.output;
}

TEST(Cli, BadArgumentsExit2NamingTheValue) {
  const struct {
    const char* args;
    const char* needle;
  } cases[] = {
      {"parity --bits 7", "bits = 7"},
      {"parity --k 100", "K = 100"},
      {"parity --kernels foo", "'foo'"},
      {"parity --n abc", "abc"},
      {"parity --n 0", "N = 0"},
      {"parity --group 48", "group = 48"},
      {"parity --dtype fp8", "'fp8'"},
      {"parity --seeds x", "'x'"},
      {"parity --m-max 0", "--m-max 0"},
      {"parity --vmax 0 --n 8 --k 64", "--vmax 0"},
      {"parity --kernels qmv,qmv", "given twice"},
      {"parity --mma-layout rows", "'rows'"},
      {"bench --backend cpu --shapes 16x256 --m 1 --mma-layout rows", "'rows'"},
      // Integers are base 10 only (CLI11 alone reads 0x20 as 32 and 010 as 8).
      {"parity --n 0x20", "'0x20'"},
      {"parity --bits 0b100", "'0b100'"},
      {"parity --n 99999999999999999999", "'99999999999999999999'"},
      {"parity --threads 5000", "--threads 5000"},
      {"bench --backend cpu --shapes 16x256 --m 1 --threads -1", "--threads -1"},
      {"bench --backend cpu --shapes 16x256 --m 1 --sustain -1", "--sustain -1"},
      {"bench --backend cpu --shapes 16x256 --m 1 --sustain 61", "--sustain 61"},
      {"bench --backend cpu --shapes 16x256 --m 1 --sustain nan", "--sustain: 'nan' is not a decimal number"},
      // qmv_wide alone would be a PASS that checked nothing.
      {"parity --kernels qmv_wide --n 64 --k 512", "no width-invariant kernel"},
      // Sizes the host cannot hold are refused before any allocation.
      {"parity --n 1000000 --k 1000000", "1000000x1000000"},
      {"bench --backend cpu --shapes 64x2147483584 --m 4096", "64x2147483584"},
      // Result files that could not be written are refused before the run.
      {"parity --n 8 --k 64 --json /nonexistent-exactq-dir/p.json", "/nonexistent-exactq-dir/p.json"},
      {"bench --backend cpu --shapes 16x256 --m 1 --markdown /nonexistent-exactq-dir/b.md", "--markdown"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    const Outcome o = run_cli(c.args);
    EXPECT_EQ(o.exit_code, 2) << o.output;
    EXPECT_TRUE(contains(o.output, c.needle)) << o.output;
  }
  // Control: the same kind of command with valid values succeeds.
  EXPECT_EQ(run_cli("parity --n 16 --k 256 --bits 3 --group 32 --dtype f32 --m-max 2 --seeds 5").exit_code, 0);
}

TEST(Cli, IntegersWithLeadingZerosAreDecimal) {
  // CLI11 alone would read --n 010 as octal 8 and --k 0128 as an error; base 10 gives 10x128.
  const Outcome zeros = run_cli("parity --n 010 --k 0128 --dtype f32 --m-max 1 --seeds 1");
  const Outcome plain = run_cli("parity --n 10 --k 128 --dtype f32 --m-max 1 --seeds 1");
  EXPECT_TRUE(contains(zeros.output, ": 10x128 4-bit")) << zeros.output;
  EXPECT_TRUE(contains(plain.output, ": 10x128 4-bit")) << plain.output;
  EXPECT_EQ(zeros.exit_code, plain.exit_code);
}

TEST(Cli, TinyShapeIsInconclusive) {
  // One row of one 32-value chunk, M = 1, bf16 outputs: both orders reduce to nearly the same
  // handful of roundings, and with seed 1 the outputs agree on every byte (checked when this
  // test was written), so the negative control cannot fire: exit 3, not a PASS.
  const Outcome o = run_cli("parity --n 1 --k 32 --group 32 --dtype bf16 --m-max 1 --seeds 1");
  EXPECT_EQ(o.exit_code, 3) << o.output;
  EXPECT_TRUE(contains(o.output, "\nINCONCLUSIVE  1x32 4-bit g32 bf16")) << o.output;
  EXPECT_FALSE(contains(o.output, "PASS")) << o.output;
}

TEST(Cli, JsonReportHasTheNegativeControl) {
  const std::uint64_t fresh = fresh_seed() % 1000000007;
  SCOPED_TRACE(seed_note(fresh));
  TempFile pass_file("exactq-parity-pass"), tiny_file("exactq-parity-tiny");

  const Outcome pass = run_cli("parity --n 24 --k 256 --dtype f32 --m-max 3 --seeds 2," + std::to_string(fresh) +
                               " --json '" + pass_file.path.string() + "'");
  ASSERT_EQ(pass.exit_code, 0) << pass.output;
  std::ifstream in(pass_file.path);
  ASSERT_TRUE(in.good()) << "no JSON written at " << pass_file.path;
  const nlohmann::json j = nlohmann::json::parse(in);  // throws (fails the test) if not valid JSON
  ASSERT_TRUE(j.contains("negative_control"));
  const auto& control = j["negative_control"];
  EXPECT_TRUE(control["fired"].get<bool>());
  EXPECT_GT(control["differing_bytes"].get<std::int64_t>(), 0);
  EXPECT_LE(control["differing_bytes"].get<std::int64_t>(), control["bytes"].get<std::int64_t>());
  EXPECT_EQ(j["exit_code"].get<int>(), 0);
  EXPECT_EQ(j["config"]["n"].get<int>(), 24);
  EXPECT_EQ(j["config"]["dtype"].get<std::string>(), "f32");
  ASSERT_TRUE(j["kernels"].is_array());
  EXPECT_EQ(j["kernels"].size(), 3u);
  for (const auto& k : j["kernels"]) {
    if (!k["exact_family"].get<bool>()) continue;
    EXPECT_EQ(k["per_m"].size(), 3u);
    for (const auto& row : k["per_m"]) {
      EXPECT_EQ(row["differing_bytes_vs_chain"].get<std::int64_t>(), 0) << k["kernel"];
      EXPECT_EQ(row["differing_bytes_vs_qmv"].get<std::int64_t>(), 0) << k["kernel"];
      EXPECT_GT(row["bytes"].get<std::int64_t>(), 0);
    }
  }

  // Negative control: the inconclusive run reports the control as not fired.
  const Outcome tiny = run_cli("parity --n 1 --k 32 --group 32 --dtype bf16 --m-max 1 --seeds 1 --json '" +
                               tiny_file.path.string() + "'");
  ASSERT_EQ(tiny.exit_code, 3) << tiny.output;
  std::ifstream tin(tiny_file.path);
  const nlohmann::json t = nlohmann::json::parse(tin);
  EXPECT_FALSE(t["negative_control"]["fired"].get<bool>());
  EXPECT_EQ(t["negative_control"]["differing_bytes"].get<std::int64_t>(), 0);
  EXPECT_EQ(t["exit_code"].get<int>(), 3);
}

// `exactq bench --json` records each point's output bytes as a digest, so two builds can be
// compared bitwise: qmv_streamed keeps qmv's bits, so its digests equal qmv's at every M, while
// qmv_wide sums in another order and (at f32 outputs on this shape) differs (the control).
TEST(Cli, BenchDigestsTellOrdersApart) {
  TempFile file("exactq-bench-digests");
  const Outcome out = run_cli("bench --backend cpu --shapes 257x2048 --m 1-4 --kernels qmv,qmv_streamed,qmv_wide "
                              "--dtype f32 --repeats 1 --json '" + file.path.string() + "'");
  ASSERT_EQ(out.exit_code, 0) << out.output;
  std::ifstream in(file.path);
  const nlohmann::json j = nlohmann::json::parse(in);
  std::map<std::string, std::string> digest;  // "kernel M" -> digest
  auto at = [&](const std::string& kernel, std::int64_t m) { return digest[kernel + " " + std::to_string(m)]; };
  for (const auto& row : j["rows"]) {
    const std::string d = row["output_digest"].get<std::string>();
    EXPECT_EQ(d.size(), 16u) << d;
    digest[row["kernel"].get<std::string>() + " " + std::to_string(row["m"].get<std::int64_t>())] = d;
  }
  ASSERT_EQ(digest.size(), 12u);
  int wide_differs = 0;
  for (std::int64_t m = 1; m <= 4; ++m) {
    EXPECT_EQ(at("qmv_streamed", m), at("qmv", m)) << "M = " << m;
    wide_differs += at("qmv_wide", m) != at("qmv", m);
  }
  EXPECT_GT(wide_differs, 0) << "the digests do not tell qmv_wide's order from qmv's";
}

// --sustain runs each point's launches untimed for that long before timing it: the size-matched
// read and every (kernel, M) point each take at least that long, and the report records it.
TEST(Cli, BenchSustainRunsEachPointFirst) {
  TempFile file("exactq-bench-sustain");
  const double sustain = 0.2 + 0.1 * double(fresh_seed() % 3);
  SCOPED_TRACE("sustain " + std::to_string(sustain));
  const auto start = std::chrono::steady_clock::now();
  const Outcome out = run_cli("bench --backend cpu --shapes 33x320 --m 1,2 --kernels qmv --repeats 1 --sustain " +
                              std::to_string(sustain) + " --json '" + file.path.string() + "'");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(out.exit_code, 0) << out.output;
  EXPECT_TRUE(contains(out.output, "--sustain")) << out.output;
  std::ifstream in(file.path);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_NEAR(j["config"]["sustain_seconds"].get<double>(), sustain, 1e-9);
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_GE(seconds, 2 * sustain) << "two points were timed, each after `sustain` seconds of untimed launches";
}

// The main job on the CPU ends with classic against speculative decode of a made checkpoint:
// the probe equal and every speculative output identical to classic's (exact and mma; the replay
// instrument and the model drafting for itself).
TEST(Cli, DemoComparesClassicAndSpeculativeDecode) {
  const Outcome o = run_cli("demo --backend cpu", "", 600);
  EXPECT_EQ(o.exit_code, 0) << o.output;
  std::size_t identical = 0;
  for (std::size_t at = 0; (at = o.output.find("probe equal; classic", at)) != std::string::npos; ++at) {
    const std::size_t end = o.output.find('\n', at);
    identical += contains(o.output.substr(at, end - at), "output identical to classic: yes");
  }
  EXPECT_EQ(identical, 2u * 4u) << "4 comparisons, each printed as it runs and again in the summary\n" << o.output;
}

}  // namespace
}  // namespace exactq::test
