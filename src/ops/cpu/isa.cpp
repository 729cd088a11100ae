// Which instruction set the CPU qmv family runs on: the CPU's features, or EXACTQ_CPU_ISA.
#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "exactq/qmv.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif

namespace exactq::cpu {

namespace {

constexpr int kUnset = -1;
std::atomic<int> forced{kUnset};

Isa best_available() {
  if (isa_available(Isa::avx512)) return Isa::avx512;
  if (isa_available(Isa::avx2)) return Isa::avx2;
  return Isa::scalar;
}

Isa from_environment() {
  const char* env = std::getenv("EXACTQ_CPU_ISA");
  if (env == nullptr || *env == '\0') return best_available();
  Isa isa;
  try {
    isa = parse_isa(env);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("[exactq] EXACTQ_CPU_ISA=") + env + ": " + (e.what() + 9));
  }
  if (!isa_available(isa))
    throw std::invalid_argument(std::string("[exactq] EXACTQ_CPU_ISA=") + env + ": this CPU lacks " + env);
  return isa;
}

}  // namespace

std::string_view to_string(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
  }
  return "unknown";
}

Isa parse_isa(std::string_view text) {
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512})
    if (text == to_string(isa)) return isa;
  throw std::invalid_argument("[exactq] unknown CPU instruction set '" + std::string(text) +
                              "' (give scalar, avx2 or avx512)");
}

bool isa_available(Isa isa) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  // __builtin_cpu_supports also checks that the operating system saves the wider registers. F16C
  // and BMI2 are read from CPUID: not every compiler's builtin knows their names.
  unsigned a = 0, b = 0, c = 0, d = 0;
  const bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
  const bool bmi2 = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_BMI2) != 0;
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c && bmi2;
  switch (isa) {
    case Isa::scalar: return true;
    case Isa::avx2: return avx2;
    case Isa::avx512:
      return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vnni");
  }
  return false;
#else
  return isa == Isa::scalar;
#endif
}

Isa qmv_isa() {
  const int f = forced.load(std::memory_order_relaxed);
  if (f != kUnset) return Isa(f);
  // Read once: an invalid value throws on every call, a valid one is kept.
  static const Isa chosen = from_environment();
  return chosen;
}

void set_qmv_isa(Isa isa) {
  if (isa != Isa::scalar && isa != Isa::avx2 && isa != Isa::avx512)
    throw std::invalid_argument("[exactq] CPU instruction set " + std::to_string(int(isa)) + " is not one");
  if (!isa_available(isa))
    throw std::invalid_argument("[exactq] this CPU lacks the instruction set " + std::string(to_string(isa)));
  forced.store(int(isa), std::memory_order_relaxed);
}

}  // namespace exactq::cpu
