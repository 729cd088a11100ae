// `exactq parity`: for each seed, random weights and M random vectors; every kernel runs as a
// block of M = 1..m_max and as M single-vector calls (the chain), and every output byte is
// compared. Exact-family kernels (qmv, qmv_streamed) must show 0 differing bytes everywhere;
// qmv_wide against qmv is the negative control and must differ somewhere, or the shape was too
// small to tell two orders apart and the run proves nothing.
#include "parity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "problems.h"

namespace exactq::cli {

namespace {

using Bytes = std::vector<std::byte>;

std::span<const std::byte> vectors(const Bytes& all, std::int64_t first, std::int64_t count, std::int64_t width,
                                   DType dtype) {
  const std::size_t row = std::size_t(width) * dtype_size(dtype);
  return std::span<const std::byte>(all).subspan(std::size_t(first) * row, std::size_t(count) * row);
}

// The kernel on the backend's buffers, the output poisoned first so that an unwritten byte shows.
Bytes run_block(Backend& b, const Matrix& w, Kernel kernel, const Bytes& x, std::int64_t m, std::int64_t n,
                DType dtype) {
  Bytes y(std::size_t(m * n) * dtype_size(dtype), std::byte{0xA5});
  auto dx = b.allocate(x.size()), dy = b.allocate(y.size());
  b.upload(*dx, x);
  b.upload(*dy, y);
  b.qmv(kernel, w, *dx, m, *dy);
  b.synchronize();
  b.download(*dy, y);
  return y;
}

Bytes run_chain(Backend& b, const Matrix& w, Kernel kernel, const Bytes& x, std::int64_t m, std::int64_t k, std::int64_t n,
                DType dtype) {
  Bytes y(std::size_t(m * n) * dtype_size(dtype));
  const std::size_t out_row = std::size_t(n) * dtype_size(dtype);
  for (std::int64_t v = 0; v < m; ++v) {
    const auto xv = vectors(x, v, 1, k, dtype);
    Bytes one = run_block(b, w, kernel, Bytes(xv.begin(), xv.end()), 1, n, dtype);
    std::copy(one.begin(), one.end(), y.begin() + std::ptrdiff_t(std::size_t(v) * out_row));
  }
  return y;
}

Bytes reversed_rows(const Bytes& all, std::int64_t m, std::int64_t width, DType dtype) {
  Bytes out(all.size());
  const std::size_t row = std::size_t(width) * dtype_size(dtype);
  for (std::int64_t v = 0; v < m; ++v)
    std::copy_n(all.begin() + std::ptrdiff_t(std::size_t(v) * row), row,
                out.begin() + std::ptrdiff_t(std::size_t(m - 1 - v) * row));
  return out;
}

}  // namespace

int ParityResult::exit_code() const {
  if (!identity_ok || !against_ok) return kExitFailed;
  if (!control_fired) return kExitInconclusive;
  return 0;
}

// Outputs of a and b (same shape, dtype t) that differ by more than 4 units in the last place
// of the dtype at the larger magnitude plus 2^-12 of the largest |b|: the check for a kernel
// whose CPU side is a reference rather than a mirror.
std::int64_t outside_tolerance(std::span<const std::byte> a, std::span<const std::byte> b, DType t) {
  const std::size_t count = a.size() / dtype_size(t);
  double largest = 0;
  for (std::size_t i = 0; i < count; ++i) largest = std::max(largest, std::fabs(double(load_f32(b.data(), i, t))));
  const double unit = t == DType::bf16 ? std::ldexp(1.0, -7) : t == DType::f16 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -23);
  std::int64_t outside = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const double x = load_f32(a.data(), i, t), y = load_f32(b.data(), i, t);
    const bool both_nan = std::isnan(x) && std::isnan(y);
    outside += !both_nan && !(std::fabs(x - y) <= 4 * unit * std::max(std::fabs(x), std::fabs(y)) + std::ldexp(largest, -12));
  }
  return outside;
}

