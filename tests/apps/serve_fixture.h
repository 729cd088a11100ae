// `exactq serve` as a child process on the loopback for the server tests: started on --port 0
// (its first stdout line is the address), bounded in time, killed when the test ends; plus HTTP
// helpers and the solo reference, `exactq generate` of the same request.
#pragma once

#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "apps/cli_runner.h"

namespace exactq::test {

inline const std::string kTarget = std::string(EXACTQ_SOURCE_DIR) + "/models/pycode-target";
inline const std::string kDraft = std::string(EXACTQ_SOURCE_DIR) + "/models/pycode-draft";

class ServeProcess {
 public:
  // `exactq serve --backend cpu --port 0 ARGS...`; fails the test where no address comes within
  // `seconds`.
  // ignore_sigint: started as a shell starts a background job, with SIGINT ignored.
  explicit ServeProcess(std::vector<std::string> args, int seconds = 60, bool ignore_sigint = false)
      : log_("exactq-serve-log", ".txt") {
    int out[2];
    if (pipe(out) != 0) throw std::runtime_error("pipe");
    pid_ = fork();
    if (pid_ == 0) {
      if (ignore_sigint) signal(SIGINT, SIG_IGN);
      dup2(out[1], 1);
      const int err = open(log_.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(err, 2);
      close(out[0]);
      std::vector<std::string> all = {EXACTQ_CLI, "serve", "--backend", "cpu", "--port", "0"};
      all.insert(all.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (auto& s : all) argv.push_back(s.data());
      argv.push_back(nullptr);
      execv(EXACTQ_CLI, argv.data());
      _exit(127);
    }
    close(out[1]);
    stdout_ = out[0];
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (line.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      pollfd p{stdout_, POLLIN, 0};
      if (poll(&p, 1, 200) <= 0) continue;
      char c;
      if (read(stdout_, &c, 1) != 1) break;
      line += c;
    }
    if (line.rfind("http://", 0) != 0 || line.back() != '\n') {
      ADD_FAILURE() << "exactq serve gave no address: '" << line << "'\n" << log();
      return;
    }
    url_ = line.substr(0, line.size() - 1);
    const auto colon = url_.rfind(':');
    host_ = url_.substr(7, colon - 7);
    port_ = std::stoi(url_.substr(colon + 1));
  }
  ~ServeProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (stdout_ >= 0) close(stdout_);
  }
  bool ok() const { return port_ > 0; }
  const std::string& url() const { return url_; }
  httplib::Client client(int read_seconds = 60) const {
    httplib::Client c(host_, port_);
    c.set_read_timeout(read_seconds, 0);
    c.set_connection_timeout(5, 0);
    return c;
  }
  std::string log() const {
    std::ifstream in(log_.path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // Whether the log shows `text` within `seconds`: a request's line is written after its
  // response, so a client may read the response before the line is there.
  bool log_shows(const std::string& text, int seconds = 10) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (log().find(text) == std::string::npos) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }
  // Sends `signal` and waits up to `seconds` for the exit: the exit status, -1 for a signal's end
  // or a process that had to be killed.
  int stop(int signal, int seconds) {
    kill(pid_, signal);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    int status = 0;
    while (std::chrono::steady_clock::now() < deadline) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;  // the destructor kills it
  }

 private:
  TempFile log_;
  pid_t pid_ = -1;
  int stdout_ = -1;
  std::string url_, host_;
  int port_ = 0;
};

struct Solo {
  std::vector<std::int32_t> prompt_ids, output_ids;
  std::string text, stop;
};

// `exactq generate` of one prompt alone (classic decode, the tokenizer's EOS as its stop).
inline Solo solo_run(const std::string& prompt_args, std::int64_t max_tokens) {
  TempFile json("exactq-serve-solo", ".json");
  const Outcome o = run_cli("generate --backend cpu --model '" + kTarget + "' " + prompt_args + " --max-tokens " +
                                std::to_string(max_tokens) + " --json " + json.quoted() + " > /dev/null",
                            "", 60);
  EXPECT_EQ(o.exit_code, 0) << o.output;
  std::ifstream in(json.path);
  const auto j = nlohmann::json::parse(in, nullptr, false);
  Solo s;
  if (!j.is_object()) return s;
  s.prompt_ids = j["prompt_ids"].get<std::vector<std::int32_t>>();
  s.output_ids = j["output_ids"].get<std::vector<std::int32_t>>();
  s.text = j["text"].get<std::string>();
  s.stop = j["stop"].get<std::string>();
  return s;
}

inline std::string ids_text(const std::vector<std::int32_t>& ids) {
  std::string s;
  for (auto id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

// A response body's choice equal to the solo run: the same token ids and the same text.
inline bool same_as_solo(const nlohmann::json& response, const Solo& solo) {
  if (!response.is_object() || !response.contains("choices")) return false;
  const auto& c = response["choices"][0];
  return c["token_ids"].get<std::vector<std::int32_t>>() == solo.output_ids && c["text"] == solo.text &&
         response["usage"]["prompt_tokens"] == solo.prompt_ids.size() &&
         response["usage"]["completion_tokens"] == solo.output_ids.size();
}

}  // namespace exactq::test
