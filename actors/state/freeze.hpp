#pragma once
// Freezing a trained graph for serving (TensorFlow's convert_variables_to_constants): the nodes
// that computing `outputs` needs, with each variable replaced by a Const holding the value it
// has in the session now. The result needs no checkpoint and no initialisation; export it with
// export_tf_graph_def (storage/tf/tf_graph.hpp) for `runnel run` or TensorFlow.
//
//   graph frozen;
//   throw_if_error(freeze_graph(s, g, {"scores", "predictions"}, frozen));
//   write_file("model.pb", export_tf_graph_def(frozen));
//
// Device requests are dropped (the loader places the graph). A needed node that changes state
// (an Assign, an optimizer's update, a queue) is refused, naming it: freeze an inference output.

#include <string>
#include <vector>

#include "runnel/actors/exec/session.hpp"

namespace runnel {

struct freeze_stats {
  int nodes = 0;
  int variables = 0;          ///< turned into constants
  int64_t constant_bytes = 0; ///< their values' bytes
};

/// Adds to `out` (an empty graph) what `outputs` need; `outputs` are node names ("name" or
/// "name:index"; the index is ignored).
status freeze_graph(session& s, const graph& g, const std::vector<std::string>& outputs, graph& out,
                    freeze_stats* stats = nullptr);

} // namespace runnel
