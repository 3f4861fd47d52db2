#pragma once
// Conversions between Runnel's dtypes, shapes and tensors and TensorFlow's protobuf messages.
// Internal to storage/tf/: it includes the generated protobuf header.

#include <string>
#include <string_view>

#include "runnel/ops/core/shape.hpp"
#include "runnel/ops/core/status.hpp"
#include "runnel/ops/core/tensor.hpp"
#include "runnel/ops/graph/graph.hpp"
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

/// Whether proto bytes look binary (control bytes early) rather than text format.
bool looks_binary(std::string_view bytes);
/// Parses a binary message whole (up to 2 GiB); false when the bytes are not one.
bool parse_binary(std::string_view bytes, google::protobuf::Message& m);
/// Parses protobuf text format, skipping fields the schema does not declare; errors name the line
/// and column.
status parse_text(std::string_view text, google::protobuf::Message& m);

/// A model file's bytes: not_found naming it when it cannot be opened, data_loss when empty.
result<std::string> read_model_file(const std::string& path);

/// A Runnel graph of a GraphDef (the rules of storage/tf/tf_graph.hpp):
/// storage/tf/graph_import.cpp.
result<graph> graph_from_proto(const tensorflow::GraphDef& gd, const op_registry& ops);

} // namespace runnel::tf
