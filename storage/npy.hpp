#pragma once
// NumPy .npy files: one array per file, for feeding and fetching tensors from the command line.
//
//   auto x = read_npy("images.npy");     // float32[10000,784], errors name the file
//   throw_if_error(write_npy("out.npy", probabilities));
//
// Format (version 1.0/2.0/3.0): the magic "\x93NUMPY", two version bytes, the header length
// (2 bytes little-endian in 1.0, 4 in 2.0 and 3.0), a Python dict literal
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with spaces to a multiple
// of 64 bytes and ending in '\n', then the data in C order. Written files are version 1.0 (2.0
// when the header does not fit). Reads little-endian and byte-sized dtypes Runnel has (f2, f4,
// f8, i1, u1, i4, i8, b1); big-endian data is byte-swapped; Fortran order is transposed.

#include <string>
#include <string_view>

#include "runnel/ops/core/tensor.hpp"

namespace runnel {

result<tensor> parse_npy(std::string_view bytes, const std::string& source = "<memory>");
result<tensor> read_npy(const std::string& path);
/// The bytes of a .npy file holding `t` (numbers and bool; strings are refused).
result<std::string> serialize_npy(const tensor& t);
/// Writes atomically (temporary file, then rename).
status write_npy(const std::string& path, const tensor& t);

} // namespace runnel
