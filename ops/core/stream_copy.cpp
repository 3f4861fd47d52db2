#include "runnel/ops/core/stream_copy.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace runnel {

void copy_streaming(void* to, const void* from, size_t n) {
#if defined(__x86_64__)
  auto* out = static_cast<uint8_t*>(to);
  auto* in = static_cast<const uint8_t*>(from);
  size_t head = std::min(n, size_t((16 - reinterpret_cast<uintptr_t>(out) % 16) % 16));
  std::memcpy(out, in, head);
  out += head, in += head, n -= head;
  size_t blocks = n / 64;
  auto* d = reinterpret_cast<__m128i*>(out);
  auto* s = reinterpret_cast<const __m128i*>(in);
  for (size_t i = 0; i < blocks; ++i, d += 4, s += 4) {
    __m128i a = _mm_loadu_si128(s), b = _mm_loadu_si128(s + 1), c = _mm_loadu_si128(s + 2),
            e = _mm_loadu_si128(s + 3);
    _mm_stream_si128(d, a);
    _mm_stream_si128(d + 1, b);
    _mm_stream_si128(d + 2, c);
    _mm_stream_si128(d + 3, e);
  }
  std::memcpy(out + blocks * 64, in + blocks * 64, n - blocks * 64);
#else
  std::memcpy(to, from, n);
#endif
}

void streaming_fence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

} // namespace runnel
