#pragma once
// A minimal PNG encoder (8-bit grayscale, RGB or RGBA; no filtering; zlib deflate) for image
// summaries.

#include <cstdint>
#include <string>

namespace runnel::tf {

/// `pixels` holds height rows of width * channels bytes; channels is 1, 3 or 4.
std::string encode_png(const uint8_t* pixels, int64_t height, int64_t width, int channels);

} // namespace runnel::tf
