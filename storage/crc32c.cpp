#include "runnel/storage/crc32c.hpp"

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
/// One stream: 8 bytes per instruction, but each waits for the previous (3 cycles).
__attribute__((target("sse4.2"))) uint64_t crc_stream(uint64_t c, const uint8_t* p, size_t n) {
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
  }
  return c;
}

/// Tables advancing a CRC register over `zeros` zero bytes (the operation is linear, so four
/// byte-indexed tables cover any 32-bit register).
struct shift_table {
  std::array<std::array<uint32_t, 256>, 4> t{};
  __attribute__((target("sse4.2"))) explicit shift_table(size_t zeros) {
    for (int k = 0; k < 4; ++k)
      for (uint32_t b = 0; b < 256; ++b) {
        uint64_t c = uint64_t(b) << (8 * k);
        for (size_t i = 0; i < zeros; i += 8)
          c = _mm_crc32_u64(c, 0);
        t[size_t(k)][b] = uint32_t(c);
      }
  }
  uint32_t operator()(uint32_t c) const {
    return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24];
  }
};

/// Three streams over blocks of `block` bytes hide the instruction's latency: ~3x one stream.
template <size_t block>
__attribute__((target("sse4.2"))) uint64_t crc_three_way(uint64_t c, const uint8_t*& p,
                                                          size_t& n) {
  static const shift_table by_one(block), by_two(2 * block);
  while (n >= 3 * block) {
    uint64_t c0 = c, c1 = 0, c2 = 0;
    const uint8_t* a = p;
    for (size_t i = 0; i < block; i += 8) {
      uint64_t v0, v1, v2;
      std::memcpy(&v0, a + i, 8);
      std::memcpy(&v1, a + block + i, 8);
      std::memcpy(&v2, a + 2 * block + i, 8);
      c0 = _mm_crc32_u64(c0, v0);
      c1 = _mm_crc32_u64(c1, v1);
      c2 = _mm_crc32_u64(c2, v2);
    }
    c = by_two(uint32_t(c0)) ^ by_one(uint32_t(c1)) ^ uint32_t(c2);
    p += 3 * block;
    n -= 3 * block;
  }
  return c;
}

__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(const void* data, size_t n, uint32_t crc) {
  auto* p = static_cast<const uint8_t*>(data);
  uint64_t c = ~crc;
  c = crc_three_way<4096>(c, p, n);
  c = crc_three_way<256>(c, p, n);
  c = crc_stream(c, p, n);
  p += n & ~size_t(7);
  n &= 7;
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
