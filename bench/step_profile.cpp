// Summaries of the step's timeline (step_profile.h).
#include "step_profile.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace exactq::bench {

std::string op_class(const std::string& kind) {
  // A norm fused into a linear (ProfiledBackend's "norm+qmv") counts as the linear it runs in.
  if (kind.starts_with("qmv") || kind.starts_with("norm+qmv") || kind == "dense_mv") return "linears";
  if (kind == "rmsnorm" || kind == "add_rmsnorm") return "norms";
  if (kind == "attention" || kind == "argmax") return kind;
  return "other";
}

StepProfile summarize_steps(const std::vector<OpRecord>& records, int steps) {
  StepProfile p;
  std::map<std::pair<std::string, std::string>, OpSummary> groups;
  for (const OpRecord& r : records) {
    OpSummary& g = groups[{r.kind, r.shape}];
    g.kind = r.kind;
    g.shape = r.shape;
    g.count += 1;
    g.us_per_step += r.us;
    g.bytes_per_step += double(r.bytes);
    g.host_us_per_step += r.host_us;
    p.us += r.us;
    p.host_us += r.host_us;
  }
  const double n = steps > 0 ? double(steps) : 1.0;
  p.us /= n;
  p.host_us /= n;
  for (auto& [key, g] : groups) {
    g.count /= n;
    g.us_per_step /= n;
    g.bytes_per_step /= n;
    g.host_us_per_step /= n;
    g.share = p.us > 0 ? g.us_per_step / p.us : 0.0;
    p.ops.push_back(g);
  }
  std::sort(p.ops.begin(), p.ops.end(), [](const OpSummary& a, const OpSummary& b) { return a.us_per_step > b.us_per_step; });
  return p;
}

std::string profile_table(const StepProfile& p, std::size_t rows) {
  std::string out = fmt::format("  {:<17} {:<34} {:>6} {:>10} {:>9} {:>10} {:>8} {:>7}\n", "op", "shape", "calls",
                                "us/step", "us each", "MB/step", "GB/s", "share");
  OpSummary rest{"(the rest)", "", 0, 0, 0, 0, 0};
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const OpSummary& o = p.ops[i];
    if (i >= rows) {
      rest.count += o.count, rest.us_per_step += o.us_per_step, rest.bytes_per_step += o.bytes_per_step;
      rest.share += o.share;
      continue;
    }
    out += fmt::format("  {:<17} {:<34} {:>6.0f} {:>10.1f} {:>9.2f} {:>10.3f} {:>8.1f} {:>6.1f}%\n", o.kind, o.shape,
                       o.count, o.us_per_step, o.us_per_step / o.count, o.bytes_per_step / 1e6,
                       o.bytes_per_step / o.us_per_step / 1e3, 100 * o.share);
  }
  if (rest.count > 0)
    out += fmt::format("  {:<17} {:<34} {:>6.0f} {:>10.1f} {:>9} {:>10.3f} {:>8} {:>6.1f}%\n", rest.kind, "", rest.count,
                       rest.us_per_step, "", rest.bytes_per_step / 1e6, "", 100 * rest.share);
  out += fmt::format("  step: {:.1f} us on the backend's clock, {:.1f} us of host time inside the calls\n", p.us,
                     p.host_us);
  return out;
}

nlohmann::json profile_json(const StepProfile& p) {
  nlohmann::json ops = nlohmann::json::array();
  std::map<std::string, double> classes;
  for (const OpSummary& o : p.ops) {
    ops.push_back({{"op", o.kind}, {"shape", o.shape}, {"calls_per_step", o.count}, {"us_per_step", o.us_per_step},
                   {"bytes_per_step", o.bytes_per_step}, {"gb_per_s", o.bytes_per_step / o.us_per_step / 1e3},
                   {"host_us_per_step", o.host_us_per_step}, {"share", o.share}});
    classes[op_class(o.kind)] += o.us_per_step;
  }
  return {{"us_per_step", p.us}, {"host_us_per_step", p.host_us}, {"us_per_step_by_class", classes}, {"ops", ops}};
}

void append_trace_events(nlohmann::json& events, const std::vector<OpRecord>& step, int pid, const std::string& name) {
  events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"args", {{"name", name}}}});
  double t = 0;
  for (const OpRecord& r : step) {
    events.push_back({{"ph", "X"}, {"name", r.kind}, {"cat", op_class(r.kind)}, {"pid", pid}, {"tid", 0},
                      {"ts", t}, {"dur", r.us}, {"args", {{"shape", r.shape}, {"bytes", r.bytes}, {"host_us", r.host_us}}}});
    t += r.us;
  }
}

}  // namespace exactq::bench