ParityResult run_parity(const ParityConfig& c, Backend& backend, Backend* reference) {
  validate_shape(c.n, c.k, c.bits, c.group);
  if (c.m_max < 1 || c.m_max > 4096) throw std::invalid_argument(fmt::format("--m-max {} is out of range [1, 4096]", c.m_max));
  if (c.seeds.empty()) throw std::invalid_argument("--seeds: at least one seed is needed");
  check_host_memory(c.n, c.k, c.m_max, "parity");
  if (std::none_of(c.kernels.begin(), c.kernels.end(), [](Kernel k) { return is_width_invariant(k); }))
    throw std::invalid_argument(
        "--kernels: no width-invariant kernel asked (qmv_wide is the negative control, not a claim): add qmv, "
        "qmv_streamed or qmv_mma");

  // qmv is the reference of every comparison and qmv_wide the control: both always run.
  std::vector<Kernel> all = c.kernels;
  for (Kernel k : {Kernel::qmv, Kernel::qmv_wide})
    if (std::find(all.begin(), all.end(), k) == all.end()) all.push_back(k);

  struct Row {
    std::int64_t vs_chain = 0, vs_qmv = 0, total = 0;
  };
  std::map<std::pair<Kernel, std::int64_t>, Row> rows;
  std::map<Kernel, std::int64_t> permutation, repeat, against;
  std::int64_t control_bytes = 0, control_total = 0;
  const auto t0 = std::chrono::steady_clock::now();

  for (std::uint64_t seed : c.seeds) {
    const QuantizedMatrix w = quantize(bench::random_weights(c.n, c.k, seed), c.n, c.k, c.bits, c.group, c.dtype);
    const auto on_backend = backend.load(w.view(), c.mma_layout);
    const auto on_reference = reference ? reference->load(w.view(), c.mma_layout) : nullptr;
    const Bytes x = bench::random_activations(c.m_max, c.k, c.dtype, seed);
    std::map<Kernel, Bytes> chain;
    for (Kernel kernel : all) chain[kernel] = run_chain(backend, *on_backend, kernel, x, c.m_max, c.k, c.n, c.dtype);
    control_bytes += differing_bytes(chain[Kernel::qmv_wide], chain[Kernel::qmv]);
    control_total += std::int64_t(chain[Kernel::qmv].size());

    for (Kernel kernel : c.kernels) {
      const std::size_t out_row = std::size_t(c.n) * dtype_size(c.dtype);
      Bytes last_block;
      for (std::int64_t m = 1; m <= c.m_max; ++m) {
        const auto xm = vectors(x, 0, m, c.k, c.dtype);
        Bytes y = run_block(backend, *on_backend, kernel, Bytes(xm.begin(), xm.end()), m, c.n, c.dtype);
        const std::span<const std::byte> own(chain[kernel].data(), std::size_t(m) * out_row);
        const std::span<const std::byte> ref(chain[Kernel::qmv].data(), std::size_t(m) * out_row);
        Row& r = rows[{kernel, m}];
        r.vs_chain += differing_bytes(y, own);
        r.vs_qmv += differing_bytes(y, ref);
        r.total += std::int64_t(y.size());
        if (m == c.m_max) last_block = std::move(y);
      }
      // Permutation: the same vectors in reverse order must give each vector the same bytes.
      const Bytes reversed = run_block(backend, *on_backend, kernel, reversed_rows(x, c.m_max, c.k, c.dtype), c.m_max, c.n, c.dtype);
      permutation[kernel] += differing_bytes(reversed_rows(reversed, c.m_max, c.n, c.dtype), chain[kernel]);
      // Repeat: the same launch again gives the same bytes.
      repeat[kernel] += differing_bytes(run_block(backend, *on_backend, kernel, x, c.m_max, c.n, c.dtype), last_block);
      if (reference) {
        const Bytes ref_chain = run_chain(*reference, *on_reference, kernel, x, c.m_max, c.k, c.n, c.dtype);
        const Bytes ref_block = run_block(*reference, *on_reference, kernel, x, c.m_max, c.n, c.dtype);
        // qmv_mma's CPU side is a reference, not a mirror (its tensor-core sums are the
        // hardware's): it is held to a tolerance; every other kernel to every byte.
        against[kernel] += kernel == Kernel::qmv_mma
                               ? outside_tolerance(chain[kernel], ref_chain, c.dtype) + outside_tolerance(last_block, ref_block, c.dtype)
                               : differing_bytes(chain[kernel], ref_chain) + differing_bytes(last_block, ref_block);
      }
    }
  }

  ParityResult result;
  auto& j = result.json;
  j["config"] = {{"backend", std::string(backend.name())},
                 {"device", backend.description()},
                 {"against", c.against},
                 {"n", c.n},
                 {"k", c.k},
                 {"bits", c.bits},
                 {"group", c.group},
                 {"dtype", std::string(to_string(c.dtype))},
                 {"m_max", c.m_max},
                 {"seeds", c.seeds}};
  if (c.print_rows) {
    fmt::print("{:<14} {:>4} {:>16} {:>16} {:>12}\n", "kernel", "M", "diff vs chain", "diff vs qmv", "bytes");
  }
  for (Kernel kernel : c.kernels) {
    const bool exact = is_exact_family(kernel), invariant = is_width_invariant(kernel);
    nlohmann::json per_m = nlohmann::json::array();
    for (std::int64_t m = 1; m <= c.m_max; ++m) {
      const Row& r = rows[{kernel, m}];
      if ((invariant && r.vs_chain != 0) || (exact && r.vs_qmv != 0)) result.identity_ok = false;
      per_m.push_back({{"m", m}, {"differing_bytes_vs_chain", r.vs_chain}, {"differing_bytes_vs_qmv", r.vs_qmv},
                       {"bytes", r.total}});
      if (c.print_rows)
        fmt::print("{:<14} {:>4} {:>16} {:>16} {:>12}{}\n", to_string(kernel), m, r.vs_chain, r.vs_qmv, r.total,
                   (invariant && r.vs_chain) || (exact && r.vs_qmv) ? "   << FAIL" : "");
    }
    if (invariant && (permutation[kernel] != 0 || repeat[kernel] != 0)) result.identity_ok = false;
    if (reference && against[kernel] != 0) result.against_ok = false;
    nlohmann::json entry = {{"kernel", std::string(to_string(kernel))},
                            {"exact_family", exact},
                            {"width_invariant", invariant},
                            {"per_m", per_m},
                            {"differing_bytes_permuted", permutation[kernel]},
                            {"differing_bytes_repeat", repeat[kernel]}};
    if (reference) entry["differing_bytes_vs_" + std::string(reference->name())] = against[kernel];
    j["kernels"].push_back(entry);
    fmt::print("{:<14} permutation (reversed order) vs chain: {} differing bytes; repeat: {}{}\n", to_string(kernel),
               permutation[kernel], repeat[kernel],
               reference ? fmt::format("; vs {} mirror: {}", reference->name(), against[kernel]) : std::string());
  }
  result.control_fired = control_bytes > 0;
  j["negative_control"] = {{"compare", "qmv_wide vs qmv (chains)"},
                           {"differing_bytes", control_bytes},
                           {"bytes", control_total},
                           {"fired", result.control_fired}};
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  j["seconds"] = seconds;

  std::string exact_names, own_order_names;
  for (Kernel kernel : c.kernels) {
    if (is_exact_family(kernel)) exact_names += (exact_names.empty() ? "" : ",") + std::string(to_string(kernel));
    else if (is_width_invariant(kernel))
      own_order_names += (own_order_names.empty() ? "" : ",") + std::string(to_string(kernel));
  }
  // What was shown identical, e.g. "qmv,qmv_streamed bit-identical to qmv's chain; qmv_mma
  // bit-identical to its own chain".
  std::string identical;
  if (!exact_names.empty()) identical = exact_names + " bit-identical to qmv's chain";
  if (!own_order_names.empty())
    identical += (identical.empty() ? "" : "; ") + own_order_names + " bit-identical to its own chain";
  const std::string shape = fmt::format("{}x{} {}-bit g{} {}", c.n, c.k, c.bits, c.group, to_string(c.dtype));
  const std::string control =
      fmt::format("negative control qmv_wide vs qmv: {} of {} bytes differ", control_bytes, control_total);
  if (!result.identity_ok || !result.against_ok) {
    result.summary = fmt::format("FAIL  {} [{}]: a width-invariant kernel differs (see the rows marked FAIL); {}", shape,
                                 backend.name(), control);
  } else if (!result.control_fired) {
    result.summary = fmt::format(
        "INCONCLUSIVE  {} [{}]: {}, but qmv_wide equals qmv on every byte: this shape is too small for "
        "the two orders to differ, so the identity check proves nothing here (use a larger N or K)",
        shape, backend.name(), identical);
  } else {
    result.summary = fmt::format("PASS  {} [{}]: {} at M=1..{} (block, reversed, repeated{}; {} seeds); {}", shape,
                                 backend.name(), identical,
                                 c.m_max, reference ? ", and against the " + std::string(reference->name()) + " side" : "",
                                 c.seeds.size(), control);
  }
  j["summary"] = result.summary;
  j["exit_code"] = result.exit_code();
  return result;
}

}  // namespace exactq::cli

