// `exactq bench`. Bytes per launch = packed weights + scales + biases + activations + outputs:
// the least any kernel must move, so GB/s over the read ceiling says how close to the memory
// roof a kernel runs (qmv at M > 1 re-reads the weights per vector and shows it).
// Every kernel is also given as a time ratio to narrow qmv at the same M ("x qmv": below 1 means
// the weight reuse pays). The recovered fraction of qmv_streamed is (t_qmv - t_streamed) /
// (t_qmv - t_wide): how much of the speed that qmv_wide buys by giving up qmv's order the
// order-keeping kernel gets back. It is only reported where qmv_wide does buy speed, at least
// kMinWideSaving of t_qmv (recovered_fraction); otherwise the quotient has no meaning.
#include "bench.h"
#include "metrics.h"
#include "problems.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>

#include <unistd.h>

#include <fmt/format.h>

namespace exactq::cli {

nlohmann::json run_bench(const BenchConfig& c, bench::Timer& backend) {
  if (c.shapes.empty()) throw std::invalid_argument("--shapes: nothing to run");
  if (c.ms.empty()) throw std::invalid_argument("--m: nothing to run");
  for (std::int64_t m : c.ms)
    if (m < 1 || m > 4096) throw std::invalid_argument(fmt::format("--m: {} is out of range [1, 4096]", m));
  for (const Shape& s : c.shapes) {
    validate_shape(s.n, s.k, c.bits, c.group);
    check_host_memory(s.n, s.k, *std::max_element(c.ms.begin(), c.ms.end()), fmt::format("--shapes {}", s.name));
  }
  const int repeats = c.repeats > 0 ? c.repeats : backend.default_repeats();
  // --sustain: a point's own launches, untimed, for sustain_seconds before it is timed. On the H200
  // the power limiter averages over about a second: a burst of launches runs at full clock, while
  // qmv at M = 1 held for seconds meets the 700 W cap and its SM clock falls to 1300-1900 MHz
  // (docs/benchmark_results/2026-12-05-h200-session26.md). Continuous decoding is the held case.
  // The untimed launches go in calls of at least 100 on a GPU, so that the gaps between calls
  // (graph capture, synchronisation) leave the device busy nearly all the time.
  const int sustain_repeats = backend.name() == "cpu" ? repeats : std::max(repeats, 100);
  auto sustained = [&](const std::function<double(int)>& time_once) {
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < c.sustain_seconds)
      if (!(time_once(sustain_repeats) > 0)) return 0.0;  // nothing to time (a backend without a read kernel)
    return time_once(repeats);
  };

  nlohmann::json out;
  const double ceiling = backend.read_ceiling_bytes_per_s();
  out["config"] = {{"backend", std::string(backend.name())},
                   {"device", backend.description()},
                   {"bits", c.bits},
                   {"group", c.group},
                   {"dtype", std::string(to_string(c.dtype))},
                   {"repeats", repeats},
                   {"sustain_seconds", c.sustain_seconds},
                   {"streamed_max_vectors", c.options.streamed_max_vectors},
                   {"overlap_launch", c.options.overlap_launch},
                   {"mma_layout", c.mma_layout == WeightLayout::mlx ? "mlx" : "fragments"}};
  out["read_ceiling_gb_s"] = ceiling / 1e9;
  out["kernel_resources"] = nlohmann::json::array();
  for (const bench::KernelResources& r : backend.kernel_resources(c.bits))
    out["kernel_resources"].push_back({{"kernel", r.kernel}, {"vectors_per_pass", r.vectors_per_pass},
                                       {"registers", r.registers}, {"spilled_bytes", r.spilled_bytes},
                                       {"blocks_per_sm", r.blocks_per_sm}});
  for (const auto& r : out["kernel_resources"])
    fmt::print("{:<13} V={} registers {:>3}, spilled {:>4} B, {} blocks/SM\n", r["kernel"].get<std::string>(),
               r["vectors_per_pass"].get<int>(), r["registers"].get<int>(), r["spilled_bytes"].get<int>(),
               r["blocks_per_sm"].get<int>());
  fmt::print("read ceiling (same run, streaming read): {:.1f} GB/s\n", ceiling / 1e9);
  if (c.sustain_seconds > 0) fmt::print("each point timed after {:g} s of its own launches untimed (--sustain)\n", c.sustain_seconds);
  fmt::print("{:<14} {:>7} {:>6} {:<13} {:>3} {:>10} {:>9} {:>7} {:>8} {:>6} {:>10}\n", "shape", "N", "K", "kernel", "M",
             "us", "GB/s", "of roof", "of read", "x qmv", "recovered");

