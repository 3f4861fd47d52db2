#pragma once
// Synchronous replicated training with backup workers, as TensorFlow's SyncReplicasOptimizer.
//
//   // every worker builds the same model; replica = its task index
//   adam_optimizer adam(0.001);
//   sync_replicas_optimizer opt(adam, {.replicas_to_aggregate = 3, .total_num_replicas = 4,
//                                      .replica = task});
//   operation train = opt.minimize(loss, step);   // step: the shared global_step variable
//   ...
//   s.run({init});                 // the chief initializes (or restores) the model
//   for (...) s.run(feeds, {loss}, {train});
//
// Each worker sends its gradients to an accumulator next to each variable, tagged with the global
// step it computed them at (its local step), then waits for a token from its token queue, which
// holds the step to compute next. The chief's loop takes the mean of the first
// `replicas_to_aggregate` gradients of each variable, applies it with the wrapped optimizer,
// advances global_step and sets every replica's token to the new step. Gradients computed at an
// older step (a backup worker's, late) are dropped and counted.
//
// Departure from TensorFlow: one token queue per replica whose content the chief replaces, not
// one shared queue. With a shared queue a fast worker can take a slow one's token and send two
// gradients to one step, and a slow worker works through a backlog of old tokens; here each
// worker contributes at most once per step and a late one goes on from the newest step.
//
// The session runs what TensorFlow leaves to hooks and queue runners: the first run of `train`
// in a session sets the worker's local step, and in the chief's session also (re)starts the token
// barrier and the chief's loop, which runs until the session closes. A restarted chief resets
// the tokens and the accumulators to the current global step: no tokens are duplicated. When
// a take waits longer than `timeout_ms` (workers died), the chief fails the waiting workers' token
// dequeues with a message naming the replicas that sent nothing, so their steps fail with
// `unavailable`; the accumulators stay open for restarted workers and a restarted chief, and
// hold the gradients that come meanwhile until a chief that starts again sets the step: a
// chief restored from a checkpoint sets an older step than the accumulators were at, and a
// worker that read the restored step before the chief's init would otherwise have its gradient
// dropped as stale and wait for a token that never comes. When
// the chief's session closes (or `stop` runs), the accumulators close and the waiting workers'
// steps fail with `out_of_range` ("training ended"), as do later ones, instead of hanging. A
// worker waits at most 5 × timeout_ms for its token (a chief that died without a word).

#include <string>
#include <utility>
#include <vector>

#include "runnel/ops/layers/data_flow.hpp"
#include "runnel/ops/train/optimizers.hpp"

namespace runnel {

struct sync_replicas_options {
  /// Gradients averaged per step (N); the first N to arrive make the step.
  int replicas_to_aggregate = 1;
  /// Workers that train (N + backups); 0: replicas_to_aggregate.
  int total_num_replicas = 0;
  /// This worker's index in [0, total_num_replicas): named in errors about missing workers.
  int replica = 0;
  /// The worker that runs the chief's loop; default replica 0.
  int chief_replica = 0;
  /// How long the chief waits for a step's gradients before failing the step (ms).
  int64_t timeout_ms = 60'000;
  /// Where the worker's local step lives (e.g. "/job:worker/task:1"); empty: the device scope's.
  std::string worker_device;
};

/// The ops a sync_replicas_optimizer adds besides `train`, which the session runs for you (read
/// them only to drive the protocol by hand, as tests do).
struct sync_replicas_ops {
  operation train;      ///< the worker's step: gradients to the accumulators, then a token
  operation local_init; ///< local step := global_step
  operation chief_init; ///< tokens := none, accumulators' step := global_step (reopened)
  operation chief_step; ///< take, apply, global_step += 1, every token := global_step
  output fail_message;  ///< string scalar fed to chief_fail
  operation chief_fail; ///< fails the waiting token dequeues with fail_message (unavailable)
  operation stop;       ///< closes the accumulators, ends the waiting dequeues (out_of_range)
  output dropped;       ///< int64: stale gradients dropped so far (by the first accumulator)
  output refused;       ///< int64: second gradients of one replica for one step refused so far
};

class sync_replicas_optimizer {
public:
  sync_replicas_optimizer(optimizer& opt, sync_replicas_options options);

  std::vector<std::pair<gradient_value, output>>
  compute_gradients(output loss, std::vector<output> var_list = {}) {
    return opt_.compute_gradients(loss, std::move(var_list));
  }
  /// The worker's train op (see the top of this header); registers the ops the session runs.
  operation apply_gradients(const std::vector<std::pair<gradient_value, output>>& grads_and_vars,
                            const graph_variable& global_step, std::string_view name = {});
  operation minimize(output loss, const graph_variable& global_step,
                     std::vector<output> var_list = {}, std::string_view name = {});

  const sync_replicas_ops& ops() const { return ops_; }
  const sync_replicas_options& options() const { return o_; }

private:
  optimizer& opt_;
  sync_replicas_options o_;
  sync_replicas_ops ops_;
};

/// The collection that lists sync train ops; each train op's other ops are in the collection
/// named sync_replicas_collection + "/" + its node name, in the order of sync_replicas_ops:
/// local_init, then (only in the chief's graph) chief_init, chief_step, fail_message, chief_fail,
/// stop.
inline constexpr const char* sync_replicas_collection = "runnel.sync_replicas";

} // namespace runnel