namespace exactq::cli {

void add_parity_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("parity", "Block vs chain byte parity of the kernels, with a negative control");
  cmd->footer(
      "Exit status: 0 every exact-family kernel (qmv, qmv_streamed) is bit-identical to its own chain and to qmv at\n"
      "every M, under reversal and on repeat, and the negative control (qmv_wide vs qmv) differs somewhere;\n"
      "1 a check failed; 2 bad arguments; 3 inconclusive (the control did not fire: the shape is too small).");
  struct Args {
    std::string backend = "cpu", against, kernels = "qmv,qmv_streamed,qmv_wide", dtype = "bf16", seeds = "1,2,3", json, mma_layout = "fragments";
    std::int64_t n = 512, k = 3840, m_max = 8;
    int bits = 4, group = 64, vmax = 8, threads = 0;
    bool overlap_launch = false;
  };
  auto args = std::make_shared<Args>();
  add_text_option(cmd, "--backend", args->backend, "cpu, cuda or auto");
  add_text_option(cmd, "--against", args->against, "also compare every output byte with this backend's mirror (cpu)");
  add_text_option(cmd, "--kernels", args->kernels, "comma-separated: qmv, qmv_streamed, qmv_wide, qmv_mma");
  add_integer_option(cmd, "--n", args->n, "output rows N");
  add_integer_option(cmd, "--k", args->k, "reduction size K (a multiple of the group)");
  add_integer_option(cmd, "--bits", args->bits, "2, 3, 4, 5, 6 or 8");
  add_integer_option(cmd, "--group", args->group, "32, 64 or 128");
  add_text_option(cmd, "--dtype", args->dtype, "f32, f16 or bf16 (activations, scales, biases, outputs)");
  add_integer_option(cmd, "--m-max", args->m_max, "blocks of M = 1..m-max vectors");
  add_text_option(cmd, "--seeds", args->seeds, "comma-separated seeds (or a range a-b)");
  add_integer_option(cmd, "--vmax", args->vmax, "qmv_streamed: vectors per weight pass");
  add_integer_option(cmd, "--threads", args->threads, "CPU threads (0 = all)");
  cmd->add_flag("--overlap-launch", args->overlap_launch,
                "CUDA qmv, qmv_streamed: programmatic dependent launches (weights read before the previous kernel ends)");
  add_text_option(cmd, "--mma-layout", args->mma_layout, "qmv_mma's weights: fragments (converted at load) or mlx");
  add_path_option(cmd, "--json", args->json, "write the full results as JSON to this file");
  cmd->callback([args, &exit_code] {
    ParityConfig c;
    c.backend = args->backend;
    c.against = args->against;
    c.kernels = parse_kernels(args->kernels);
    c.n = args->n;
    c.k = args->k;
    c.bits = args->bits;
    c.group = args->group;
    c.dtype = parse_dtype(args->dtype);
    c.m_max = args->m_max;
    c.seeds.clear();
    for (std::int64_t s : parse_int_list(args->seeds, "--seeds")) {
      if (s < 0) throw std::invalid_argument(fmt::format("--seeds: {} is negative", s));
      c.seeds.push_back(std::uint64_t(s));
    }
    c.options.streamed_max_vectors = args->vmax;
    c.options.threads = args->threads;
    c.options.overlap_launch = args->overlap_launch;
    if (args->vmax < 1) throw std::invalid_argument(fmt::format("--vmax {} must be at least 1", args->vmax));
    check_threads(args->threads);
    if (!c.against.empty() && c.against != "cpu")
      throw std::invalid_argument(fmt::format("--against: '{}' is not supported (only cpu)", c.against));
    validate_shape(c.n, c.k, c.bits, c.group);
    if (c.m_max < 1 || c.m_max > 4096)
      throw std::invalid_argument(fmt::format("--m-max {} is out of range [1, 4096]", c.m_max));
    check_outputs({{"--json", args->json}});
    c.mma_layout = parse_mma_layout(args->mma_layout);
    auto backend = make_backend(c.backend, c.options);
    std::unique_ptr<Backend> reference;
    if (!c.against.empty()) reference = make_backend(c.against, c.options);
    fmt::print("exactq parity on {}: {}x{} {}-bit group {} {}, M=1..{}, seeds {}\n", backend->description(),
               c.n, c.k, c.bits, c.group, to_string(c.dtype), c.m_max, args->seeds);
    const ParityResult r = run_parity(c, *backend, reference.get());
    fmt::print("{}\n", r.summary);
    if (!args->json.empty()) write_json(args->json, r.json);
    exit_code = r.exit_code();
  });
}

}  // namespace exactq::cli
