// The decode step's timeline (exactq/profile.h) summarised: ops with the same kind and shape
// grouped, ranked by their time per step, with the bytes they move and the rate they reach; the
// split by op class; and a Chrome-trace file (chrome://tracing, Perfetto) of recorded steps.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "exactq/profile.h"

namespace exactq::bench {

struct OpSummary {
  std::string kind, shape;
  double count = 0;         // calls per step
  double us_per_step = 0;   // the backend's time per step
  double bytes_per_step = 0;
  double host_us_per_step = 0;
  double share = 0;         // of the step's backend time
};

struct StepProfile {
  double us = 0;       // backend time per step: the sum of every op's interval
  double host_us = 0;  // the host's time inside the calls per step
  std::vector<OpSummary> ops;  // largest us_per_step first
};

// `steps` recorded steps (their records one after another) summarised per step.
StepProfile summarize_steps(const std::vector<OpRecord>& records, int steps);

// "linears", "attention", "norms", "argmax" or "other".
std::string op_class(const std::string& kind);

// The top `rows` ops as a table, with a line for the rest.
std::string profile_table(const StepProfile& p, std::size_t rows);
nlohmann::json profile_json(const StepProfile& p);

// Trace events ("ph": "X") of one recorded step on the backend's clock, as process `pid`
// named `name`, for the traceEvents list of a Chrome-trace file.
void append_trace_events(nlohmann::json& events, const std::vector<OpRecord>& step, int pid, const std::string& name);

}  // namespace exactq::bench
