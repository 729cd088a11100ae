#include "cli_common.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <stdexcept>

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

namespace exactq::cli {

namespace {

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument(what); }

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  while (true) {
    const auto pos = s.find(sep);
    out.push_back(s.substr(0, pos));
    if (pos == std::string_view::npos) break;
    s.remove_prefix(pos + 1);
  }
  return out;
}

}  // namespace

CLI::Validator decimal_integer(std::int64_t lo, std::int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        if (text.empty()) return "empty value";
        const std::size_t sign = text[0] == '-' || text[0] == '+' ? 1 : 0;
        const std::string digits = text.substr(sign);
        if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
          return fmt::format("'{}' is not a base-10 integer", text);
        const std::size_t first = std::min(digits.find_first_not_of('0'), digits.size() - 1);
        const std::string normal = (text[0] == '-' ? "-" : "") + digits.substr(first);
        std::int64_t value = 0;
        const auto [end, ec] = std::from_chars(normal.data(), normal.data() + normal.size(), value);
        if (ec != std::errc() || end != normal.data() + normal.size() || value < lo || value > hi)
          return fmt::format("'{}' is out of range [{}, {}]", text, lo, hi);
        text = normal;
        return {};
      },
      "", "decimal");
}

namespace {

CLI::Validator non_empty(std::string message) {
  return CLI::Validator([message](std::string& text) { return text.empty() ? message : std::string(); }, "", "non-empty");
}

// Seconds as a decimal number (2, 0.5, 1e-2): strtod alone would also take 0x10 (16) and inf.
CLI::Validator decimal_number() {
  static const std::regex decimal(R"([+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)");
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (text.empty()) return "empty value";
        if (!std::regex_match(text, decimal)) return fmt::format("'{}' is not a decimal number", text);
        return {};
      },
      "", "decimal number");
}

}  // namespace

CLI::Option* add_text_option(CLI::App* cmd, const std::string& name, std::string& value, const std::string& description) {
  return cmd->add_option(name, value, description)->check(non_empty("empty value"))->capture_default_str();
}

CLI::Option* add_path_option(CLI::App* cmd, const std::string& name, std::string& path, const std::string& description) {
  return cmd->add_option(name, path, description)->check(non_empty("empty path"));
}

CLI::Option* add_seconds_option(CLI::App* cmd, const std::string& name, double& value, const std::string& description) {
  return cmd->add_option(name, value, description)->transform(decimal_number())->capture_default_str();
}

void check_threads(int threads) {
  if (threads < 0 || threads > kMaxThreads)
    bad(fmt::format("--threads {} is out of range [0, {}] (0: all hardware threads)", threads, kMaxThreads));
}

namespace {

std::string_view file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

void check_existing_output(const struct stat& st, const std::string& path, std::string_view option) {
  if (!S_ISREG(st.st_mode))
    bad(fmt::format("{}: '{}' is {}; results are written to a regular file", option, path, file_kind(st.st_mode)));
  if (access(path.c_str(), W_OK) != 0)
    bad(fmt::format("{}: '{}' cannot be written ({})", option, path, std::strerror(errno)));
}

// A name that does not exist yet: its folder must exist and be writable, and the name must fit the
// file system there (open would fail with ENAMETOOLONG only after the run).
void check_new_output(const std::string& path, std::string_view option) {
  namespace fs = std::filesystem;
  const fs::path file(path);
  const std::string name = file.filename().string();
  if (name.empty() || name == "." || name == "..") bad(fmt::format("{}: '{}' is not a file name", option, path));
  const std::string folder = file.has_parent_path() ? file.parent_path().string() : ".";
  struct stat st {};
  if (stat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    bad(fmt::format("{}: the folder of '{}' does not exist", option, path));
  if (access(folder.c_str(), W_OK | X_OK) != 0)
    bad(fmt::format("{}: '{}' cannot be created ({})", option, path, std::strerror(errno)));
  const long name_max = pathconf(folder.c_str(), _PC_NAME_MAX);
  if (name_max > 0 && name.size() > std::size_t(name_max))
    bad(fmt::format("{}: '{}' cannot be created: its name has {} bytes, the file system allows {}", option, path,
                    name.size(), name_max));
}

}  // namespace

void check_writable(const std::string& path, std::string_view option) {
  if (path.empty()) bad(fmt::format("{}: empty path", option));
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) return check_existing_output(st, path, option);
  if (errno != ENOENT) bad(fmt::format("{}: '{}' cannot be used ({})", option, path, std::strerror(errno)));
  check_new_output(path, option);
}

