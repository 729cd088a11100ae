// The kernel families (exactq/decoder.h): which qmv kernel a quantized linear runs, chosen from
// the run's family and the layer's shape, never from M.
#include <stdexcept>
#include <string>

#include "exactq/decoder.h"
#include "exactq/mma_layout.h"

namespace exactq {

namespace {
[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument("[exactq] " + what); }
}  // namespace

std::string_view to_string(KernelFamily family) {
  switch (family) {
    case KernelFamily::exact: return "exact";
    case KernelFamily::mma: return "mma";
    case KernelFamily::narrow: return "narrow";
    case KernelFamily::wide: return "wide";
  }
  fail("kernel family value " + std::to_string(int(family)) + " is not a KernelFamily");
}

KernelFamily parse_kernel_family(std::string_view text) {
  if (text == "exact") return KernelFamily::exact;
  if (text == "mma") return KernelFamily::mma;
  if (text == "narrow") return KernelFamily::narrow;
  if (text == "wide") return KernelFamily::wide;
  throw std::invalid_argument("[exactq] unknown kernel family '" + std::string(text) +
                              "' (expected exact, mma, narrow or wide)");
}

Kernel kernel_for(KernelFamily family, const QuantizedMatrixView& w, std::int64_t m) {
  switch (family) {
    case KernelFamily::exact: return m == 1 ? Kernel::qmv : Kernel::qmv_streamed;
    case KernelFamily::mma:
      if (w.dtype != DType::f32 && mma_layout::fits(w.bits, w.group, w.k)) return Kernel::qmv_mma;
      return m == 1 ? Kernel::qmv : Kernel::qmv_streamed;
    case KernelFamily::narrow: return Kernel::qmv;
    case KernelFamily::wide: return m == 1 ? Kernel::qmv : Kernel::qmv_wide;
  }
  fail("kernel family value " + std::to_string(int(family)) + " is not a KernelFamily");
}

}  // namespace exactq
