#pragma once
// What the element-wise functors share, on the CPU and in CUDA code: RUNNEL_HD (host and device),
// 16-bit float conversions, and widen_apply. The functors themselves are the rows of
// ops/core/unary_ops.hpp and ops/core/binary_ops.hpp. 16-bit floats (half, bfloat16) are never
// computed in directly: kernels widen each element to float, apply the float functor and round
// back.
//
//   float h = to_compute(bfloat16(0.5f)); // 0.5
//   half y = widen_apply<op_add>(a, b);    // a functor applied to 16-bit floats

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "runnel/ops/core/dtype.hpp"

#if defined(__CUDACC__)
#define RUNNEL_HD __host__ __device__ inline
#else
#define RUNNEL_HD inline
#endif

namespace runnel {

// --- 16-bit float conversions usable on both sides --------------------------------------------

RUNNEL_HD float bits_as_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}
RUNNEL_HD uint32_t float_as_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

/// bfloat16 bits to float: the bits are float32's upper half.
RUNNEL_HD float bf16_bits_to_float(uint16_t b) {
  return bits_as_float(uint32_t(b) << 16);
}
/// float to bfloat16 bits, rounding to nearest even; NaN stays a quiet NaN.
RUNNEL_HD uint16_t float_to_bf16_bits(float f) {
  uint32_t x = float_as_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((x >> 16) | 0x40u);
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
/// IEEE half bits to float (subnormals, infinities and NaN included).
RUNNEL_HD float half_bits_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f)
    return bits_as_float(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) // zero or subnormal: mant * 2^-24, exact in float
    return bits_as_float(sign) + (sign ? -1.0f : 1.0f) * float(mant) * 5.9604644775390625e-8f;
  return bits_as_float(sign | ((exp + 112u) << 23) | (mant << 13));
}
/// float to IEEE half bits, rounding to nearest even; overflow gives infinity.
RUNNEL_HD uint16_t float_to_half_bits(float f) {
  uint32_t x = float_as_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff)
    return uint16_t(sign | 0x7c00u | (mant ? 0x200u : 0u));
  int e = int(exp) - 112;
  if (e >= 0x1f)
    return uint16_t(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10)
      return uint16_t(sign);
    mant |= 0x800000u;
    uint32_t shift = uint32_t(14 - e);
    uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1u)))
      ++h;
    return uint16_t(sign | h);
  }
  uint32_t h = sign | (uint32_t(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
    ++h; // may carry into the exponent, which is the right rounding
  return uint16_t(h);
}

template <class T> constexpr bool is_half_float_v =
    std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

/// The type an element computes in: float for the 16-bit floats, itself otherwise.
template <class T> using compute_t = std::conditional_t<is_half_float_v<T>, float, T>;

template <class T> RUNNEL_HD compute_t<T> to_compute(T v) {
  if constexpr (std::is_same_v<T, half>)
    return half_bits_to_float(v.bits);
  else if constexpr (std::is_same_v<T, bfloat16>)
    return bf16_bits_to_float(v.bits);
  else
    return v;
}
template <class T> RUNNEL_HD T from_compute(compute_t<T> v) {
  T out{};
  if constexpr (std::is_same_v<T, half>)
    out.bits = float_to_half_bits(v);
  else if constexpr (std::is_same_v<T, bfloat16>)
    out.bits = float_to_bf16_bits(v);
  else
    out = v;
  return out;
}

template <class T> RUNNEL_HD T int_pow(T base, T exp) {
  T result = 1;
  while (exp > 0) {
    if (exp & 1)
      result *= base;
    base *= base;
    exp >>= 1;
  }
  return result;
}

/// Applies a binary functor to 16-bit floats through float; other types directly.
template <class Op, class T> RUNNEL_HD auto widen_apply(T a, T b) {
  if constexpr (is_half_float_v<T>) {
    auto r = Op::apply(to_compute(a), to_compute(b));
    if constexpr (std::is_same_v<decltype(r), bool>)
      return r;
    else
      return from_compute<T>(r);
  } else {
    return Op::apply(a, b);
  }
}
/// The same for unary functors.
template <class Op, class T> RUNNEL_HD T widen_apply(T a) {
  if constexpr (is_half_float_v<T>)
    return from_compute<T>(Op::apply(to_compute(a)));
  else
    return Op::apply(a);
}

} // namespace runnel
