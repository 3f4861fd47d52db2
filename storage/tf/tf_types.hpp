#pragma once
// Conversions between Runnel's dtypes, shapes and tensors and TensorFlow's protobuf messages.
// Internal to storage/tf/: it includes the generated protobuf header.

#include <string>

#include "runnel/ops/core/shape.hpp"
#include "runnel/ops/core/status.hpp"
#include "runnel/ops/core/tensor.hpp"
#include "storage/tf/tensorflow.pb.h"

namespace runnel::tf {

/// Runnel's dtype for a TensorFlow DataType (reference types map to their base type); an error
/// names the type Runnel lacks (DT_INT16, DT_COMPLEX64, ...).
result<dtype> from_proto(tensorflow::DataType t);
tensorflow::DataType to_proto(dtype t);
/// "DT_FLOAT", or the number for a value outside the enum.
std::string type_name(int t);

/// unknown_rank gives an unknown shape; a dimension of -1 is unknown.
result<shape> from_proto(const tensorflow::TensorShapeProto& s);
void to_proto(const shape& s, tensorflow::TensorShapeProto* out);

/// A tensor from either encoding: `tensor_content` (raw little-endian bytes, which must be
/// exactly the shape's size) or the typed repeated fields, where fewer values than elements
/// repeat the last one (a single value fills the shape) and none means zeros.
result<tensor> from_proto(const tensorflow::TensorProto& t);
/// Numbers as `tensor_content`, strings as `string_val`.
void to_proto(const tensor& t, tensorflow::TensorProto* out);

} // namespace runnel::tf
