#include "ops/dtype.hpp"

#include <cmath>

namespace runnel {

half::half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff) { // inf or nan
    bits = uint16_t(sign | 0x7c00u | (mant ? 0x200u : 0u));
    return;
  }
  int e = int(exp) - 127 + 15;
  if (e >= 0x1f) { // overflow to inf
    bits = uint16_t(sign | 0x7c00u);
    return;
  }
  if (e <= 0) { // subnormal or zero
    if (e < -10) {
      bits = uint16_t(sign);
      return;
    }
    mant |= 0x800000u;
    uint32_t shift = uint32_t(14 - e);
    uint32_t h = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1u)))
      ++h;
    bits = uint16_t(sign | h);
    return;
  }
  uint32_t h = sign | (uint32_t(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
    ++h; // may carry into the exponent, which is the right rounding
  bits = uint16_t(h);
}

half::operator float() const {
  uint32_t sign = uint32_t(bits & 0x8000u) << 16;
  uint32_t exp = (bits >> 10) & 0x1fu;
  uint32_t mant = bits & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else { // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      x = sign | (uint32_t(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

bfloat16::bfloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if (std::isnan(f)) {
    bits = uint16_t((x >> 16) | 0x40u);
    return;
  }
  uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  bits = uint16_t((x + rounding) >> 16);
}

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
