#include "runnel/storage/tf/png.hpp"

#include <zlib.h>

#include <stdexcept>
#include <vector>

namespace runnel::tf {
namespace {

void put32(std::string& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8)
    out += char((v >> s) & 0xff);
}

void chunk(std::string& out, const char* type, const std::string& data) {
  put32(out, uint32_t(data.size()));
  std::string body = std::string(type, 4) + data;
  out += body;
  put32(out, uint32_t(crc32(0, reinterpret_cast<const Bytef*>(body.data()), uInt(body.size()))));
}

} // namespace

std::string encode_png(const uint8_t* pixels, int64_t height, int64_t width, int channels) {
  // Each row starts with its filter type (0: none).
  size_t row = size_t(width) * size_t(channels);
  std::string raw;
  raw.reserve((row + 1) * size_t(height));
  for (int64_t y = 0; y < height; ++y) {
    raw += '\0';
    raw.append(reinterpret_cast<const char*>(pixels) + size_t(y) * row, row);
  }
  uLongf bound = compressBound(uLong(raw.size()));
  std::string packed(bound, '\0');
  if (compress2(reinterpret_cast<Bytef*>(packed.data()), &bound,
                reinterpret_cast<const Bytef*>(raw.data()), uLong(raw.size()), 6) != Z_OK)
    throw std::runtime_error("zlib could not compress a PNG image");
  packed.resize(bound);
  std::string out("\x89PNG\r\n\x1a\n", 8);
  std::string ihdr;
  put32(ihdr, uint32_t(width));
  put32(ihdr, uint32_t(height));
  ihdr += char(8);                                              // bit depth
  ihdr += char(channels == 1 ? 0 : channels == 3 ? 2 : 6);      // gray, RGB, RGBA
  ihdr += std::string(3, '\0');                                 // deflate, filter 0, no interlace
  chunk(out, "IHDR", ihdr);
  chunk(out, "IDAT", packed);
  chunk(out, "IEND", "");
  return out;
}

} // namespace runnel::tf
