#include "runnel/ops/train/sync_replicas.hpp"

#include <optional>

#include "runnel/ops/graph/builder.hpp"

namespace runnel {

namespace {

/// One token queue per replica, next to global_step: the chief replaces each queue's content
/// with the new step when a step is done (QueueReset), so a late worker goes on from the newest
/// step and no worker can take another's token. (TensorFlow shares one queue among all
/// workers; there a fast worker may take a slow one's token and send two gradients to a step.)
std::vector<graph_queue> token_queues(graph& g, const graph_variable& global_step,
                                      const sync_replicas_options& o) {
  std::vector<graph_queue> tokens;
  auto col = g.colocate_with(global_step.ref);
  for (int r = 0; r < o.total_num_replicas; ++r)
    tokens.push_back(fifo_queue(
        g, {dtype::i64},
        {.shapes = {shape{}},
         .shared_name = global_step.name() + "/sync_token_q_" + std::to_string(r),
         .timeout_ms = 5 * o.timeout_ms,
         .timeout_hint = "no token came: the chief (replica " + std::to_string(o.chief_replica) +
                         ") finished no sync step meanwhile. Is its process alive "
                         "and training? Steps go on once a chief runs"},
        "sync_token_q_" + std::to_string(r)));
  return tokens;
}

/// The chief's controls: chief_init (empty token queues, the accumulators at global_step),
/// chief_fail (fails every waiting worker with fail_message's text) and stop (ends training).
void add_chief_controls(graph& g, const graph_variable& global_step,
                        std::vector<graph_queue>& tokens, std::vector<graph_accumulator>& accs,
                        sync_replicas_ops& o) {
  auto col = g.colocate_with(global_step.ref);
  auto none = constant(g, tensor(dtype::i64, shape{0}), "no_tokens");
  std::vector<operation> init;
  for (auto& q : tokens)
    init.push_back(q.reset({none}, "reset_token"));
  for (auto& acc : accs)
    init.push_back(acc.set_global_step(global_step.value));
  o.chief_init = group(g, init, "chief_init");
  o.fail_message = placeholder(g, dtype::string, shape{}, "fail_message");
  std::vector<operation> fail;
  for (auto& q : tokens)
    fail.push_back(q.fail(o.fail_message, "fail_token"));
  o.chief_fail = group(g, fail, "chief_fail");
  auto ended = constant(
      g,
      tensor::scalar<std::string>("training ended: the chief's session closed, so no more sync "
                                  "steps run (global_step '" +
                                  global_step.name() + "')"),
      "ended_message");
  std::vector<operation> stop;
  for (auto& q : tokens)
    stop.push_back(q.fail(ended, "end_token", error_code::out_of_range));
  for (auto& acc : accs)
    stop.push_back(acc.close());
  o.stop = group(g, stop, "stop");
}

} // namespace

sync_replicas_optimizer::sync_replicas_optimizer(optimizer& opt, sync_replicas_options options)
    : opt_(opt), o_(std::move(options)) {
  if (o_.total_num_replicas == 0)
    o_.total_num_replicas = o_.replicas_to_aggregate;
  if (o_.replicas_to_aggregate < 1)
    throw error(invalid_argument("sync_replicas_optimizer: replicas_to_aggregate must be at least "
                                 "1, got " +
                                 std::to_string(o_.replicas_to_aggregate)));
  if (o_.total_num_replicas < o_.replicas_to_aggregate)
    throw error(invalid_argument("sync_replicas_optimizer: total_num_replicas (" +
                                 std::to_string(o_.total_num_replicas) +
                                 ") must be at least replicas_to_aggregate (" +
                                 std::to_string(o_.replicas_to_aggregate) + ")"));
  if (o_.replica < 0 || o_.replica >= o_.total_num_replicas)
    throw error(invalid_argument("sync_replicas_optimizer: replica " + std::to_string(o_.replica) +
                                 " is outside [0, total_num_replicas " +
                                 std::to_string(o_.total_num_replicas) + ")"));
}

operation sync_replicas_optimizer::minimize(output loss, const graph_variable& global_step,
                                            std::vector<output> var_list, std::string_view name) {
  return apply_gradients(compute_gradients(loss, std::move(var_list)), global_step, name);
}

operation sync_replicas_optimizer::apply_gradients(
    const std::vector<std::pair<gradient_value, output>>& grads_and_vars,
    const graph_variable& global_step, std::string_view name) {
  if (grads_and_vars.empty())
    throw error(invalid_argument("sync_replicas_optimizer: no gradients to apply"));
  if (global_step.ref.type() != dtype::i64)
    throw error(invalid_argument("sync_replicas_optimizer: global_step '" + global_step.name() +
                                 "' must be int64"));
  graph& g = global_step.ref.owner();
  auto no_deps = g.control_dependencies({});
  auto scope = g.name_scope(name.empty() ? "sync_replicas" : name);
  sync_replicas_ops& o = ops_;

  // The worker's local step: the global step its gradients are computed at.
  graph_variable local_step;
  {
    auto dev = o_.worker_device.empty() ? std::optional<graph::scope_guard>()
                                        : std::optional(g.device(o_.worker_device));
    local_step = local_variable(g, dtype::i64, shape{}, "local_step_" + std::to_string(o_.replica));
    o.local_init = operation(assign(local_step, global_step.value, "local_init"));
  }

  std::vector<graph_queue> tokens = token_queues(g, global_step, o_);
  std::vector<graph_accumulator> accs;
  std::vector<operation> applies;
  for (auto& [grad, var] : grads_and_vars) {
    if (!grad.valid())
      continue;
    auto col = g.colocate_with(var);
    shape s = var.node().output_shapes.at(0);
    auto acc = conditional_accumulator(g, var.type(), s,
                                       {.sparse = grad.is_sparse(),
                                        .shared_name = var.node().name + "/grad_accum",
                                        .total_num_replicas = o_.total_num_replicas,
                                        .timeout_ms = o_.timeout_ms},
                                       var.node().name + "_grad_accum");
    applies.push_back(grad.is_sparse()
                          ? acc.apply_slices(local_step.value, grad.slices(), o_.replica)
                          : acc.apply_grad(local_step.value, grad.to_dense(), o_.replica));
    accs.push_back(acc);
  }
  output token;
  {
    auto deps = g.control_dependencies(applies);
    auto col = g.colocate_with(global_step.ref);
    token = tokens[size_t(o_.replica)].dequeue("token")[0];
  }
  o.train = operation(assign(local_step, token, "train"));

  // The chief's loop step: the mean of the first N gradients of each variable, applied by the
  // wrapped optimizer, which advances global_step; then every replica's token is the new step.
  std::vector<std::pair<gradient_value, output>> aggregated;
  auto required = constant(g, int32_t(o_.replicas_to_aggregate), "replicas_to_aggregate");
  size_t k = 0;
  for (auto& [grad, var] : grads_and_vars) {
    if (!grad.valid())
      continue;
    auto col = g.colocate_with(var);
    auto& acc = accs[k++];
    aggregated.emplace_back(acc.sparse() ? gradient_value(acc.take_slices(required))
                                         : gradient_value(acc.take_grad(required)),
                            var);
  }
  operation update = opt_.apply_gradients(aggregated, &global_step, "sync_apply");
  {
    auto col = g.colocate_with(global_step.ref);
    auto deps = g.control_dependencies({update});
    auto now = reshape(identity(global_step.ref, "global_step_now"), {1}, "token");
    std::vector<operation> release;
    for (auto& q : tokens)
      release.push_back(q.reset({now}, "release_token"));
    o.chief_step = group(g, release, "chief_step");
  }
  add_chief_controls(g, global_step, tokens, accs, o);
  o.dropped = accs.front().num_dropped("dropped_gradients");
  o.refused = accs.front().num_refused("refused_gradients");

  // What the session runs (actors/cluster/sync_runner.cpp).
  g.add_to_collection(sync_replicas_collection, o.train.node_id());
  std::string own = std::string(sync_replicas_collection) + "/" + o.train.name();
  g.add_to_collection(own, o.local_init.node_id());
  if (o_.replica == o_.chief_replica)
    for (int id : {o.chief_init.node_id(), o.chief_step.node_id(), o.fail_message.node_id(),
                   o.chief_fail.node_id(), o.stop.node_id()})
      g.add_to_collection(own, id);
  return o.train;
}

} // namespace runnel