void check_outputs(const std::vector<OutputFile>& files) {
  namespace fs = std::filesystem;
  std::vector<std::pair<fs::path, std::string_view>> seen;  // resolved path, option
  for (const OutputFile& f : files) {
    if (f.path.empty()) continue;
    check_writable(f.path, f.option);
    std::error_code ec;
    const fs::path resolved = fs::weakly_canonical(fs::absolute(f.path), ec);
    for (const auto& [other, option] : seen)
      if (!ec && resolved == other) bad(fmt::format("{}: '{}' is also the {} file", f.option, f.path, option));
    seen.emplace_back(resolved, f.option);
  }
}

namespace {

// The number in a "Key:   1234 kB" line of a /proc file, in bytes.
std::optional<double> proc_kb_field(const char* file, std::string_view key) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);)
    if (line.size() > key.size() && line.compare(0, key.size(), key) == 0 && line[key.size()] == ':')
      return std::strtod(line.c_str() + key.size() + 1, nullptr) * 1024.0;
  return std::nullopt;
}

// A cgroup v2 file holding one number ("max", an absent file: none).
std::optional<double> cgroup_number(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string word;
  if (!(in >> word) || word == "max") return std::nullopt;
  return std::strtod(word.c_str(), nullptr);
}

// The least headroom (memory.max less memory.current) of this process's cgroup and its parents.
std::optional<double> cgroup_headroom() {
  std::ifstream in("/proc/self/cgroup");
  std::string line, own;
  while (std::getline(in, line))
    if (line.rfind("0::", 0) == 0) own = line.substr(3);
  std::optional<double> least;
  for (std::filesystem::path dir = std::filesystem::path("/sys/fs/cgroup") / std::filesystem::path(own).relative_path();;
       dir = dir.parent_path()) {
    if (const auto limit = cgroup_number(dir / "memory.max")) {
      const double headroom = std::max(0.0, *limit - cgroup_number(dir / "memory.current").value_or(0.0));
      least = std::min(least.value_or(headroom), headroom);
    }
    if (dir == "/sys/fs/cgroup" || !dir.has_parent_path()) break;
  }
  return least;
}

