#pragma once
// Slices of partitioned variables in TensorFlow's V2 checkpoints. A variable saved in slices
// (tf.get_variable with a partitioner) has one BundleEntryProto under its own name listing the
// slices (TensorSliceProto), and one entry per slice under a key that encodes the name and the
// slice in TensorFlow's OrderedCode (saved_tensor_slice_util's EncodeTensorNameSlice):
//
//   WriteNumIncreasing(0), WriteString(name), WriteNumIncreasing(rank),
//   then per dimension WriteSignedNumIncreasing(start), WriteSignedNumIncreasing(length)
//
// where a whole dimension has length -1. Internal to storage/tf/.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runnel/ops/core/status.hpp"
#include "runnel/ops/core/tensor.hpp"

namespace runnel::tf {

/// One dimension of a slice: `length` values from `start`; length -1 is the whole dimension.
struct slice_extent {
  int64_t start = 0;
  int64_t length = -1;
  friend bool operator==(const slice_extent&, const slice_extent&) = default;
};

// OrderedCode, as TensorFlow's strings::OrderedCode writes it (keys that sort like the values).
void ordered_write_num(std::string& out, uint64_t v);
void ordered_write_signed(std::string& out, int64_t v);
void ordered_write_string(std::string& out, std::string_view s);
/// Each reader consumes its value from the front of `in`; false when `in` does not start with a
/// valid encoding (nothing is consumed then).
bool ordered_read_num(std::string_view& in, uint64_t& v);
bool ordered_read_signed(std::string_view& in, int64_t& v);
bool ordered_read_string(std::string_view& in, std::string& s);

/// The table key of a slice of tensor `name`.
std::string encode_slice_key(const std::string& name, const std::vector<slice_extent>& extents);
/// The tensor name and extents of a slice key (keys of slices start with a 0 byte).
result<std::pair<std::string, std::vector<slice_extent>>> decode_slice_key(std::string_view key);

/// The extents as TensorFlow prints slices: "0,5:-" (start,length per dimension; - for all).
std::string slice_to_string(const std::vector<slice_extent>& extents);
/// The shape of the part `extents` cut from a tensor of shape `whole`; an error when a slice
/// has another rank or runs past a dimension.
result<shape> slice_shape(const shape& whole, const std::vector<slice_extent>& extents);
/// Whether two slices of a tensor of shape `whole` share a value.
bool slices_overlap(const shape& whole, const std::vector<slice_extent>& a,
                    const std::vector<slice_extent>& b);
/// Copies `part` (of slice_shape(whole.shape(), extents)) into `whole` at `extents`.
void copy_slice_into(tensor& whole, const tensor& part, const std::vector<slice_extent>& extents);

} // namespace runnel::tf
