// The end-to-end half of `exactq demo`: a make-model checkpoint (tiny on the CPU, the Llama 3 8B
// shape on a GPU), the exactness probe, then classic greedy decode against speculative decode of
// the same prompt: self-drafting (every draft must be accepted) and the replay instrument at
// acceptance about 0.9 (a controlled drafter, for the speed-up), each compared byte for byte.
#include <filesystem>
#include <random>

#include <fmt/format.h>
#include <unistd.h>

#include "demo.h"
#include "exactq/checkpoint_writer.h"
#include "exactq/probe.h"
#include "exactq/speculative.h"

namespace exactq::cli {

namespace {

double rate(const GreedyResult& r) {
  return r.decode_seconds > 0 ? double(r.tokens.size() - 1) / r.decode_seconds : 0.0;
}

}  // namespace

int run_engine_demo(Backend& backend, int threads, std::vector<std::string>& summaries) {
  const bool gpu = backend.name() == "cuda";
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("exactq-demo-{}", ::getpid());
  struct Cleanup {
    fs::path p;
    ~Cleanup() {
      std::error_code ignored;
      fs::remove_all(p, ignored);
    }
  } cleanup{dir};
  MakeModelOptions m;
  m.arch = "llama";
  m.shape = gpu ? "llama3-8b" : "tiny";
  m.seed = 1;
  m.threads = threads;
  fmt::print("== end to end: a make-model checkpoint ({} {}, 4-bit, random weights) ==\n", m.arch, m.shape);
  std::fflush(stdout);
  make_model(m, dir.string());
  const Checkpoint checkpoint = Checkpoint::open(dir.string());
  const std::int64_t vocab = checkpoint.embed_tokens().n;
  std::mt19937_64 rng(7);
  std::vector<std::int32_t> prompt(24);
  for (auto& t : prompt) t = std::int32_t(rng() % std::uint64_t(vocab));
  GreedyOptions options;
  options.max_tokens = gpu ? 128 : 48;
  const std::int64_t block = 5;
  int worst = 0;
  for (KernelFamily family : {KernelFamily::exact, KernelFamily::mma}) {
    Decoder target(backend, checkpoint, {family, 1024});
    ProbeOptions p;
    p.blocks = {block};
    p.draws = 2;
    const bool equal = probe(backend, checkpoint, family, p).equal();
    const GreedyResult classic = greedy_decode(target, prompt, options);
    auto compare = [&](const char* what, Drafter& drafter) {
      const SpeculativeResult s = speculative_decode(target, drafter, prompt, options, {block, false});
      const bool identical = s.tokens == classic.tokens && s.stop == classic.stop;
      const std::string line = fmt::format(
          "{} {}: probe {}; classic {:.1f} tok/s; speculative ({}, block {}) {:.1f} tok/s, acceptance {:.3f}, "
          "{:.2f} tokens/round, speed-up {:.2f}x; output identical to classic: {}",
          backend.name(), to_string(family), equal ? "equal" : "DIVERGES", rate(classic), what, block, rate(s),
          s.acceptance(), s.tokens_per_round(), rate(classic) > 0 ? rate(s) / rate(classic) : 0.0,
          identical ? "yes" : "NO");
      fmt::print("{}\n", line);
      std::fflush(stdout);
      summaries.push_back(line);
      if (!identical || !equal) worst = 1;
    };
    ReplayDrafter replay(classic.tokens, 0.1, 1, vocab);
    compare("replay instrument, rate 0.1", replay);
    if (!gpu) {  // a draft as large as the target: every draft accepted, no speed-up expected
      Decoder draft(backend, checkpoint, {family, 1024});
      DraftModelDrafter self(draft, target);
      compare("the model drafting for itself", self);
    }
  }
  fmt::print("\n");
  return worst;
}

}  // namespace exactq::cli