  const std::size_t total = c.shapes.size() * c.kernels.size() * c.ms.size();
  std::size_t done = 0;
  for (const Shape& s : c.shapes) {
    const QuantizedMatrix w = bench::random_quantized(s.n, s.k, c.bits, c.group, c.dtype, std::uint64_t(s.n * 31 + s.k));
    backend.load(w, c.mma_layout);
    const std::int64_t weight_bytes = w.view().weight_bytes();
    // What a kernel that only reads this many bytes reaches, timed the same way: the start-up and
    // tail a launch of this size cannot avoid, which the large-buffer ceiling does not show.
    const double read_us = sustained([&](int r) { return backend.read_time_us(weight_bytes, r); });
    const double read_gbs = read_us > 0 ? double(weight_bytes) / (read_us * 1e-6) / 1e9 : 0.0;
    if (read_us > 0) {
      out["size_matched_reads"].push_back({{"shape", s.name}, {"bytes", weight_bytes}, {"us", read_us},
                                           {"gb_s", read_gbs}, {"fraction_of_ceiling", read_gbs * 1e9 / ceiling}});
      fmt::print("{:<14} streaming read of the same {:.1f} MB: {:.1f} us, {:.1f} GB/s, {:.1f}% of the ceiling\n", s.name,
                 weight_bytes / 1e6, read_us, read_gbs, 100.0 * read_gbs * 1e9 / ceiling);
    }
    std::map<std::pair<Kernel, std::int64_t>, double> t;
    std::map<std::pair<Kernel, std::int64_t>, std::string> digest;
    for (Kernel kernel : c.kernels)
      for (std::int64_t m : c.ms) {
        if (c.progress && isatty(2))
          fmt::print(stderr, "\r[{}/{}] {} {} M={}        ", ++done, total, s.name, to_string(kernel), m);
        t[{kernel, m}] = sustained([&](int r) { return backend.time_us(kernel, m, r); });
        // The output bytes for the activations time_us uses, as a digest.
        const auto x = bench::bench_activations(m, s.k, c.dtype);
        std::vector<std::byte> y(std::size_t(m * s.n) * dtype_size(c.dtype));
        backend.run(kernel, x, m, y);
        digest[{kernel, m}] = bytes_digest(y);
      }
    if (c.progress && isatty(2)) fmt::print(stderr, "\r{:60}\r", "");
    for (Kernel kernel : c.kernels)
      for (std::int64_t m : c.ms) {
        const double us = t[{kernel, m}];
        const std::int64_t bytes = weight_bytes + m * (s.k + s.n) * std::int64_t(dtype_size(c.dtype));
        const double gbs = double(bytes) / (us * 1e-6) / 1e9;
        nlohmann::json row = {{"shape", s.name}, {"n", s.n},   {"k", s.k},     {"kernel", std::string(to_string(kernel))},
                              {"m", m},          {"us", us},   {"bytes", bytes}, {"gb_s", gbs},
                              {"fraction_of_ceiling", gbs * 1e9 / ceiling}, {"output_digest", digest[{kernel, m}]}};
        std::string of_read = "-";
        if (read_gbs > 0) {
          row["fraction_of_size_matched_read"] = gbs / read_gbs;
          of_read = fmt::format("{:.1f}%", 100.0 * gbs / read_gbs);
        }
        std::string vs_qmv = "-", recovered;
        const auto q = t.find({Kernel::qmv, m}), wide = t.find({Kernel::qmv_wide, m});
        if (kernel != Kernel::qmv && q != t.end() && q->second > 0) {
          row["time_vs_qmv"] = us / q->second;
          vs_qmv = fmt::format("{:.2f}", us / q->second);
        }
        if (kernel == Kernel::qmv_streamed && m > 1 && q != t.end() && wide != t.end()) {
          if (const auto frac = bench::recovered_fraction(q->second, us, wide->second)) {
            row["recovered_fraction"] = *frac;
            recovered = fmt::format("{:.2f}", *frac);
          }
        }
        out["rows"].push_back(row);
        fmt::print("{:<14} {:>7} {:>6} {:<13} {:>3} {:>10.1f} {:>9.1f} {:>6.1f}% {:>8} {:>6} {:>10}\n", s.name, s.n,
                   s.k, to_string(kernel), m, us, gbs, 100.0 * gbs * 1e9 / ceiling, of_read, vs_qmv, recovered);
      }
  }
  return out;
}