// A resource limit less what this process holds of it already (a /proc/self/status field).
std::optional<double> rlimit_headroom(int resource, std::string_view status_key) {
  struct rlimit limit {};
  if (getrlimit(resource, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return std::nullopt;
  return std::max(0.0, double(limit.rlim_cur) - proc_kb_field("/proc/self/status", status_key).value_or(0.0));
}

struct Available {
  double bytes;
  std::string_view source;
};

std::optional<Available> available_memory() {
  std::optional<Available> least;
  auto consider = [&](std::optional<double> bytes, std::string_view source) {
    if (bytes && (!least || *bytes < least->bytes)) least = Available{*bytes, source};
  };
  consider(proc_kb_field("/proc/meminfo", "MemAvailable"), "MemAvailable");
  consider(cgroup_headroom(), "the cgroup memory limit");
  consider(rlimit_headroom(RLIMIT_AS, "VmSize"), "RLIMIT_AS");
  consider(rlimit_headroom(RLIMIT_DATA, "VmData"), "RLIMIT_DATA");
  return least;
}

}  // namespace

void check_host_memory(std::int64_t n, std::int64_t k, std::int64_t m, std::string_view what) {
  const double need = double(n) * double(k) * 5.0 + double(m) * double(k) * 8.0 + double(m) * double(n) * 32.0;
  const auto have = available_memory();
  if (!have) return;  // nothing known: let the allocation decide
  if (need > have->bytes)
    bad(fmt::format("{}: {}x{} with M = {} needs about {:.1f} GB of host memory; about {:.1f} GB is available ({})",
                    what, n, k, m, need / 1e9, have->bytes / 1e9, have->source));
}

WeightLayout parse_mma_layout(std::string_view text) {
  if (text == "fragments") return WeightLayout::mma_fragments;
  if (text == "mlx") return WeightLayout::mlx;
  throw std::invalid_argument(fmt::format("--mma-layout: '{}' is not a layout (fragments or mlx)", text));
}

const std::vector<Preset>& presets() {
  // N x K with N the output rows and K the reduction (input) size: "a->b" in a model is K=a, N=b.
  static const std::vector<Preset> all = {
      {"gemma12b", "Gemma-3/4-12B-like: q, kv, o, gate/up, down, tied LM head",
       {{"gemma.q", 4096, 3840},
        {"gemma.kv", 2048, 3840},
        {"gemma.o", 3840, 4096},
        {"gemma.gate_up", 15360, 3840},
        {"gemma.down", 3840, 15360},
        {"gemma.head", 262144, 3840}}},
      {"llama3-8b", "Llama-3-8B: q/o, kv, gate/up, down, LM head",
       {{"llama.q", 4096, 4096},
        {"llama.kv", 1024, 4096},
        {"llama.gate_up", 14336, 4096},
        {"llama.down", 4096, 14336},
        {"llama.head", 128256, 4096}}},
      {"qwen27b", "Qwen-27B-like: o, gate/up, down",
       {{"qwen.o", 5120, 5120}, {"qwen.gate_up", 17408, 5120}, {"qwen.down", 5120, 17408}}},
      {"big", "28672x8192, the anchor shape of the reference measurements", {{"big", 28672, 8192}}},
      {"cpu-default", "the shapes the CPU main job runs: Gemma q and kv, Qwen o (realistic, seconds on 2 cores)",
       {{"gemma.q", 4096, 3840}, {"gemma.kv", 2048, 3840}, {"qwen.o", 5120, 5120}}},
  };
  return all;
}

std::vector<Shape> parse_shapes(std::string_view text) {
  std::vector<Shape> out;
  for (std::string_view item : split(text, ',')) {
    if (item.empty()) bad(fmt::format("--shapes: empty item in '{}'", text));
    const auto preset = std::find_if(presets().begin(), presets().end(), [&](const Preset& p) { return p.name == item; });
    if (preset != presets().end()) {
      out.insert(out.end(), preset->shapes.begin(), preset->shapes.end());
      continue;
    }
    const auto x = item.find('x');
    if (x == std::string_view::npos) {
      std::string names;
      for (const auto& p : presets()) names += " " + p.name;
      bad(fmt::format("--shapes: '{}' is neither NxK nor a preset (presets:{})", item, names));
    }
    Shape s{std::string(item), parse_int(item.substr(0, x), "--shapes N"), parse_int(item.substr(x + 1), "--shapes K")};
    out.push_back(s);
  }
  return out;
}

namespace {

struct Range {
  std::int64_t lo = 0, hi = 0;
  bool is_range = false;
};

// "a-b" (a dash after the first character, so "-3" is a value) or "a".
Range parse_range(std::string_view item, std::string_view what) {
  const auto dash = item.find('-', 1);
  if (dash == std::string_view::npos) {
    const std::int64_t v = parse_int(item, what);
    return {v, v, false};
  }
  const Range r{parse_int(item.substr(0, dash), what), parse_int(item.substr(dash + 1), what), true};
  if (r.lo > r.hi) bad(fmt::format("{}: range '{}' is reversed (the first value must not exceed the last)", what, item));
  return r;
}

// Refuses `item` where its values would take the list past kMaxListItems, counted before any is
// added (the span of a range is taken in unsigned arithmetic: no overflow for any int64 ends).
void check_room(const Range& r, std::string_view item, std::size_t before, std::string_view what) {
  const std::uint64_t span = std::uint64_t(r.hi) - std::uint64_t(r.lo);  // items - 1
  if (span < kMaxListItems - before) return;
  const std::string count = span == UINT64_MAX ? "18446744073709551616" : std::to_string(span + 1);
  if (!r.is_range) bad(fmt::format("{}: '{}' is one more than the {} items a list may hold", what, item, kMaxListItems));
  if (before == 0) bad(fmt::format("{}: range '{}' has {} items; a list may hold at most {}", what, item, count, kMaxListItems));
  bad(fmt::format("{}: range '{}' has {} items; with the {} before it, more than the {} a list may hold", what, item, count,
                  before, kMaxListItems));
}

}  // namespace

std::int64_t parse_int(std::string_view s, std::string_view what) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size())
    bad(fmt::format("{}: '{}' is not an integer", what, s));
  return v;
}

