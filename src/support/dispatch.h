// Run-time value to compile-time template argument: f.template operator()<V>() for the one V in
// Values that equals `value`; std::invalid_argument naming `what` and the value otherwise.
#pragma once

#include <stdexcept>
#include <string>

#include "exactq/dtype.h"

namespace exactq {

template <int... Values, typename F>
void dispatch_value(int value, const char* what, F&& f) {
  const bool found = ((value == Values ? (f.template operator()<Values>(), true) : false) || ...);
  if (!found) throw std::invalid_argument(std::string("[exactq] no instantiation for ") + what + " = " + std::to_string(value));
}

// A value type to the template argument: f.template operator()<T>() for T = t.
template <typename F>
void with_dtype(DType t, F&& f) {
  dispatch_value<int(DType::f32), int(DType::f16), int(DType::bf16)>(int(t), "dtype",
                                                                     [&]<int D>() { f.template operator()<DType(D)>(); });
}

}  // namespace exactq