std::string bench_markdown(const nlohmann::json& r) {
  const double sustain = r["config"].value("sustain_seconds", 0.0);
  std::string md = fmt::format("Device: {}. {}-bit, group {}, {}; median of {} launches{}. Read ceiling measured in the "
                               "same run: **{:.1f} GB/s**.\n\n",
                               r["config"]["device"].get<std::string>(), r["config"]["bits"].get<int>(),
                               r["config"]["group"].get<int>(), r["config"]["dtype"].get<std::string>(),
                               r["config"]["repeats"].get<int>(),
                               sustain > 0 ? fmt::format(", each after {:g} s of the same launches untimed (--sustain)", sustain)
                                           : std::string(),
                               r["read_ceiling_gb_s"].get<double>());
  if (r.contains("kernel_resources") && !r["kernel_resources"].empty()) {
    md += "| kernel | V (vectors per weight pass) | registers | spilled bytes | blocks/SM |\n|---|---|---|---|---|\n";
    for (const auto& k : r["kernel_resources"])
      md += fmt::format("| {} | {} | {} | {} | {} |\n", k["kernel"].get<std::string>(), k["vectors_per_pass"].get<int>(),
                        k["registers"].get<int>(), k["spilled_bytes"].get<int>(), k["blocks_per_sm"].get<int>());
    md += "\n";
  }
  if (r.contains("size_matched_reads")) {
    md += "A streaming read of each shape's weight bytes, timed like the kernels (its start-up and tail included):\n\n"
          "| shape | MB | µs | GB/s | of ceiling |\n|---|---|---|---|---|\n";
    for (const auto& s : r["size_matched_reads"])
      md += fmt::format("| {} | {:.1f} | {:.1f} | {:.1f} | {:.1f}% |\n", s["shape"].get<std::string>(),
                        s["bytes"].get<std::int64_t>() / 1e6, s["us"].get<double>(), s["gb_s"].get<double>(),
                        100.0 * s["fraction_of_ceiling"].get<double>());
    md += "\n";
  }
  md += "| shape | N | K | kernel | M | µs | GB/s | of ceiling | of read at size | × qmv | recovered |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& row : r["rows"]) {
    md += fmt::format("| {} | {} | {} | {} | {} | {:.1f} | {:.1f} | {:.1f}% | {} | {} | {} |\n", row["shape"].get<std::string>(),
                      row["n"].get<std::int64_t>(), row["k"].get<std::int64_t>(),
                      row["kernel"].get<std::string>(),
                      row["m"].get<std::int64_t>(), row["us"].get<double>(), row["gb_s"].get<double>(),
                      100.0 * row["fraction_of_ceiling"].get<double>(),
                      row.contains("fraction_of_size_matched_read")
                          ? fmt::format("{:.1f}%", 100.0 * row["fraction_of_size_matched_read"].get<double>())
                          : std::string(),
                      row.contains("time_vs_qmv") ? fmt::format("{:.2f}", row["time_vs_qmv"].get<double>()) : std::string(),
                      row.contains("recovered_fraction") ? fmt::format("{:.2f}", row["recovered_fraction"].get<double>())
                                                         : std::string());
  }
  return md;
}

