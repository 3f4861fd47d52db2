#pragma once
// GraphDef files: a graph saved with Cap'n Proto, loadable anywhere the ops are registered.
//
//   throw_if_error(save_graph(g, "model.graph"));
//   result<graph> loaded = load_graph("model.graph");
//   if (!loaded) std::cerr << loaded.error().to_string();  // names the file and what is wrong
//   std::cout << loaded->to_text();
//
// A file is the 8-byte magic "RNLGRAPH", a little-endian uint32 format version, 4 reserved
// bytes, then one Cap'n Proto message (net/graph.capnp). Loading checks everything: magic,
// framing, dangling inputs, cycles, unknown ops, attribute types, dtypes and shapes; a malformed
// file gives an error, never a crash.

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "runnel/ops/graph/graph.hpp"
#include "runnel/ops/graph/graph_def.hpp"

namespace runnel {

inline constexpr uint32_t graph_format_version = 1;

/// File bytes for a graph_def (no validation: tools may write what they like).
std::string serialize_graph_def(const graph_def& def);
/// Reads file bytes into a graph_def, checking only the framing.
result<graph_def> parse_graph_def(std::string_view bytes, const std::string& source = "<memory>");

/// The graph as file bytes (header + message).
std::string serialize_graph(const graph& g);
/// Rebuilds a graph from file bytes; `source` names the origin in errors.
result<graph> parse_graph(std::string_view bytes, const op_registry& ops = builtin_ops(),
                          const std::string& source = "<memory>");
/// Writes atomically (a temporary file, fsync, then rename: ops/core/atomic_file.hpp).
status save_graph(const graph& g, const std::string& path);
result<graph> load_graph(const std::string& path, const op_registry& ops = builtin_ops());

} // namespace runnel
