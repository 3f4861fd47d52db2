#pragma once
// TensorFlow GraphDef files: import frozen graphs (.pb binary, .pbtxt text) as Runnel graphs, and
// export Runnel graphs as GraphDefs TensorFlow and TensorBoard load.
//
//   auto g = import_tf_graph("frozen_mnist.pb");          // errors name the file and node
//   if (!g) { std::cerr << g.error().to_string(); return 1; }
//   session s(rt, *g);
//   auto out = s.run({{"x", images}}, {"softmax"});
//   throw_if_error(save_tf_graph(*g, "model.pbtxt"));     // text, by the extension
//
// Import maps each NodeDef onto Runnel's op of the same name (AddV2 becomes Add; the v1
// `Gather` becomes GatherV2 with a constant axis 0, a node `<name>/axis` of its own) and its
// attributes onto the op's declared ones. Attributes Runnel infers (dtype attributes such as
// `T` or `Tidx` it does not declare) and TensorFlow's private ones (`_output_shapes`, ...) are
// dropped, `_class` colocation is kept; any other attribute Runnel does not know is an error,
// as is every op Runnel lacks: all of them are named in one error. A legacy GraphDef (no
// `versions`) reads a Placeholder's empty `shape` as unknown, as TensorFlow does.
// Protobuf types stay inside storage/tf/.

#include <string>
#include <string_view>
#include <vector>

#include "runnel/ops/graph/graph.hpp"

namespace runnel {

enum class tf_graph_format {
  binary, ///< a serialized GraphDef (.pb)
  text,   ///< protobuf text format (.pbtxt)
  detect  ///< text when the file does not parse as binary but reads as text
};

/// Builds a Runnel graph from GraphDef bytes; `source` names the origin in errors.
result<graph> import_tf_graph_def(std::string_view bytes, tf_graph_format format,
                                  const std::string& source = "<memory>",
                                  const op_registry& ops = builtin_ops());
/// Reads a .pb or .pbtxt file (the format by extension: .pbtxt/.pb.txt/.txt are text; otherwise
/// detected).
result<graph> import_tf_graph(const std::string& path, const op_registry& ops = builtin_ops());

/// The graph as a GraphDef (TensorFlow's op and attribute names; tensors as tensor_content).
std::string export_tf_graph_def(const graph& g, tf_graph_format format = tf_graph_format::binary);
/// Writes atomically; text when the path ends in .pbtxt or .txt.
status save_tf_graph(const graph& g, const std::string& path);

/// The Runnel op a NodeDef of TensorFlow's op `tf_op` imports as: its own name, or the op that
/// stands for it (AddV2 -> Add, BiasAddV1 -> BiasAdd, Gather -> GatherV2).
std::string imported_op_name(std::string_view tf_op);

/// TensorFlow 1.x ops in one group ("array", "nn", "tf.data", ...).
struct tf_op_group {
  std::string group;
  std::vector<std::string> ops;
};
/// The ops TensorFlow 1.x graphs hold, by group (storage/tf/tf_op_list.cpp): what
/// `runnel ops --tensorflow` compares Runnel's registry with.
const std::vector<tf_op_group>& tensorflow_1x_ops();

/// Whether `bytes` start like a Runnel graph file ("RNLGRAPH") rather than a GraphDef.
bool is_runnel_graph_file(std::string_view bytes);

} // namespace runnel
