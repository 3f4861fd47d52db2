#pragma once
// Element types of tensors.
//
//   dtype t = dtype_of<float>;          // dtype::f32
//   size_of(t) == 4; name(t) == "float32";
//   dispatch(t, [&]<class T>() { ... }); // call a template with the C++ type of t

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "runnel/ops/core/status.hpp"

namespace runnel {

/// The element types Runnel knows. `string` elements are std::string objects.
enum class dtype : uint8_t { invalid, f16, bf16, f32, f64, i8, u8, i32, i64, boolean, string };

/// IEEE 754 half precision, stored as bits; arithmetic goes through float.
struct half {
  uint16_t bits = 0;
  half() = default;
  explicit half(float f);
  explicit operator float() const;
};

/// bfloat16: the upper 16 bits of a float32 (rounded to nearest even on conversion).
struct bfloat16 {
  uint16_t bits = 0;
  bfloat16() = default;
  explicit bfloat16(float f);
  explicit operator float() const {
    uint32_t u = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

/// Bytes per element (sizeof(std::string) for strings).
size_t size_of(dtype t);
/// TensorFlow-style name: "float32", "int64", "bool", "string", ...
std::string_view name(dtype t);
/// Parses a name from `name(dtype)` (also accepts "float" and "double").
result<dtype> parse_dtype(std::string_view s);
bool is_floating(dtype t);
bool is_integer(dtype t);
/// f16, bf16, f32, f64, i8, u8, i32, i64.
bool is_numeric(dtype t);

template <class T> inline constexpr dtype dtype_of = dtype::invalid;
template <> inline constexpr dtype dtype_of<half> = dtype::f16;
template <> inline constexpr dtype dtype_of<bfloat16> = dtype::bf16;
template <> inline constexpr dtype dtype_of<float> = dtype::f32;
template <> inline constexpr dtype dtype_of<double> = dtype::f64;
template <> inline constexpr dtype dtype_of<int8_t> = dtype::i8;
template <> inline constexpr dtype dtype_of<uint8_t> = dtype::u8;
template <> inline constexpr dtype dtype_of<int32_t> = dtype::i32;
template <> inline constexpr dtype dtype_of<int64_t> = dtype::i64;
template <> inline constexpr dtype dtype_of<bool> = dtype::boolean;
template <> inline constexpr dtype dtype_of<std::string> = dtype::string;

/// Calls `f.template operator()<T>()` with the C++ type of `t`; `f` must handle every type.
template <class F> decltype(auto) dispatch(dtype t, F&& f) {
  switch (t) {
    case dtype::f16:
      return f.template operator()<half>();
    case dtype::bf16:
      return f.template operator()<bfloat16>();
    case dtype::f32:
      return f.template operator()<float>();
    case dtype::f64:
      return f.template operator()<double>();
    case dtype::i8:
      return f.template operator()<int8_t>();
    case dtype::u8:
      return f.template operator()<uint8_t>();
    case dtype::i32:
      return f.template operator()<int32_t>();
    case dtype::i64:
      return f.template operator()<int64_t>();
    case dtype::boolean:
      return f.template operator()<bool>();
    case dtype::string:
      return f.template operator()<std::string>();
    case dtype::invalid:
      break;
  }
  return f.template operator()<float>(); // unreachable for valid tensors
}

} // namespace runnel
