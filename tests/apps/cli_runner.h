// Runs the exactq binary (path in EXACTQ_CLI) as a child process through /bin/sh and captures
// what it prints, for the CLI tests.
#pragma once

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "test_util.h"

namespace exactq::test {

struct Outcome {
  int exit_code = -1;  // -1: ended by a signal
  std::string output;  // stdout and stderr together
};

// `exactq ARGS`, stderr into the captured stdout. ARGS is shell text (quote with '...'); a
// redirection of stdout in it applies after stderr was joined, so `> /dev/full` leaves stderr
// captured. `before` is shell run first in the same shell (e.g. "ulimit -v 200000;"), so a limit
// applies to this run alone. Every run is bounded in time (exit 124 when it runs out, 137 when it
// must be killed), so a hang fails the test instead of stopping the suite.
inline Outcome run_cli(const std::string& args, const std::string& before = "", int seconds = 120) {
  const std::string command = before + " exec timeout -k 5 " + std::to_string(seconds) + " '" + EXACTQ_CLI +
                              "' 2>&1 " + args;
  Outcome o;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "popen failed for " << command;
    return o;
  }
  char buffer[4096];
  std::size_t got;
  while ((got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) o.output.append(buffer, got);
  const int status = pclose(pipe);
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

// An address-space or data-segment limit can only apply to an unsanitized binary: AddressSanitizer
// reserves terabytes of shadow address space at start-up, so under such a limit the sanitized
// binary cannot start at all. Tests whose subject is that limit skip in the sanitized build (the
// plain build runs them); tests that use it only as a safety net run without it there.
#ifdef EXACTQ_TESTS_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// "ulimit -v KB;" for run_cli's `before`, or nothing in the sanitized build.
inline std::string address_space_limit(long kilobytes) {
  return kSanitized ? std::string() : "ulimit -v " + std::to_string(kilobytes) + ";";
}

inline bool contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

// A unique file name in the temp directory, removed when the object goes.
struct TempFile {
  std::filesystem::path path;
  explicit TempFile(const std::string& stem, const std::string& extension = ".json")
      : path(std::filesystem::temp_directory_path() / (stem + "-" + std::to_string(fresh_seed()) + extension)) {}
  ~TempFile() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  // For the shell; built by appending (GCC 12 warns falsely, -Wrestrict, on "'" + string + "'").
  std::string quoted() const {
    std::string text = "'";
    text += path.string();
    text += '\'';
    return text;
  }
};

}  // namespace exactq::test
