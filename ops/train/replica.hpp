#pragma once
// Between-graph replication: where each worker's copy of the model puts its nodes.
//
//   auto d = g.device(replica_device_setter(2, "/job:worker/task:1"));
//   auto w = variable(g, ...);   // -> /job:ps/task:0, the next variable -> /job:ps/task:1, ...
//   auto y = matmul(x, w);       // -> /job:worker/task:1
//
// Variables go to the `ps` tasks, round robin or greedily by size (each to the task holding the
// fewest bytes so far); every other node to `worker_device`. A node that already names a job
// keeps its device; the ops that update a variable follow it through colocation. Every worker
// builds the same graph, so every worker puts each variable on the same ps task.

#include <functional>
#include <string>

#include "runnel/ops/graph/graph.hpp"

namespace runnel {

enum class ps_strategy { round_robin, greedy_by_size };

/// Marks `x`'s node so that its float32 outputs travel between processes as bfloat16 (half the
/// bytes; 8 bits of mantissa, as TensorFlow's talk describes for gradients). Tensors within a
/// process are untouched. The receiving side gets float32 with the low 16 bits zero.
void send_as_bf16(output x);

/// One small output per variable of `g`'s "variables" collection, each computed where its
/// variable lives (an int32: the variable's size): fetching them all succeeds once every variable
/// is initialized and fails with failed_precondition before. What a non-chief worker polls to
/// wait for the chief (TensorFlow's report_uninitialized_variables), moving no parameters.
std::vector<output> variables_ready(graph& g);

std::function<std::string(const node&)>
replica_device_setter(int ps_tasks, std::string worker_device = "/job:worker",
                      ps_strategy strategy = ps_strategy::round_robin, std::string ps_job = "ps");

} // namespace runnel
