#pragma once
// The cost model of a synchronous data-parallel step with sharded parameters: what the step of
// N workers costs over links of a given bandwidth, and why.
//
//   data_parallel_model m;
//   m.layers = {{.name = "conv1", .forward_s = 2e-3, .backward_s = 4e-3,
//                .pieces = {{.bytes = 37632, .shard = 0}}}, ...};
//   m.workers = 8; m.shards = 8; m.colocated = true;       // a ps shard on every worker host
//   m.link_bytes_per_s = 125e6;                              // 1 Gbit/s each way per host
//   m.step_overhead_s = 4e-3;                                // the 1-worker step's fixed part
//   sync_step_prediction p = predict_sync_step(m);
//   std::cout << p.explain();                                // where the step's time goes
//
// The step it models is the dataflow's (sync_replicas_optimizer over partitioned variables, as
// docs/cluster.md shows in a trace): every parameter piece is read on its shard when the step
// starts and travels to the worker in the order the forward pass needs them; a layer's forward
// runs once its pieces are in and the layer before is done. The backward pass runs the layers in
// reverse and each gradient piece leaves as soon as its layer's backward is done. The step ends
// when the last piece's gradients from every worker are in, summed and applied, plus a fixed
// per-step overhead (the token barrier, the step's calls) measured on one worker.
//
// Links are each host's, both ways (tc's token bucket limits egress and ingress of every host).
// All workers are alike, so the model follows one worker and loads every link with what all the
// workers send over it: a piece on worker w's own shard (colocated) crosses no link; a shard's
// egress serves the piece to every other worker, so a transfer runs at the link's rate scaled by
// how much more the busiest link on its path carries than the worker's own.

#include <string>
#include <vector>

namespace runnel {

/// One piece of a partitioned variable and the ps shard that holds it.
struct dp_piece {
  double bytes = 0;
  int shard = 0;
};

/// One layer: its emulated (or measured) compute time and its parameter pieces.
struct dp_layer {
  std::string name;
  double forward_s = 0;
  double backward_s = 0;
  std::vector<dp_piece> pieces;
};

struct data_parallel_model {
  std::vector<dp_layer> layers; ///< in forward order
  int workers = 1;
  int shards = 1;
  /// Shard k on worker k's host (k < workers); else every shard on a host of its own.
  bool colocated = true;
  /// Each host's link, each direction.
  double link_bytes_per_s = 125e6;
  /// The share of a link's bytes that is payload: TCP over Ethernet with timestamps carries 1448
  /// bytes in a 1514-byte frame (what tc's token bucket counts).
  double payload_fraction = 1448.0 / 1514.0;
  /// Emulation only: what the one machine that runs every simulated host moves between them in
  /// all, each direction (0: real hosts, each with its own CPUs). When every host's link would
  /// together carry more, each gets its share of this instead.
  double machine_bytes_per_s = 0;
  /// Fixed cost of each piece's transfer (framing, a Recv's wake-up).
  double message_s = 50e-6;
  /// What one ps shard sums and applies per second (gradients of N workers, then the update).
  double aggregate_bytes_per_s = 2e9;
  /// Fixed part of a step beyond its compute: measured on one worker (no link in use).
  double step_overhead_s = 0;
};

struct sync_step_prediction {
  double step_s = 0;
  double compute_s = 0;                ///< forward + backward
  double pull_wait_s = 0;              ///< forward time lost waiting for parameters
  double push_tail_s = 0;              ///< after the backward pass, until the last gradient is in
  double aggregate_s = 0;              ///< the last piece's sum and update on its shard
  double wire_bytes = 0;               ///< one host's bytes per step, each direction
  double wire_bound_s = 0;             ///< max(compute, wire_bytes / link): the physical bound
  double link_payload_bytes_per_s = 0; ///< the rate the model used for each host's link
  /// Examples per second of the whole cluster for a batch of `batch` per worker.
  double throughput(double batch, int workers) const { return batch * workers / step_s; }
  std::string explain() const;
};

/// Predicts one synchronous step of `m` (see the top of this header).
sync_step_prediction predict_sync_step(const data_parallel_model& m);

} // namespace runnel
