// `exactq bench-spec --model DIR [--block 2-8] [--acceptance 0.5,0.7,0.9] [--arms ...] [--draft DIR]`:
// every arm of decoding in one run, on the same model, prompts and drafts: classic decode with the
// exact and mma kernel families, and speculative decode with narrow, exact, mma and wide (the
// inexact arm). For each arm, block width and replay acceptance: decode tok/s, tokens per round,
// the mean verify round's µs, and whether the output equals classic decode's byte for byte on every
// prompt. Exit status 1 where a width-invariant arm leaves classic's output.
//
// The drafts come from the replay instrument (ReplayDrafter): classic decode's own output with a
// fraction 1 - acceptance of its tokens replaced, so that acceptance is a controlled variable. The
// width-invariant arms replay their reference's output; wide replays classic decode with its own
// family. Wide's verify rounds have other bits than its single-token steps, so where its output
// leaves that sequence the drafts no longer fit and its acceptance falls below the setting: its
// round time, not its tok/s, is then the fair comparison. It is a benchmark instrument, not a
// drafter: its speed-ups are the upper bound for a drafter of that acceptance, which costs nothing
// to run.
//
// References. Each arm is compared with classic decode of its own kernel family, the output that
// speculative decoding guarantees: narrow has qmv's bits at every width, so its classic decode is
// classic exact's; mma has its own bits, so spec-mma is checked against classic-mma (and whether it
// also equals classic-exact is recorded). The inexact wide arm is compared with classic exact, the
// output a user of the exact stack gets. Classic decode is measured once per family and prompt and
// appears in every (block, acceptance) row, as the baseline of that row.
#include "bench_spec.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "exactq/decoder.h"
#include "exactq/generate.h"
#include "exactq/speculative.h"
#include "exactq/tokenizer.h"