std::string bench_svg(const nlohmann::json& r) {
  // One small chart per shape: GB/s against M, one line per kernel, the ceiling dashed.
  std::vector<std::string> shapes;
  std::vector<std::string> kernels;
  double top = r["read_ceiling_gb_s"].get<double>();
  std::int64_t m_hi = 1;
  for (const auto& row : r["rows"]) {
    const auto s = row["shape"].get<std::string>(), k = row["kernel"].get<std::string>();
    if (std::find(shapes.begin(), shapes.end(), s) == shapes.end()) shapes.push_back(s);
    if (std::find(kernels.begin(), kernels.end(), k) == kernels.end()) kernels.push_back(k);
    top = std::max(top, row["gb_s"].get<double>());
    m_hi = std::max(m_hi, row["m"].get<std::int64_t>());
  }
  top *= 1.1;
  const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"};
  const int cols = 3, cw = 320, ch = 220, pad = 45;
  const int rows_n = int((shapes.size() + cols - 1) / cols);
  std::string svg = fmt::format(
      "<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' font-family='sans-serif' font-size='11'>\n"
      "<rect width='100%' height='100%' fill='white'/>\n",
      cols * cw, rows_n * ch + 40);
  for (std::size_t i = 0; i < kernels.size(); ++i)
    svg += fmt::format("<text x='{}' y='{}' fill='{}'>&#9632; {}</text>\n", 10 + 130 * i, rows_n * ch + 25,
                       colors[i % 5], kernels[i]);
  for (std::size_t si = 0; si < shapes.size(); ++si) {
    const int ox = int(si % cols) * cw, oy = int(si / cols) * ch;
    const int x0 = ox + pad, y0 = oy + ch - 30, w = cw - pad - 15, h = ch - 60;
    auto px = [&](double m) { return x0 + (m_hi > 1 ? (m - 1) / double(m_hi - 1) : 0.5) * w; };
    auto py = [&](double g) { return y0 - g / top * h; };
    svg += fmt::format("<text x='{}' y='{}' font-weight='bold'>{}</text>\n", x0, oy + 18, shapes[si]);
    svg += fmt::format("<line x1='{}' y1='{}' x2='{}' y2='{}' stroke='black'/>\n", x0, y0, x0 + w, y0);
    svg += fmt::format("<line x1='{}' y1='{}' x2='{}' y2='{}' stroke='black'/>\n", x0, y0, x0, y0 - h);
    const double ceil = r["read_ceiling_gb_s"].get<double>();
    svg += fmt::format("<line x1='{}' y1='{:.1f}' x2='{}' y2='{:.1f}' stroke='gray' stroke-dasharray='4,3'/>\n", x0,
                       py(ceil), x0 + w, py(ceil));
    svg += fmt::format("<text x='{}' y='{:.1f}' fill='gray'>ceiling {:.0f}</text>\n", x0 + 4, py(ceil) - 3, ceil);
    svg += fmt::format("<text x='{}' y='{}'>M</text><text x='{}' y='{}'>1</text><text x='{}' y='{}'>{}</text>\n",
                       x0 + w / 2, y0 + 25, x0 - 3, y0 + 12, x0 + w - 8, y0 + 12, m_hi);
    svg += fmt::format("<text x='{}' y='{}' transform='rotate(-90 {} {})'>GB/s</text>\n", ox + 12, y0 - h / 2, ox + 12,
                       y0 - h / 2);
    for (std::size_t ki = 0; ki < kernels.size(); ++ki) {
      std::string points;
      for (const auto& row : r["rows"])
        if (row["shape"] == shapes[si] && row["kernel"].get<std::string>() == kernels[ki])
          points += fmt::format("{:.1f},{:.1f} ", px(double(row["m"].get<std::int64_t>())), py(row["gb_s"].get<double>()));
      svg += fmt::format("<polyline fill='none' stroke='{}' stroke-width='2' points='{}'/>\n", colors[ki % 5], points);
    }
  }
  return svg + "</svg>\n";
}

