#include "cli_common.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <cmath>
#include <random>
#include <stdexcept>
#include <thread>

#include <unistd.h>

#include <fmt/format.h>

namespace exactq::cli {

namespace {

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument(what); }

std::int64_t parse_int(std::string_view s, std::string_view what) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size())
    bad(fmt::format("{}: '{}' is not an integer", what, s));
  return v;
}

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

CLI::Validator decimal_integer() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const std::size_t sign = !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
        const std::string digits = text.substr(sign);
        if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
          return fmt::format("'{}' is not a base-10 integer", text);
        const std::size_t first = std::min(digits.find_first_not_of('0'), digits.size() - 1);
        const std::string normal = (text[0] == '-' ? "-" : "") + digits.substr(first);
        std::int64_t value = 0;
        const auto [end, ec] = std::from_chars(normal.data(), normal.data() + normal.size(), value);
        if (ec != std::errc() || end != normal.data() + normal.size())
          return fmt::format("'{}' is out of the 64-bit integer range", text);
        text = normal;
        return {};
      },
      "INT", "decimal");
}

void check_threads(int threads) {
  if (threads < 0 || threads > kMaxThreads)
    bad(fmt::format("--threads {} is out of range [0, {}] (0: all hardware threads)", threads, kMaxThreads));
}

void check_writable(const std::string& path, std::string_view option) {
  namespace fs = std::filesystem;
  const fs::path file(path);
  if (path.empty() || (fs::exists(file) && fs::is_directory(file)))
    bad(fmt::format("{}: '{}' is not a file name", option, path));
  const fs::path folder = file.has_parent_path() ? file.parent_path() : fs::path(".");
  if (!fs::is_directory(folder)) bad(fmt::format("{}: the folder of '{}' does not exist", option, path));
  if (access((fs::exists(file) ? file : folder).c_str(), W_OK) != 0)
    bad(fmt::format("{}: '{}' cannot be written (no write permission)", option, path));
}

void check_host_memory(std::int64_t n, std::int64_t k, std::int64_t m, std::string_view what) {
  const double need = double(n) * double(k) * 5.0 + double(m) * double(k) * 8.0 + double(m) * double(n) * 32.0;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return;  // unknown: let the allocation decide
  const double have = double(pages) * double(page);
  if (need > have)
    bad(fmt::format("{}: {}x{} with M = {} needs about {:.1f} GB of host memory; this machine has {:.1f} GB", what, n, k,
                    m, need / 1e9, have / 1e9));
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

std::vector<std::int64_t> parse_int_list(std::string_view text, std::string_view what) {
  std::vector<std::int64_t> out;
  for (std::string_view item : split(text, ',')) {
    const auto dash = item.find('-');
    if (dash != std::string_view::npos && dash > 0) {
      const std::int64_t lo = parse_int(item.substr(0, dash), what), hi = parse_int(item.substr(dash + 1), what);
      if (lo > hi) bad(fmt::format("{}: range '{}' is empty", what, item));
      if (hi - lo > 100000) bad(fmt::format("{}: range '{}' is too long", what, item));
      for (std::int64_t v = lo; v <= hi; ++v) out.push_back(v);
    } else {
      out.push_back(parse_int(item, what));
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

}  // namespace exactq::cli

#include <fstream>

namespace exactq::cli {

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error(fmt::format("cannot open '{}' for writing", path));
  out << text;
  if (!out) throw std::runtime_error(fmt::format("cannot write '{}'", path));
}

void write_json(const std::string& path, const nlohmann::json& j) { write_text(path, j.dump(2) + "\n"); }


}  // namespace exactq::cli
