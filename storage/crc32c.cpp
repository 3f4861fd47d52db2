#include "storage/crc32c.hpp"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace runnel {
namespace {

constexpr uint32_t poly = 0x82f63b78u; // reflected Castagnoli polynomial

using tables = std::array<std::array<uint32_t, 256>, 8>;

tables make_tables() {
  tables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k)
      c = (c & 1) ? (c >> 1) ^ poly : c >> 1;
    t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i)
    for (int s = 1; s < 8; ++s)
      t[size_t(s)][i] = (t[size_t(s - 1)][i] >> 8) ^ t[0][t[size_t(s - 1)][i] & 0xff];
  return t;
}

const tables& table() {
  static const tables t = make_tables();
  return t;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(const void* data, size_t n, uint32_t crc) {
  auto* p = static_cast<const uint8_t*>(data);
  uint64_t c = ~crc;
  // Three independent streams would hide the instruction's latency; one stream already runs
  // at ~8 bytes per cycle / 3 cycles ≈ 8 GB/s at 3 GHz, above the 5 GB/s target.
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = uint32_t(c);
  while (n--)
    c32 = _mm_crc32_u8(c32, *p++);
  return ~c32;
}
#endif

} // namespace

uint32_t crc32c_portable(const void* data, size_t n, uint32_t crc) {
  auto& t = table();
  auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  while (n >= 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;
    c = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
        t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n--)
    c = (c >> 8) ^ t[0][(c ^ *p++) & 0xff];
  return ~c;
}

bool crc32c_hardware() {
#if defined(__x86_64__)
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
#else
  return false;
#endif
}

uint32_t crc32c(const void* data, size_t n, uint32_t crc) {
#if defined(__x86_64__)
  if (crc32c_hardware())
    return crc32c_sse42(data, n, crc);
#endif
  return crc32c_portable(data, n, crc);
}

} // namespace runnel
