#pragma once
// Conversions between Runnel's dtypes, shapes and tensors and TensorFlow's protobuf messages.
// Internal to storage/tf/: it includes the generated protobuf header.

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "runnel/ops/core/shape.hpp"
#include "runnel/ops/core/status.hpp"
#include "runnel/ops/core/tensor.hpp"
#include "runnel/ops/graph/graph.hpp"
#include "runnel/storage/tf/meta_graph.hpp"
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

/// Parses a message in either form (text when the bytes do not look binary); a binary one that
/// does not parse is data_loss: "SOURCE: not a valid WHAT (N bytes: truncated, damaged or not
/// FILE_KIND)".
status parse_message(std::string_view bytes, google::protobuf::Message& m,
                     const std::string& source, const std::string& what,
                     const std::string& file_kind);

/// A model file's bytes: not_found naming it when it cannot be opened, data_loss when empty.
result<std::string> read_model_file(const std::string& path);

/// A Runnel graph of a GraphDef (the rules of storage/tf/tf_graph.hpp):
/// storage/tf/graph_import.cpp.
result<graph> graph_from_proto(const tensorflow::GraphDef& gd, const op_registry& ops);

/// The node a NodeDef input or a tensor name ("^n", "n:1", "n") refers to.
std::string node_of(std::string_view tensor);

/// Nodes of a GraphDef by name.
using node_index = std::map<std::string, const tensorflow::NodeDef*, std::less<>>;
/// TensorFlow's ParseExample node as Runnel's ParseExample, followed where the outputs' orders
/// differ by an IdentityN of the node's name in TensorFlow's order, so "node:i" reads what it
/// read in TensorFlow (storage/tf/parse_example_import.cpp). Problems go to `problems` (and no
/// nodes are returned).
std::vector<tensorflow::NodeDef> rewrite_parse_example(const tensorflow::NodeDef& n,
                                                       const node_index& nodes,
                                                       std::vector<std::string>& problems);

/// A MetaGraphDef imported (storage/tf/meta_graph.hpp): storage/tf/meta_graph.cpp.
result<tf_meta_graph> meta_graph_from_proto(const tensorflow::MetaGraphDef& m,
                                            const op_registry& ops);

} // namespace runnel::tf