std::vector<std::int64_t> parse_int_list(std::string_view text, std::string_view what) {
  if (text.empty()) bad(fmt::format("{}: empty value", what));
  std::vector<std::int64_t> out;
  std::set<std::int64_t> seen;
  for (std::string_view item : split(text, ',')) {
    if (item.empty()) bad(fmt::format("{}: empty item in '{}'", what, text));
    const Range r = parse_range(item, what);
    check_room(r, item, out.size(), what);
    // Counted up by offset so that the loop never steps past hi (hi may be the int64 maximum).
    for (std::int64_t offset = 0; offset <= r.hi - r.lo; ++offset) {
      const std::int64_t v = r.lo + offset;
      if (!seen.insert(v).second) bad(fmt::format("{}: {} given twice", what, v));
      out.push_back(v);
    }
  }
  return out;
}

std::vector<Kernel> parse_kernels(std::string_view text) {
  std::vector<Kernel> out;
  for (std::string_view item : split(text, ',')) {
    const Kernel k = parse_kernel(item);
    if (std::find(out.begin(), out.end(), k) != out.end()) bad(fmt::format("--kernels: '{}' given twice", item));
    out.push_back(k);
  }
  return out;
}

std::int64_t differing_bytes(std::span<const std::byte> a, std::span<const std::byte> b) {
  if (a.size() != b.size()) throw std::logic_error("differing_bytes: sizes differ");
  std::int64_t count = 0;
  for (std::size_t i = 0; i < a.size(); ++i) count += a[i] != b[i];
  return count;
}

std::string bytes_digest(std::span<const std::byte> bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a, 64-bit
  for (std::byte b : bytes) h = (h ^ std::uint64_t(b)) * 0x100000001b3ull;
  return fmt::format("{:016x}", h);
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error(fmt::format("could not write '{}': cannot open it ({})", path, std::strerror(errno)));
  errno = 0;
  out.write(text.data(), std::streamsize(text.size()));
  out.flush();
  out.close();  // a short text reaches the file only here: check after it
  if (!out)
    throw std::runtime_error(fmt::format("could not write '{}' ({} bytes): {}; the run finished, its results are not "
                                         "in that file",
                                         path, text.size(), errno ? std::strerror(errno) : "the stream failed"));
}

void write_json(const std::string& path, const nlohmann::json& j) { write_text(path, j.dump(2) + "\n"); }

DecodingSetup open_decoding(std::string_view backend, int threads, const Checkpoint& checkpoint, KernelFamily family,
                            std::int64_t context, const std::optional<Checkpoint>& draft, std::string_view draft_dir,
                            std::int64_t lookup, std::int64_t sequences) {
  DecodingSetup s;
  QmvOptions options;
  options.threads = threads;
  s.backend = make_backend(backend, options);
  DecoderOptions target{family, context};
  target.sequences = sequences;
  s.decoder = std::make_unique<Decoder>(*s.backend, checkpoint, target);
  if (draft) {
    DecoderOptions draft_options{family, s.decoder->context_length()};
    draft_options.sequences = sequences;
    s.draft_decoder = std::make_unique<Decoder>(*s.backend, *draft, draft_options);
    try {
      s.drafter = std::make_unique<DraftModelDrafter>(*s.draft_decoder, *s.decoder);
      s.batch_drafter = make_draft_model_batch_drafter(*s.draft_decoder, *s.decoder);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("--draft '" + std::string(draft_dir) + "': " + e.what());
    }
  } else if (lookup > 0) {
    s.drafter = std::make_unique<PromptLookupDrafter>(lookup);
    s.batch_drafter = make_lookup_batch_drafter(lookup, sequences);
  }
  return s;
}

}  // namespace exactq::cli
