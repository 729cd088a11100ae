// What the exactq CLI needs from the machine: result files it can write, and memory for the
// problem. What cannot serve is refused before the work with exit 2, naming the option and path
// or the sizes; a write that fails after the work exits 1 naming the path; memory running out
// after the checks is reported in words, exit 1.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "apps/cli_runner.h"

namespace exactq::test {
namespace {

const std::string kParity = "parity --n 24 --k 256 --dtype f32 --m-max 1 --seeds 1 --kernels qmv";
const std::string kBench = "bench --backend cpu --shapes 16x256 --m 1 --kernels qmv --repeats 1";

TEST(CliResources, FilesThatCannotBeRegularOutputsAreRefusedFirst) {
  TempFile fifo("exactq-fifo", ""), folder("exactq-folder", "");
  ASSERT_EQ(mkfifo(fifo.path.c_str(), 0600), 0);
  std::filesystem::create_directory(folder.path);
  const std::string long_name =
      (std::filesystem::temp_directory_path() / (std::string(300, 'n') + ".json")).string();
  const struct {
    std::string args, needles[2];
  } cases[] = {
      // Opening a FIFO for writing waits for a reader: it must be refused without being opened.
      {kParity + " --json " + fifo.quoted(), {"--json: '" + fifo.path.string() + "' is a FIFO", "regular file"}},
      {kParity + " --json " + folder.quoted(), {"--json: '" + folder.path.string() + "' is a directory", ""}},
      {kParity + " --json " + long_name, {"--json: '" + long_name + "'", "File name too long"}},
      {kBench + " --markdown /dev/full", {"--markdown: '/dev/full' is a character device", "regular file"}},
      {kBench + " --plot /dev/null", {"--plot: '/dev/null' is a character device", ""}},
      {kBench + " --json /nonexistent-exactq-dir/b.json", {"--json: the folder of '/nonexistent-exactq-dir/b.json'", ""}},
      {kBench + " --json " + folder.quoted() + "/", {"--json: '" + folder.path.string() + "/' is a directory", ""}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    const Outcome o = run_cli(c.args, "", 20);
    EXPECT_EQ(o.exit_code, 2) << o.output;
    for (const std::string& needle : c.needles) EXPECT_TRUE(contains(o.output, needle)) << needle << "\n" << o.output;
    EXPECT_FALSE(contains(o.output, "PASS")) << "the work ran before the refusal:\n" << o.output;
  }
}

TEST(CliResources, OneFileNamedTwiceIsRefused) {
  TempFile file("exactq-twice", ".txt");
  const Outcome o = run_cli(kBench + " --json " + file.quoted() + " --markdown " + file.quoted(), "", 20);
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_TRUE(contains(o.output, "--markdown: '" + file.path.string() + "' is also the --json file")) << o.output;
}

// A write that fails after the checks (here a file size limit of 0, its signal ignored so that the
// write reports EFBIG) fails the run, naming the path, even when the text is shorter than the
// stream's buffer and so only reaches the file when it is closed.
TEST(CliResources, FailedWriteAfterTheWorkExits1NamingThePath) {
  TempFile json("exactq-efbig"), markdown("exactq-efbig", ".md");
  const std::string no_file_size = "trap '' XFSZ; ulimit -f 0;";
  const Outcome p = run_cli(kParity + " --json " + json.quoted(), no_file_size, 60);
  EXPECT_EQ(p.exit_code, 1) << p.output;
  EXPECT_TRUE(contains(p.output, "PASS")) << "the work ran first:\n" << p.output;
  EXPECT_TRUE(contains(p.output, "exactq: error: could not write '" + json.path.string() + "'")) << p.output;
  const Outcome b = run_cli(kBench + " --markdown " + markdown.quoted(), no_file_size, 60);
  EXPECT_EQ(b.exit_code, 1) << b.output;
  EXPECT_TRUE(contains(b.output, "exactq: error: could not write '" + markdown.path.string() + "'")) << b.output;
  // Control: the same runs without the limit write their files and exit 0.
  EXPECT_EQ(run_cli(kParity + " --json " + json.quoted(), "", 60).exit_code, 0);
  EXPECT_EQ(run_cli(kBench + " --markdown " + markdown.quoted(), "", 60).exit_code, 0);
  EXPECT_GT(std::filesystem::file_size(markdown.path), 0u);
}

TEST(CliResources, StdoutThatCannotBeWrittenExits1) {
  const Outcome o = run_cli(kParity + " > /dev/full", "", 60);
  EXPECT_EQ(o.exit_code, 1) << o.output;
  EXPECT_TRUE(contains(o.output, "exactq: error: could not write the standard output")) << o.output;
}

// The pre-check compares with what this process can get, not with the machine's RAM: under an
// address-space or data limit of about 2 GB, a 32768x32768 problem (about 5.4 GB) is refused before
// any allocation, naming the sizes and what is available.
TEST(CliResources, ProblemLargerThanTheProcessMayHoldIsRefusedFirst) {
  if (kSanitized) GTEST_SKIP() << "a sanitized binary cannot start under an address-space or data limit";
  for (const std::string limit : {"ulimit -v 2000000;", "ulimit -d 2000000;"}) {
    SCOPED_TRACE(limit);
    const Outcome o = run_cli("parity --n 32768 --k 32768 --m-max 1 --seeds 1", limit, 60);
    EXPECT_EQ(o.exit_code, 2) << o.output;
    EXPECT_TRUE(contains(o.output, "parity: 32768x32768 with M = 1 needs about 5.4 GB of host memory")) << o.output;
    EXPECT_TRUE(contains(o.output, "GB is available")) << o.output;
  }
}

// Memory that runs out after the pre-check (here bench's 256 MiB CPU read-ceiling buffer under a
// 200 MB address-space limit; the problem itself is tiny) is reported in words, exit 1.
TEST(CliResources, AllocationFailureIsReportedInWords) {
  if (kSanitized) GTEST_SKIP() << "a sanitized binary cannot start under an address-space limit";
  const Outcome o = run_cli(kBench, "ulimit -v 200000;", 60);
  EXPECT_EQ(o.exit_code, 1) << o.output;
  EXPECT_TRUE(contains(o.output, "exactq: error: out of memory")) << o.output;
  EXPECT_EQ(run_cli(kBench, "", 60).exit_code, 0);
}

}  // namespace
}  // namespace exactq::test