namespace exactq::cli {

namespace {

struct Args {
  std::string model, draft, blocks = "2-8", acceptances = "0.5,0.7,0.9", backend = "auto", json, markdown, plot;
  std::string prompt_file;  // real prompts (text, encoded with the model's tokenizer) instead of random tokens
  std::string arms = "classic-exact,classic-mma,spec-narrow,spec-exact,spec-mma,spec-wide";
  std::string prompt_length = "32";  // a length, or a range LO-HI of mixed lengths
  std::int64_t prompts = 4, tokens = 128;
  std::uint64_t seed = 1;
  int threads = 0;
};

enum class Kind : std::uint8_t { classic, replay, draft };

struct Arm {
  std::string name;
  KernelFamily family;
  Kind kind;
  // Must give its reference's output byte for byte (a failed check otherwise).
  bool checked() const { return kind != Kind::classic && is_width_invariant(family); }
  // The family of the classic decode it is compared with (and whose output it replays).
  KernelFamily reference() const { return family == KernelFamily::mma ? KernelFamily::mma : KernelFamily::exact; }
  // The classic decode its replay drafts come from: its own family's (for wide, its prefill and
  // single-token steps; its verify rounds may still leave that output, see the file comment).
  KernelFamily replay_source() const { return family == KernelFamily::wide ? KernelFamily::wide : reference(); }
};

const std::vector<Arm>& all_arms() {
  static const std::vector<Arm> arms = {
      {"classic-exact", KernelFamily::exact, Kind::classic}, {"classic-mma", KernelFamily::mma, Kind::classic},
      {"spec-narrow", KernelFamily::narrow, Kind::replay},   {"spec-exact", KernelFamily::exact, Kind::replay},
      {"spec-mma", KernelFamily::mma, Kind::replay},         {"spec-wide", KernelFamily::wide, Kind::replay},
      {"draft-exact", KernelFamily::exact, Kind::draft},     {"draft-mma", KernelFamily::mma, Kind::draft}};
  return arms;
}

std::string reference_name(const Arm& arm) {
  if (arm.kind == Kind::classic) return "classic-exact";
  return "classic-" + std::string(to_string(arm.reference()));
}

std::vector<Arm> parse_arms(const std::string& text, bool draft) {
  std::vector<Arm> arms;
  std::size_t at = 0;
  for (;;) {
    const std::size_t comma = text.find(',', at);
    const std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    const auto& known = all_arms();
    const auto it = std::find_if(known.begin(), known.end(), [&](const Arm& a) { return a.name == item && a.kind != Kind::draft; });
    if (it == known.end())
      throw std::invalid_argument(fmt::format("--arms: unknown arm '{}' (one of classic-exact, classic-mma, spec-narrow, "
                                              "spec-exact, spec-mma, spec-wide)",
                                              item));
    if (std::any_of(arms.begin(), arms.end(), [&](const Arm& a) { return a.name == item; }))
      throw std::invalid_argument(fmt::format("--arms: '{}' is given twice", item));
    arms.push_back(*it);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (draft)
    for (const Arm& a : all_arms())
      if (a.kind == Kind::draft) arms.push_back(a);
  // The canonical order, whatever the order given.
  std::vector<Arm> ordered;
  for (const Arm& a : all_arms())
    if (std::any_of(arms.begin(), arms.end(), [&](const Arm& b) { return b.name == a.name; })) ordered.push_back(a);
  return ordered;
}

std::vector<double> parse_acceptances(const std::string& text) {
  std::vector<double> out;
  std::size_t at = 0;
  for (;;) {
    const std::size_t comma = text.find(',', at);
    const std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    double v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size())
      throw std::invalid_argument(fmt::format("--acceptance: '{}' is not a decimal number", item));
    if (!(v >= 0 && v <= 1)) throw std::invalid_argument(fmt::format("--acceptance: {} is out of range [0, 1]", item));
    if (std::find(out.begin(), out.end(), v) != out.end())
      throw std::invalid_argument(fmt::format("--acceptance: {} is given twice", item));
    out.push_back(v);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

// One arm at one (block, acceptance), summed over the prompts.
struct Row {
  const Arm* arm = nullptr;
  std::int64_t block = 0;
  double acceptance = 0;  // the replay instrument's setting (the fraction of reference tokens kept)
  std::int64_t decoded = 0, rounds = 0, drafted = 0, accepted = 0;
  double seconds = 0;
  std::int64_t identical = 0, equals_classic_exact = 0;
  std::vector<std::int64_t> first_difference;  // per prompt: the first differing output position, -1 where equal

  double tokens_per_second() const { return seconds > 0 ? double(decoded) / seconds : 0.0; }
  double tokens_per_round() const { return rounds > 0 ? double(decoded) / double(rounds) : 0.0; }
  double round_us() const { return rounds > 0 ? seconds / double(rounds) * 1e6 : 0.0; }
  double measured_acceptance() const { return drafted > 0 ? double(accepted) / double(drafted) : 0.0; }
};

// The first output position where two generations differ; -1 where they are the same.
std::int64_t first_difference(const GreedyResult& x, const GreedyResult& ref) {
  std::size_t i = 0;
  while (i < x.tokens.size() && i < ref.tokens.size() && x.tokens[i] == ref.tokens[i]) ++i;
  if (i == x.tokens.size() && i == ref.tokens.size() && x.stop == ref.stop) return -1;
  return std::int64_t(i);
}

void add(Row& row, const GreedyResult& r, std::int64_t rounds, const GreedyResult& ref, const GreedyResult& exact_ref) {
  const std::int64_t decoded = std::int64_t(r.tokens.size()) - 1;
  row.decoded += decoded;
  row.rounds += rounds;
  row.seconds += r.decode_seconds;
  const std::int64_t at = first_difference(r, ref);
  row.identical += at < 0;
  row.first_difference.push_back(at);
  row.equals_classic_exact += first_difference(r, exact_ref) < 0;
}

std::string format_acceptance(double a) { return fmt::format("{:g}", a); }

std::string svg(const nlohmann::json& j) {
  // One panel per replay acceptance: decode tok/s against block width, one line per arm.
  const auto& rows = j["rows"];
  std::vector<double> accs = j["config"]["acceptances"].get<std::vector<double>>();
  std::vector<std::int64_t> blocks = j["config"]["blocks"].get<std::vector<std::int64_t>>();
  std::vector<std::string> arms;
  double top = 0;
  for (const auto& r : rows) {
    const auto name = r["arm"].get<std::string>();
    if (std::find(arms.begin(), arms.end(), name) == arms.end()) arms.push_back(name);
    top = std::max(top, r["tokens_per_second"].get<double>());
  }
  top = top > 0 ? top * 1.1 : 1.0;
  const std::int64_t b_lo = *std::min_element(blocks.begin(), blocks.end());
  const std::int64_t b_hi = *std::max_element(blocks.begin(), blocks.end());
  const std::map<std::string, const char*> colors = {
      {"classic-exact", "#7f7f7f"}, {"classic-mma", "#bcbd22"}, {"spec-narrow", "#2ca02c"}, {"spec-exact", "#1f77b4"},
      {"spec-mma", "#9467bd"},      {"spec-wide", "#d62728"},   {"draft-exact", "#17becf"}, {"draft-mma", "#ff7f0e"}};
  const int cols = int(std::min<std::size_t>(accs.size(), 3)), cw = 360, ch = 260, pad = 55;
  const int rows_n = int((accs.size() + cols - 1) / cols);
  const int legend_h = 20 * int((arms.size() + 3) / 4) + 30;
  std::string s = fmt::format(
      "<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' font-family='sans-serif' font-size='11'>\n"
      "<rect width='100%' height='100%' fill='white'/>\n"
      "<text x='10' y='16' font-size='13' font-weight='bold'>exactq bench-spec: decode tok/s against block width "
      "({}, {})</text>\n",
      std::max(cols * cw, 4 * 170), rows_n * ch + legend_h + 25, j["config"]["model_type"].get<std::string>(),
      j["config"]["device"].get<std::string>());
  for (std::size_t ai = 0; ai < accs.size(); ++ai) {
    const int ox = int(ai % cols) * cw, oy = 25 + int(ai / cols) * ch;
    const int x0 = ox + pad, y0 = oy + ch - 35, w = cw - pad - 20, h = ch - 70;
    auto px = [&](double b) { return x0 + (b_hi > b_lo ? (b - double(b_lo)) / double(b_hi - b_lo) : 0.5) * w; };
    auto py = [&](double v) { return y0 - v / top * h; };
    s += fmt::format("<text x='{}' y='{}' font-weight='bold'>replay acceptance {} (instrument)</text>\n", x0, oy + 18,
                     format_acceptance(accs[ai]));
    s += fmt::format("<line x1='{}' y1='{}' x2='{}' y2='{}' stroke='black'/>\n", x0, y0, x0 + w, y0);
    s += fmt::format("<line x1='{}' y1='{}' x2='{}' y2='{}' stroke='black'/>\n", x0, y0, x0, y0 - h);
    for (double f : {0.0, 0.5, 1.0}) {
      const double v = top / 1.1 * f;
      s += fmt::format("<text x='{}' y='{:.1f}' text-anchor='end'>{:.0f}</text>\n", x0 - 4, py(v) + 4, v);
      s += fmt::format("<line x1='{}' y1='{:.1f}' x2='{}' y2='{:.1f}' stroke='#ddd'/>\n", x0, py(v), x0 + w, py(v));
    }
    for (std::int64_t b : blocks)
      s += fmt::format("<text x='{:.1f}' y='{}' text-anchor='middle'>{}</text>\n", px(double(b)), y0 + 14, b);
    s += fmt::format("<text x='{}' y='{}' text-anchor='middle'>block width</text>\n", x0 + w / 2, y0 + 28);
    s += fmt::format("<text x='{}' y='{}' transform='rotate(-90 {} {})' text-anchor='middle'>tok/s</text>\n", ox + 14,
                     y0 - h / 2, ox + 14, y0 - h / 2);
    for (const std::string& arm : arms) {
      std::string points;
      for (const auto& r : rows)
        if (r["arm"] == arm && r["acceptance_setting"].get<double>() == accs[ai])
          points += fmt::format("{:.1f},{:.1f} ", px(double(r["block"].get<std::int64_t>())),
                                py(r["tokens_per_second"].get<double>()));
      const bool inexact = arm == "spec-wide", classic = arm.starts_with("classic");
      s += fmt::format("<polyline fill='none' stroke='{}' stroke-width='2'{} points='{}'/>\n", colors.at(arm),
                       inexact ? " stroke-dasharray='6,3'" : classic ? " stroke-dasharray='2,2'" : "", points);
    }
  }
  const int ly = 25 + rows_n * ch + 10;
  for (std::size_t i = 0; i < arms.size(); ++i)
    s += fmt::format("<text x='{}' y='{}' fill='{}'>&#9632; {}{}</text>\n", 10 + 170 * int(i % 4), ly + 20 * int(i / 4),
                     colors.at(arms[i]), arms[i], arms[i] == "spec-wide" ? " (inexact)" : "");
  s += fmt::format("<text x='10' y='{}' fill='#555'>Drafts: the replay instrument (classic decode's output with a "
                   "fraction 1 - acceptance replaced), not a drafter; classic arms do not depend on block or acceptance."
                   "</text>\n",
                   ly + 20 * int((arms.size() + 3) / 4) + 8);
  return s + "</svg>\n";
}

// --prompt-length: N, or LO-HI (mixed lengths), each in [1, 2^20].
std::pair<std::int64_t, std::int64_t> parse_prompt_length(const std::string& text) {
  const std::size_t dash = text.find('-');
  const std::int64_t lo = parse_int(text.substr(0, dash), "--prompt-length");
  const std::int64_t hi = dash == std::string::npos ? lo : parse_int(text.substr(dash + 1), "--prompt-length");
  for (std::int64_t v : {lo, hi})
    if (v < 1 || v > (std::int64_t(1) << 20))
      throw std::invalid_argument(fmt::format("--prompt-length: {} is out of range [1, 1048576]", v));
  if (lo > hi) throw std::invalid_argument(fmt::format("--prompt-length: range '{}' is reversed", text));
  return {lo, hi};
}

// --prompt-file: {"prompts": [...]} or a bare array; each entry a text or an object with "text".
// The texts are encoded with the model's tokenizer.json, as `generate --prompt` encodes them.
std::vector<std::vector<std::int32_t>> prompts_from_file(const std::string& path, const std::string& model) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(fmt::format("--prompt-file: cannot open '{}'", path));
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) throw std::invalid_argument(fmt::format("--prompt-file: '{}' is not JSON", path));
  const nlohmann::json& list = j.is_object() && j.contains("prompts") ? j["prompts"] : j;
  if (!list.is_array() || list.empty())
    throw std::invalid_argument(fmt::format("--prompt-file: '{}' holds no prompts (a \"prompts\" array or a bare array)", path));
  if (list.size() > 4096) throw std::invalid_argument(fmt::format("--prompt-file: {} prompts, at most 4096", list.size()));
  if (!std::filesystem::exists(std::filesystem::path(model) / "tokenizer.json"))
    throw std::invalid_argument(fmt::format("--prompt-file: '{}' has no tokenizer.json to encode the prompts with", model));
  const Tokenizer tokenizer = Tokenizer::open(model);
  std::vector<std::vector<std::int32_t>> prompts;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& e = list[i].is_object() && list[i].contains("text") ? list[i]["text"] : list[i];
    if (!e.is_string())
      throw std::invalid_argument(fmt::format("--prompt-file: prompt {} of '{}' is not a text (a string or {{\"text\": ...}})", i, path));
    prompts.push_back(tokenizer.encode(e.get<std::string>()));
    if (prompts.back().empty())
      throw std::invalid_argument(fmt::format("--prompt-file: prompt {} of '{}' encodes to no tokens", i, path));
    if (prompts.back().size() > (std::size_t(1) << 20))
      throw std::invalid_argument(fmt::format("--prompt-file: prompt {} of '{}' is {} tokens, over 1048576", i, path, prompts.back().size()));
  }
  return prompts;
}

int run(const Args& a) {
  check_outputs({{"--json", a.json}, {"--markdown", a.markdown}, {"--plot", a.plot}});
  check_threads(a.threads);
  const std::vector<std::int64_t> blocks = parse_int_list(a.blocks, "--block");
  for (std::int64_t b : blocks)
    if (b < kMinBlock || b > kMaxBlock)
      throw std::invalid_argument(fmt::format("--block: {} is out of range [{}, {}]", b, kMinBlock, kMaxBlock));
  const std::vector<double> accs = parse_acceptances(a.acceptances);
  const std::vector<Arm> arms = parse_arms(a.arms, !a.draft.empty());
  // A bad prompt file is refused before the weights are opened.
  std::vector<std::vector<std::int32_t>> prompts;
  if (!a.prompt_file.empty()) prompts = prompts_from_file(a.prompt_file, a.model);
  const Checkpoint checkpoint = Checkpoint::open(a.model);
  std::optional<Checkpoint> draft_checkpoint;
  if (!a.draft.empty()) draft_checkpoint = Checkpoint::open(a.draft);
  const ModelConfig& config = checkpoint.config();
  QmvOptions qmv_options;
  qmv_options.threads = a.threads;
  auto backend = make_backend(a.backend, qmv_options);
  const std::int64_t vocab = checkpoint.embed_tokens().n;
  const auto [shortest, longest] = parse_prompt_length(a.prompt_length);

  std::mt19937_64 rng(a.seed);
  std::string prompt_source;
  if (!a.prompt_file.empty()) {
    for (std::size_t i = 0; i < prompts.size(); ++i)
      for (std::int32_t t : prompts[i])
        if (t < 0 || t >= vocab)
          throw std::invalid_argument(fmt::format("--prompt-file: prompt {} encodes to token {}, outside the model's "
                                                  "vocabulary of {}", i, t, vocab));
    prompt_source = fmt::format("{} prompts from {}", prompts.size(), a.prompt_file);
  } else {
    std::uniform_int_distribution<std::int32_t> pick(0, std::int32_t(vocab - 1));
    std::uniform_int_distribution<std::int64_t> length(shortest, longest);
    prompts.resize(static_cast<std::size_t>(a.prompts));
    for (auto& p : prompts) {
      p.resize(static_cast<std::size_t>(shortest == longest ? shortest : length(rng)));
      for (auto& t : p) t = pick(rng);
    }
    prompt_source = fmt::format("{} prompts of {} random tokens (seed {})", prompts.size(), a.prompt_length, a.seed);
  }
  std::vector<std::int64_t> prompt_lengths;
  for (const auto& p : prompts) prompt_lengths.push_back(std::int64_t(p.size()));
  const std::int64_t context = *std::max_element(prompt_lengths.begin(), prompt_lengths.end()) + a.tokens +
                               *std::max_element(blocks.begin(), blocks.end()) + 1;
  GreedyOptions options;
  options.max_tokens = a.tokens;  // stop ids off: every run generates the same number of tokens

  const std::size_t P = prompts.size();
  std::size_t total = 0, done = 0;
  for (const Arm& arm : arms)
    total += arm.kind == Kind::classic ? 0 : P * blocks.size() * (arm.kind == Kind::replay ? accs.size() : 1);
  const bool mma_needed = std::any_of(arms.begin(), arms.end(), [](const Arm& x) { return x.family == KernelFamily::mma; });
  const bool wide_needed = std::any_of(arms.begin(), arms.end(), [](const Arm& x) { return x.family == KernelFamily::wide; });
  total += P * (1 + std::size_t(mma_needed) + std::size_t(wide_needed));
  const bool tty = isatty(2) != 0;
  // Identity as it is found, so that a long run stopped early still says what it checked.
  std::int64_t checked_runs = 0, checked_differing = 0, inexact_differing = 0;
  auto progress = [&](const std::string& what) {
    ++done;
    const std::string tally = fmt::format("(checked runs {}, differing {}; inexact differing {})", checked_runs,
                                          checked_differing, inexact_differing);
    if (tty)
      fmt::print(stderr, "\r[{}/{}] {:<50} {}", done, total, what, tally);
    else if (done == total || done % P == 0)
      fmt::print(stderr, "bench-spec: [{}/{}] {} {}\n", done, total, what, tally);
    std::fflush(stderr);
  };
  auto check = [&](const Arm& arm, const GreedyResult& r, const GreedyResult& ref, const std::string& what) {
    const std::int64_t at = first_difference(r, ref);
    if (!arm.checked()) {
      inexact_differing += at >= 0;
      return;
    }
    ++checked_runs;
    if (at < 0) return;
    ++checked_differing;
    fmt::print(stderr, "{}bench-spec: DIFFERS: {} leaves {}'s output at position {}\n", tty ? "\n" : "", what,
               reference_name(arm), at);
  };

  fmt::print("exactq bench-spec {} ({}), {}: {}, {} tokens each, stop ids off\n", a.model, config.model_type,
             backend->description(), prompt_source, a.tokens);
  fmt::print("drafts: the replay instrument (a benchmark instrument, not a drafter): classic decode's own output with "
             "a fraction 1 - acceptance of its tokens replaced\n");
  std::fflush(stdout);

  // Classic decode per family and prompt: the references and the classic arms.
  std::map<KernelFamily, std::vector<GreedyResult>> classic;
  std::map<std::pair<std::string, std::int64_t>, std::map<double, Row>> rows;  // (arm, block) -> acceptance -> row
  auto row_for = [&](const Arm& arm, std::int64_t block, double acc) -> Row& {
    Row& r = rows[{arm.name, block}][acc];
    r.arm = &arm;
    r.block = block;
    r.acceptance = acc;
    return r;
  };
  for (KernelFamily family : {KernelFamily::exact, KernelFamily::narrow, KernelFamily::mma, KernelFamily::wide}) {
    const bool classic_here = family == KernelFamily::exact || (family == KernelFamily::mma && mma_needed) ||
                              (family == KernelFamily::wide && wide_needed);
    if (!classic_here && std::none_of(arms.begin(), arms.end(), [&](const Arm& x) { return x.family == family; })) continue;
    Decoder decoder(*backend, checkpoint, {family, context});
    std::unique_ptr<Decoder> draft_decoder;
    // Warm-up, untimed: the first forwards of a decoder pay one-time costs (allocation, graph capture).
    {
      GreedyOptions warm;
      warm.max_tokens = std::min<std::int64_t>(a.tokens, 8);
      greedy_decode(decoder, prompts[0], warm);
    }
    if (classic_here) {
      for (std::size_t p = 0; p < P; ++p) {
        classic[family].push_back(greedy_decode(decoder, prompts[p], options));
        progress(fmt::format("classic-{} prompt {}", to_string(family), p + 1));
      }
    }
    for (const Arm& arm : arms) {
      if (arm.family != family) continue;
      const std::vector<GreedyResult>& ref = classic.at(arm.reference());
      const std::vector<GreedyResult>& exact_ref = classic.at(KernelFamily::exact);
      if (arm.kind == Kind::classic) {
        for (std::int64_t b : blocks)
          for (double acc : accs) {
            Row& r = row_for(arm, b, acc);
            for (std::size_t p = 0; p < P; ++p) {
              const GreedyResult& g = classic.at(family)[p];
              add(r, g, std::int64_t(g.tokens.size()) - 1, exact_ref[p], exact_ref[p]);
            }
          }
        continue;
      }
      std::unique_ptr<DraftModelDrafter> draft_drafter;
      if (arm.kind == Kind::draft) {
        draft_decoder = std::make_unique<Decoder>(*backend, *draft_checkpoint, DecoderOptions{family, context});
        try {
          draft_drafter = std::make_unique<DraftModelDrafter>(*draft_decoder, decoder);
        } catch (const std::invalid_argument& e) {
          throw std::invalid_argument("--draft '" + a.draft + "': " + e.what());
        }
      }
      for (std::int64_t b : blocks) {
        const SpeculativeOptions spec{b, /*allow_inexact=*/!is_width_invariant(family)};
        if (arm.kind == Kind::draft) {
          Row measured;
          for (std::size_t p = 0; p < P; ++p) {
            const SpeculativeResult r = speculative_decode(decoder, *draft_drafter, prompts[p], options, spec);
            add(measured, r, r.rounds, ref[p], exact_ref[p]);
            measured.drafted += r.drafted;
            measured.accepted += r.accepted;
            const std::string what = fmt::format("{} block {} prompt {}", arm.name, b, p + 1);
            check(arm, r, ref[p], what);
            progress(what);
          }
          for (double acc : accs) {
            Row& r = row_for(arm, b, acc);
            const Row keep = r;
            r = measured;
            r.arm = keep.arm, r.block = keep.block, r.acceptance = keep.acceptance;
          }
          continue;
        }
        for (double acc : accs) {
          Row& row = row_for(arm, b, acc);
          for (std::size_t p = 0; p < P; ++p) {
            ReplayDrafter drafter(classic.at(arm.replay_source())[p].tokens, 1.0 - acc, a.seed + p, vocab);
            const SpeculativeResult r = speculative_decode(decoder, drafter, prompts[p], options, spec);
            add(row, r, r.rounds, ref[p], exact_ref[p]);
            row.drafted += r.drafted;
            row.accepted += r.accepted;
            const std::string what = fmt::format("{} block {} acceptance {} prompt {}", arm.name, b, format_acceptance(acc), p + 1);
            check(arm, r, ref[p], what);
            progress(what);
          }
        }
      }
    }
  }
  if (tty) fmt::print(stderr, "\r\x1b[2K");  // clears the whole progress line

  // The table: classic arms once (they do not depend on block or acceptance), draft arms once per block.
  double classic_rate = 0;
  {
    Row exact_classic;
    for (const GreedyResult& g : classic.at(KernelFamily::exact)) add(exact_classic, g, 0, g, g);
    classic_rate = exact_classic.tokens_per_second();
  }
  std::string table = fmt::format("{:<14} {:>5} {:>6} {:>9} {:>9} {:>8} {:>10} {:>9}  {:<10} {}\n", "arm", "block",
                                  "replay", "tok/s", "tok/round", "accepted", "round us", "x classic", "identical",
                                  "reference");
  nlohmann::json json_rows = nlohmann::json::array();
  std::string md = "| arm | block | replay acceptance | tok/s | tokens/round | accepted | round µs | × classic exact | "
                   "identical (prompts) | reference |\n|---|---|---|---|---|---|---|---|---|---|\n";
  for (const Arm& arm : arms)
    for (std::int64_t b : blocks)
      for (double acc : accs) {
        const Row& r = rows.at({arm.name, b}).at(acc);
        const double speedup = classic_rate > 0 ? r.tokens_per_second() / classic_rate : 0.0;
        nlohmann::json j = {{"arm", arm.name},
                            {"kind", arm.kind == Kind::classic ? "classic" : arm.kind == Kind::replay ? "replay" : "draft"},
                            {"kernels", to_string(arm.family)},
                            {"block", b},
                            {"acceptance_setting", acc},
                            {"inexact", !is_width_invariant(arm.family)},
                            {"tokens_per_second", r.tokens_per_second()},
                            {"decode_tokens", r.decoded},
                            {"decode_seconds", r.seconds},
                            {"rounds", r.rounds},
                            {"tokens_per_round", r.tokens_per_round()},
                            {"round_us", r.round_us()},
                            {"speedup_vs_classic_exact", speedup},
                            {"reference", reference_name(arm)},
                            {"identical", r.identical == std::int64_t(P)},
                            {"identical_prompts", r.identical},
                            {"equals_classic_exact_prompts", r.equals_classic_exact},
                            {"first_difference", r.first_difference}};
        if (arm.kind != Kind::classic)
          j.update({{"drafted", r.drafted}, {"accepted", r.accepted}, {"acceptance", r.measured_acceptance()}});
        if (arm.kind != Kind::replay) j["measured_once"] = arm.kind == Kind::classic ? "per prompt" : "per prompt and block";
        json_rows.push_back(j);
        const bool shown = arm.kind == Kind::replay || (acc == accs[0] && (arm.kind == Kind::draft || b == blocks[0]));
        if (!shown) continue;
        const std::string block_s = arm.kind == Kind::classic ? "-" : std::to_string(b);
        const std::string acc_s = arm.kind == Kind::replay ? format_acceptance(acc) : "-";
        const std::string accepted_s = arm.kind == Kind::classic ? "-" : fmt::format("{:.3f}", r.measured_acceptance());
        const std::string ident = fmt::format("{} {}/{}", r.identical == std::int64_t(P) ? "yes" : "NO", r.identical, P);
        const std::string name = arm.name + (is_width_invariant(arm.family) ? "" : "*");
        table += fmt::format("{:<14} {:>5} {:>6} {:>9.1f} {:>9.2f} {:>8} {:>10.1f} {:>9.2f}  {:<10} {}\n", name, block_s,
                             acc_s, r.tokens_per_second(), r.tokens_per_round(), accepted_s, r.round_us(), speedup,
                             ident, reference_name(arm));
        md += fmt::format("| {} | {} | {} | {:.1f} | {:.2f} | {} | {:.1f} | {:.2f}× | {} | {} |\n",
                          is_width_invariant(arm.family) ? arm.name : arm.name + " (inexact)", block_s, acc_s,
                          r.tokens_per_second(), r.tokens_per_round(), accepted_s, r.round_us(), speedup, ident,
                          reference_name(arm));
      }
  fmt::print("{}", table);
  if (std::any_of(arms.begin(), arms.end(), [](const Arm& x) { return !is_width_invariant(x.family); }))
    fmt::print("* inexact (run with allow_inexact): not width-invariant, may differ from classic decode\n");

  // Exactness per arm, over every (block, acceptance) run and prompt.
  std::string summary;
  nlohmann::json json_arms = nlohmann::json::array();
  bool failed = false;
  for (const Arm& arm : arms) {
    std::vector<bool> prompt_ok(P, true);
    std::int64_t runs = 0, differ = 0;
    std::string first;
    for (std::int64_t b : blocks)
      for (double acc : accs) {
        const Row& r = rows.at({arm.name, b}).at(acc);
        // Replicated rows (classic, draft across acceptances) are one run each.
        const bool counted = arm.kind == Kind::replay || (acc == accs[0] && (arm.kind == Kind::draft || b == blocks[0]));
        for (std::size_t p = 0; p < P; ++p) {
          if (r.first_difference[p] < 0) {
            runs += counted;
            continue;
          }
          prompt_ok[p] = false;
          if (!counted) continue;
          ++runs, ++differ;
          if (first.empty())
            first = fmt::format("first at output position {} (prompt {}{}{})", r.first_difference[p], p + 1,
                                arm.kind == Kind::classic ? "" : fmt::format(", block {}", b),
                                arm.kind == Kind::replay ? ", acceptance " + format_acceptance(acc) : "");
        }
      }
    const std::int64_t ok = std::count(prompt_ok.begin(), prompt_ok.end(), true);
    const bool identical = differ == 0;
    std::string line = fmt::format("{:<14} {} {}: {} ({} of {} prompts", arm.name,
                                   arm.kind == Kind::classic ? "equals" : "identical to", reference_name(arm),
                                   identical ? "yes" : "no", ok, P);
    if (arm.kind != Kind::classic) line += fmt::format(", {} of {} runs", runs - differ, runs);
    line += ")";
    if (!identical) line += "; " + first;
    if (arm.kind == Kind::classic)
      line += arm.family == KernelFamily::exact ? " (the reference)" : " (its own bits: recorded, not a check)";
    else if (!arm.checked())
      line += identical ? " (inexact; the negative control did not show at these settings)" : " (inexact: expected)";
    else if (!identical) {
      line += " FAILED";
      failed = true;
    }
    summary += line + "\n";
    json_arms.push_back({{"arm", arm.name}, {"reference", reference_name(arm)}, {"identical", identical},
                         {"identical_prompts", ok}, {"prompts", P}, {"runs", runs}, {"differing_runs", differ},
                         {"checked", arm.checked()}, {"first_difference", first}});
  }
  const std::string verdict = failed ? "verdict: FAILED: a width-invariant arm left classic decode's output"
                                     : "verdict: every width-invariant speculative arm is byte-identical to classic decode";
  fmt::print("exactness (each arm's output against classic decode's, byte for byte, every prompt):\n{}{}\n", summary, verdict);

  nlohmann::json j = {
      {"config",
       {{"model", a.model}, {"model_type", config.model_type}, {"backend", backend->name()},
        {"device", backend->description()}, {"prompts", P},
        {"prompt_length", a.prompt_file.empty() ? a.prompt_length : "from --prompt-file"},
        {"prompt_lengths", prompt_lengths}, {"tokens", a.tokens},
        {"seed", a.seed}, {"blocks", blocks}, {"acceptances", accs}, {"stop_ids", "off"}}},
      {"instrument",
       "replay: a benchmark instrument, not a drafter; it drafts classic decode's own output (of the arm's reference "
       "family; of wide for spec-wide) with a fraction 1 - acceptance_setting of its tokens replaced"},
      {"prompt_ids", prompts},
      {"rows", json_rows},
      {"arms", json_arms},
      {"identical", !failed}};
  if (!a.draft.empty()) j["config"]["draft"] = a.draft;
  if (!a.prompt_file.empty()) j["config"]["prompt_file"] = a.prompt_file;
  if (!a.json.empty()) write_json(a.json, j);
  if (!a.markdown.empty()) {
    std::string text = fmt::format(
        "Model: `{}` ({}). Device: {}. {}, {} tokens each, stop ids off.\n\n"
        "Drafts: the **replay instrument**, a benchmark instrument and not a drafter: classic decode's own output with "
        "a fraction 1 − acceptance of its tokens replaced. Its speed-ups are the upper bound for a drafter of that "
        "acceptance. Classic arms do not depend on block or acceptance. A round is one verify forward (a classic "
        "step for classic arms).\n\n",
        a.model, config.model_type, backend->description(), prompt_source, a.tokens);
    text += md + "\nExactness (every prompt, every run):\n\n```\n" + summary + verdict + "\n```\n";
    write_text(a.markdown, text);
  }
  if (!a.plot.empty()) write_text(a.plot, svg(j));
  return failed ? kExitFailed : 0;
}

}  // namespace

