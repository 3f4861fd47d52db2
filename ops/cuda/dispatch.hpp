#pragma once
// The dtypes the CUDA kernels are compiled for: calls `f.template operator()<T>()` with the C++
// type of `t`, or returns unimplemented naming `where` and the dtype.
#include <string>

#include "runnel/ops/core/dtype.hpp"
#include "runnel/ops/core/status.hpp"

namespace runnel {

/// f16, bf16, f32, f64.
template <class F> status dispatch_gpu_float(dtype t, const std::string& where, F&& f) {
  switch (t) {
    case dtype::f16:
      return f.template operator()<half>();
    case dtype::bf16:
      return f.template operator()<bfloat16>();
    case dtype::f32:
      return f.template operator()<float>();
    case dtype::f64:
      return f.template operator()<double>();
    default:
      return unimplemented(where + ": no GPU kernel for " + std::string(name(t)));
  }
}

/// The floats, i32 and i64.
template <class F> status dispatch_gpu_number(dtype t, const std::string& where, F&& f) {
  if (t == dtype::i32)
    return f.template operator()<int32_t>();
  if (t == dtype::i64)
    return f.template operator()<int64_t>();
  return dispatch_gpu_float(t, where, std::forward<F>(f));
}

} // namespace runnel
