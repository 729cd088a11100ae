// Hostile values on the exactq command line: each is refused before any work with exit 2 and a
// message naming the option or the value, and no value makes the CLI loop, wrap or run unasked.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "apps/cli_runner.h"

namespace exactq::test {
namespace {

// A bound on the address space of runs that must end quickly: a list parser that grows without
// end fails inside it instead of taking the machine's memory.
const std::string kSmallMemory = address_space_limit(1000000);

// Quick, valid runs that a tested option is added to: any accepted value ends in seconds.
const std::string kParity = "parity --n 24 --k 256 --dtype f32 --m-max 2 --seeds 1";
const std::string kBench = "bench --backend cpu --shapes 16x256 --m 1 --kernels qmv --repeats 1";

// `base` ("SUB --a 1 --b 2") without `--name VALUE`: an option given twice is refused on its own.
std::string without(const std::string& base, const std::string& name) {
  std::istringstream words(base);
  std::string out, word;
  words >> out;
  while (words >> word) {
    std::string value;
    words >> value;
    if (word != name) out += " " + word + " " + value;
  }
  return out;
}

// `base` with `extra` ("--seeds 5-3") in place of the options `extra` names.
std::string with(const std::string& base, const std::string& extra) {
  std::istringstream words(extra);
  std::string out = base, word;
  while (words >> word)
    if (word.rfind("--", 0) == 0) out = without(out, word);
  return out + " " + extra;
}

TEST(CliArguments, RangeEndingAtTheInt64MaximumEnds) {
  // The last value of int64 as both ends: one seed, one width; the range loop must not step past it.
  const Outcome seeds = run_cli(with(kParity, "--seeds 9223372036854775807-9223372036854775807"), kSmallMemory, 60);
  EXPECT_EQ(seeds.exit_code, 0) << seeds.output;
  EXPECT_TRUE(contains(seeds.output, "\nPASS  24x256")) << seeds.output;
  const Outcome widths =
      run_cli(with(kBench, "--m 9223372036854775807-9223372036854775807"), kSmallMemory, 60);
  EXPECT_EQ(widths.exit_code, 2) << widths.output;
  EXPECT_TRUE(contains(widths.output, "--m: 9223372036854775807 is out of range")) << widths.output;
}

TEST(CliArguments, ListsRefuseReversedHugeAndRepeatedItems) {
  const struct {
    std::string args, needle;
  } cases[] = {
      {with(kParity, "--seeds 5-3"), "--seeds: range '5-3' is reversed"},
      {with(kBench, "--m 4-1"), "--m: range '4-1' is reversed"},
      // More items than any run: refused by count, naming it, without building the list.
      {with(kParity, "--seeds 1-100000"), "--seeds: range '1-100000' has 100000 items"},
      {with(kParity, "--seeds 0-9223372036854775807"), "has 9223372036854775808 items"},
      {with(kParity, "--seeds 1-3000,5001-8000"), "range '5001-8000' has 3000 items; with the 3000 before"},
      {with(kBench, "--m 1-8192"), "--m: range '1-8192' has 8192 items"},
      // A repeated width would time one point twice and report it twice.
      {with(kBench, "--m 1,2,1"), "--m: 1 given twice"},
      {with(kBench, "--m 1-4,3"), "--m: 3 given twice"},
      {with(kParity, "--seeds 7,7"), "--seeds: 7 given twice"},
      {with(kParity, "--seeds 1,,2"), "--seeds: empty item in '1,,2'"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    const Outcome o = run_cli(c.args, kSmallMemory, 60);
    EXPECT_EQ(o.exit_code, 2) << o.output;
    EXPECT_TRUE(contains(o.output, c.needle)) << o.output;
  }
  // Control: a list at the largest count runs (only parsed here: the shape is refused after it).
  const Outcome full = run_cli("parity --n 0 --seeds 1-4096", kSmallMemory, 60);
  EXPECT_EQ(full.exit_code, 2) << full.output;
  EXPECT_TRUE(contains(full.output, "N = 0")) << full.output;
}

// Options read into an int: a value past 32 bits is refused naming it and the int range, where
// a narrowing conversion would wrap it (4294967300 to 4).
TEST(CliArguments, IntegersOutsideTheirTypeAreRefusedNamingTheValue) {
  const struct {
    std::string base;
    std::vector<std::string> options;
  } commands[] = {{kParity, {"--bits", "--group", "--vmax", "--threads"}},
                  {kBench, {"--bits", "--group", "--repeats", "--vmax", "--threads"}},
                  {"demo", {"--threads"}}};
  for (const auto& c : commands)
    for (const std::string& option : c.options)
      for (const std::string value : {"4294967300", "2147483648", "-2147483649", "-4294967292"}) {
        const std::string args = with(c.base, option + " " + value);
        SCOPED_TRACE(args);
        const Outcome o = run_cli(args, "", 60);
        EXPECT_EQ(o.exit_code, 2) << o.output;
        EXPECT_TRUE(contains(o.output, option + ": '" + value + "' is out of range [-2147483648, 2147483647]")) << o.output;
      }
}

TEST(CliArguments, EmptyValuesAreRefusedNamingTheOption) {
  const struct {
    std::string args, needle;
  } cases[] = {
      {with(kParity, "--json ''"), "--json: empty path"},
      {with(kParity, "--against ''"), "--against: empty value"},
      {with(kBench, "--sustain ''"), "--sustain: empty value"},
      {with(kParity, "--seeds ''"), "--seeds: empty value"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    const Outcome o = run_cli(c.args, "", 60);
    EXPECT_EQ(o.exit_code, 2) << o.output;
    EXPECT_TRUE(contains(o.output, c.needle)) << o.output;
  }
}

TEST(CliArguments, SecondsAreDecimal) {
  // strtod alone reads 0x10 as 16 seconds per point.
  const Outcome o = run_cli(with(kBench, "--sustain 0x10"), "", 10);
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_TRUE(contains(o.output, "--sustain: '0x10' is not a decimal number")) << o.output;
  EXPECT_EQ(run_cli(with(kBench, "--sustain 0.01"), "", 60).exit_code, 0);
  EXPECT_EQ(run_cli(with(kBench, "--sustain 1e-2"), "", 60).exit_code, 0);
}

// Every option that takes a value, of the width-invariance subcommands (demo, parity, bench), as
// `exactq SUB --help` lists it (so an option added later is covered too): an empty value exits 2
// naming the option, and so does an integer beyond 64 bits. The narrower int options are tested
// above.
// The first and (where the pattern has one) second group of each line of `exactq ARGS --help`
// that `pattern` matches.
std::vector<std::pair<std::string, std::string>> help_matches(const std::string& args, const std::regex& pattern) {
  const Outcome help = run_cli(args + " --help", "", 30);
  EXPECT_EQ(help.exit_code, 0) << help.output;
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream lines(help.output);
  for (std::string text; std::getline(lines, text);) {
    std::smatch m;
    if (std::regex_search(text, m, pattern)) out.emplace_back(m[1].str(), m.size() > 2 ? m[2].str() : std::string());
  }
  return out;
}

TEST(CliArguments, EveryValueOptionRefusesEmptyAndOverflowingValues) {
  // Each starts from a quick valid run, so that a value wrongly accepted ends soon.
  const std::map<std::string, std::string> bases = {{"demo", "demo"}, {"parity", kParity}, {"bench", kBench}};
  for (const auto& [subcommand, base] : bases) {
    const auto options = help_matches(subcommand, std::regex(R"(^\s+(--[a-z0-9-]+) (TEXT|INT|FLOAT|UINT)\b)"));
    EXPECT_GE(options.size(), 2u) << subcommand;
    for (const auto& [name, type] : options) {
      SCOPED_TRACE(subcommand + " " + name);
      const Outcome empty = run_cli(with(base, name + " ''"), "", 60);
      EXPECT_EQ(empty.exit_code, 2) << empty.output;
      EXPECT_TRUE(contains(empty.output, name + ": empty")) << empty.output;
      if (type != "INT" && type != "UINT") continue;
      for (const std::string value : {"9223372036854775808", "-9223372036854775809"}) {
        const Outcome o = run_cli(with(base, name + " " + value), kSmallMemory, 60);
        EXPECT_EQ(o.exit_code, 2) << o.output;
        EXPECT_TRUE(contains(o.output, name + ": '" + value + "' is out of range")) << o.output;
      }
    }
  }
}

}  // namespace
}  // namespace exactq::test
