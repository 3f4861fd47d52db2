#include "runnel/ops/core/dtype.hpp"

#include "runnel/ops/core/math_functors.hpp"

#include <cmath>

namespace runnel {

// The conversions are the host/device ones of ops/core/math_functors.hpp, so both devices round alike.
half::half(float f) : bits(float_to_half_bits(f)) {}

half::operator float() const {
  return half_bits_to_float(bits);
}

bfloat16::bfloat16(float f) : bits(float_to_bf16_bits(f)) {}

size_t size_of(dtype t) {
  switch (t) {
    case dtype::f16:
    case dtype::bf16:
      return 2;
    case dtype::f32:
    case dtype::i32:
      return 4;
    case dtype::f64:
    case dtype::i64:
      return 8;
    case dtype::i8:
    case dtype::u8:
    case dtype::boolean:
      return 1;
    case dtype::string:
      return sizeof(std::string);
    case dtype::invalid:
      return 0;
  }
  return 0;
}

std::string_view name(dtype t) {
  switch (t) {
    case dtype::f16:
      return "float16";
    case dtype::bf16:
      return "bfloat16";
    case dtype::f32:
      return "float32";
    case dtype::f64:
      return "float64";
    case dtype::i8:
      return "int8";
    case dtype::u8:
      return "uint8";
    case dtype::i32:
      return "int32";
    case dtype::i64:
      return "int64";
    case dtype::boolean:
      return "bool";
    case dtype::string:
      return "string";
    case dtype::invalid:
      return "invalid";
  }
  return "invalid";
}

result<dtype> parse_dtype(std::string_view s) {
  for (auto t : {dtype::f16, dtype::bf16, dtype::f32, dtype::f64, dtype::i8, dtype::u8, dtype::i32,
                 dtype::i64, dtype::boolean, dtype::string})
    if (name(t) == s)
      return t;
  if (s == "float")
    return dtype::f32;
  if (s == "double")
    return dtype::f64;
  if (s == "half")
    return dtype::f16;
  return invalid_argument("unknown dtype '" + std::string(s) + "'");
}

bool is_floating(dtype t) {
  return t == dtype::f16 || t == dtype::bf16 || t == dtype::f32 || t == dtype::f64;
}
bool is_integer(dtype t) {
  return t == dtype::i8 || t == dtype::u8 || t == dtype::i32 || t == dtype::i64;
}
bool is_numeric(dtype t) {
  return is_floating(t) || is_integer(t);
}

} // namespace runnel
