#pragma once
// CRC32C (Castagnoli), as TFRecord framing uses it: SSE4.2's crc32 instruction where the CPU
// has it, a slicing-by-8 table otherwise.
//
//   uint32_t c = crc32c(data, n);
//   uint32_t m = mask_crc(c);     // ((c >> 15) | (c << 17)) + 0xa282ead8, TFRecord's masking

#include <cstddef>
#include <cstdint>

namespace runnel {

/// CRC32C of `n` bytes, continuing from `crc` (0 to start).
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);
/// The portable implementation (for tests and CPUs without SSE4.2).
uint32_t crc32c_portable(const void* data, size_t n, uint32_t crc = 0);
/// Whether crc32c() uses the hardware instruction on this CPU.
bool crc32c_hardware();

inline uint32_t mask_crc(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}
inline uint32_t unmask_crc(uint32_t masked) {
  uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

} // namespace runnel