void add_bench_spec_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("bench-spec",
                                 "Every decoding arm in one run: speed, and byte identity with classic decode");
  cmd->footer(
      "Arms: classic-exact, classic-mma (classic decode), spec-narrow, spec-exact, spec-mma, spec-wide (speculative\n"
      "decode; wide is not width-invariant and runs with allow_inexact, labelled inexact). --draft DIR adds\n"
      "draft-exact and draft-mma (a real draft model). Drafts of the spec- arms come from the replay instrument, a\n"
      "benchmark instrument and not a drafter: classic decode's own output with a fraction 1 - acceptance of its\n"
      "tokens replaced, so acceptance is a controlled variable. Each arm is compared, byte for byte on every prompt,\n"
      "with classic decode of its family (narrow and wide: classic-exact).\n"
      "Exit status: 0 measured and every width-invariant arm identical, 1 one differs or a run failed, 2 bad arguments.");
  auto a = std::make_shared<Args>();
  add_text_option(cmd, "--model", a->model, "the model directory")->required();
  add_text_option(cmd, "--block", a->blocks, "verify block widths, a range 2-8 (default) or a list 2,4,8 (2..64)");
  add_text_option(cmd, "--acceptance", a->acceptances,
                  "replay instrument settings: the fraction of classic decode's tokens kept in the drafts, each in "
                  "[0, 1] (default 0.5,0.7,0.9)");
  add_text_option(cmd, "--arms", a->arms,
                  "arms to run (default all six): classic-exact,classic-mma,spec-narrow,spec-exact,spec-mma,spec-wide");
  add_text_option(cmd, "--draft", a->draft, "also run draft-exact and draft-mma with this draft model (same vocabulary)");
  auto* count = add_integer_option(cmd, "--prompts", a->prompts, "random prompts (default 4)")
                    ->check(CLI::Range(std::int64_t(1), std::int64_t(4096)));
  auto* length = add_text_option(cmd, "--prompt-length", a->prompt_length,
                                 "tokens per prompt (default 32), or a range LO-HI: each prompt's length drawn from the seed");
  add_path_option(cmd, "--prompt-file", a->prompt_file,
                  "real prompts instead of random ones: JSON, {\"prompts\": [text or {\"text\": ...}, ...]}, encoded with "
                  "the model's tokenizer.json")
      ->excludes(length)
      ->excludes(count);
  add_integer_option(cmd, "--tokens", a->tokens, "tokens generated per run (default 128)")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 20));
  add_integer_option(cmd, "--seed", a->seed, "the prompts' and the replaced tokens' seed (default 1)");
  add_text_option(cmd, "--backend", a->backend, "auto (default), cuda or cpu")->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  add_integer_option(cmd, "--threads", a->threads, "CPU threads (0: all)");
  add_path_option(cmd, "--json", a->json, "also write the results as JSON to this file");
  add_path_option(cmd, "--markdown", a->markdown, "also write the table and exactness summary as markdown");
  add_path_option(cmd, "--plot", a->plot, "also write tok/s against block width per arm as SVG (a panel per acceptance)");
  cmd->callback([a, &exit_code] { exit_code = run(*a); });
}

}  // namespace exactq::cli