void add_bench_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("bench", "Time the kernels against a same-run read ceiling");
  std::string preset_help = "presets:";
  for (const auto& p : presets()) {
    preset_help += fmt::format("\n  {:<12} {}:", p.name, p.description);
    for (const auto& s : p.shapes) preset_help += fmt::format(" {}={}x{}", s.name, s.n, s.k);
  }
  cmd->footer(preset_help);
  struct Args {
    std::string backend = "auto", shapes = "gemma12b", ms = "1-16", kernels = "qmv,qmv_streamed,qmv_wide", dtype = "bf16";
    std::string json, markdown, plot, mma_layout = "fragments";
    int bits = 4, group = 64, repeats = 0, vmax = 8, threads = 0;
    double sustain = 0;
    bool overlap_launch = false;
  };
  auto a = std::make_shared<Args>();
  add_text_option(cmd, "--backend", a->backend, "cpu, cuda or auto");
  add_text_option(cmd, "--shapes", a->shapes, "comma-separated presets or NxK (N output rows, K reduction)");
  add_text_option(cmd, "--m", a->ms, "widths: a range 1-16 or a list 1,2,4");
  add_text_option(cmd, "--kernels", a->kernels, "comma-separated kernels");
  add_integer_option(cmd, "--bits", a->bits, "2, 3, 4, 5, 6 or 8");
  add_integer_option(cmd, "--group", a->group, "32, 64 or 128");
  add_text_option(cmd, "--dtype", a->dtype, "f32, f16 or bf16");
  add_integer_option(cmd, "--repeats", a->repeats, "timed launches per point (0 = backend default)");
  add_seconds_option(cmd, "--sustain", a->sustain,
                     "seconds of untimed launches of each point before it is timed (clocks and power settle, as in "
                     "continuous use; 0 to 60)");
  add_integer_option(cmd, "--vmax", a->vmax, "qmv_streamed: vectors per weight pass");
  add_integer_option(cmd, "--threads", a->threads, "CPU threads (0 = all)");
  cmd->add_flag("--overlap-launch", a->overlap_launch,
                "CUDA qmv, qmv_streamed: programmatic dependent launches (weights read before the previous kernel ends)");
  add_text_option(cmd, "--mma-layout", a->mma_layout, "qmv_mma's weights: fragments (converted at load) or mlx");
  add_path_option(cmd, "--json", a->json, "write the results as JSON");
  add_path_option(cmd, "--markdown", a->markdown, "write the results as a markdown table");
  add_path_option(cmd, "--plot", a->plot, "write GB/s versus M per kernel as SVG");
  cmd->callback([a, &exit_code] {
    BenchConfig c;
    c.shapes = parse_shapes(a->shapes);
    c.ms = parse_int_list(a->ms, "--m");
    c.kernels = parse_kernels(a->kernels);
    c.bits = a->bits;
    c.group = a->group;
    c.dtype = parse_dtype(a->dtype);
    c.repeats = a->repeats;
    if (a->repeats < 0) throw std::invalid_argument(fmt::format("--repeats {} must be >= 0", a->repeats));
    if (!(a->sustain >= 0 && a->sustain <= 60))
      throw std::invalid_argument(fmt::format("--sustain {} must be between 0 and 60 seconds", a->sustain));
    c.sustain_seconds = a->sustain;
    if (a->vmax < 1) throw std::invalid_argument(fmt::format("--vmax {} must be at least 1", a->vmax));
    check_threads(a->threads);
    QmvOptions options;
    options.streamed_max_vectors = a->vmax;
    options.threads = a->threads;
    options.overlap_launch = a->overlap_launch;
    c.options = options;
    c.mma_layout = parse_mma_layout(a->mma_layout);
    check_outputs({{"--json", a->json}, {"--markdown", a->markdown}, {"--plot", a->plot}});
    auto backend = bench::make_timer(a->backend, options);
    fmt::print("exactq bench on {}\n", backend->description());
    const nlohmann::json r = run_bench(c, *backend);
    if (!a->json.empty()) write_json(a->json, r);
    if (!a->markdown.empty()) write_text(a->markdown, bench_markdown(r));
    if (!a->plot.empty()) write_text(a->plot, bench_svg(r));
    exit_code = 0;
  });
}

}  // namespace exactq::cli
