#include "runnel/placement/data_parallel.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace runnel {
namespace {

/// The host a shard runs on: worker k's for a colocated shard k < workers, else a host of its own
/// (numbered after the workers').
int shard_host(const data_parallel_model& m, int shard) {
  return m.colocated && shard < m.workers ? shard : m.workers + shard;
}

/// Per shard: the bytes its egress sends in one direction per step (each piece to every worker
/// on another host); the same bytes reach its ingress as gradients.
std::vector<double> shard_link_bytes(const data_parallel_model& m) {
  std::vector<double> bytes(size_t(m.shards), 0);
  for (auto& l : m.layers)
    for (auto& p : l.pieces) {
      int remote = 0;
      for (int w = 0; w < m.workers; ++w)
        remote += shard_host(m, p.shard) != w;
      bytes[size_t(p.shard)] += p.bytes * remote;
    }
  return bytes;
}

} // namespace

sync_step_prediction predict_sync_step(const data_parallel_model& m) {
  if (m.workers < 1 || m.shards < 1 || !(m.link_bytes_per_s > 0) || !(m.aggregate_bytes_per_s > 0))
    throw std::invalid_argument("predict_sync_step: workers, shards, link and aggregation rates "
                                "must be positive");
  for (auto& l : m.layers)
    for (auto& p : l.pieces)
      if (p.shard < 0 || p.shard >= m.shards)
        throw std::invalid_argument("predict_sync_step: layer '" + l.name +
                                    "' has a piece on "
                                    "shard " +
                                    std::to_string(p.shard) + " of " + std::to_string(m.shards));
  sync_step_prediction out;
  for (auto& l : m.layers)
    out.compute_s += l.forward_s + l.backward_s;
  std::vector<double> shard_bytes = shard_link_bytes(m);
  // The payload rate of one host's link, and on an emulating machine its share of what the
  // machine moves when every host sends at once.
  int hosts = m.workers;
  for (int k = 0; k < m.shards; ++k)
    hosts = std::max(hosts, shard_host(m, k) + 1);
  double rate = m.link_bytes_per_s * m.payload_fraction;
  if (m.machine_bytes_per_s > 0)
    rate = std::min(rate, m.machine_bytes_per_s / hosts);
  out.link_payload_bytes_per_s = rate;
  double worst_end = 0;
  for (int w = 0; w < m.workers; ++w) {
    double own = 0; // this worker's bytes each way: pieces on other hosts' shards
    for (auto& l : m.layers)
      for (auto& p : l.pieces)
        own += shard_host(m, p.shard) != w ? p.bytes : 0;
    // A transfer from (to) shard k shares k's link with the other workers: it runs slower by
    // how much more that link carries than this worker's own.
    auto seconds = [&](const dp_piece& p) {
      double slow = own > 0 ? std::max(1.0, shard_bytes[size_t(p.shard)] / own) : 1.0;
      return p.bytes * slow / rate + m.message_s;
    };
    // Forward: parameters arrive in the order the layers need them.
    double pipe = 0, forward = 0, forward_busy = 0;
    for (auto& l : m.layers) {
      double ready = 0;
      for (auto& p : l.pieces) {
        if (shard_host(m, p.shard) != w) {
          pipe += seconds(p);
          ready = std::max(ready, pipe);
        } else {
          ready = std::max(ready, m.message_s);
        }
      }
      forward = std::max(forward, ready) + l.forward_s;
      forward_busy += l.forward_s;
    }
    // Backward: each layer's gradient pieces leave as the layer finishes, on the host's egress,
    // which its own shard's replies to the other workers' pulls hold first.
    double serve = m.colocated && w < m.shards ? shard_bytes[size_t(w)] / rate : 0;
    double t = forward, push = std::max(forward, serve), end = forward, last_bytes = 0;
    for (auto it = m.layers.rbegin(); it != m.layers.rend(); ++it) {
      t += it->backward_s;
      for (auto& p : it->pieces) {
        double in;
        if (shard_host(m, p.shard) != w) {
          push = std::max(push, t) + seconds(p);
          in = push;
        } else {
          in = t + m.message_s;
        }
        if (in >= end) {
          end = in;
          last_bytes = p.bytes;
        }
      }
    }
    double aggregate = 2 * last_bytes / m.aggregate_bytes_per_s;
    if (end + aggregate > worst_end) {
      worst_end = end + aggregate;
      out.pull_wait_s = forward - forward_busy;
      out.push_tail_s = end - t;
      out.aggregate_s = aggregate;
    }
    double host_out = own; // the worker's pushes ...
    if (m.colocated && w < m.shards)
      host_out += shard_bytes[size_t(w)]; // ... and its shard's pulls served
    out.wire_bytes = std::max(out.wire_bytes, host_out);
  }
  for (int k = 0; k < m.shards; ++k)
    if (shard_host(m, k) >= m.workers)
      out.wire_bytes = std::max(out.wire_bytes, shard_bytes[size_t(k)]);
  out.step_s = worst_end + m.step_overhead_s;
  out.wire_bound_s = std::max(out.compute_s, out.wire_bytes / rate);
  return out;
}

std::string sync_step_prediction::explain() const {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "step %.1f ms = compute %.1f ms + waiting for parameters %.1f ms + the last "
                "gradients' transfer %.1f ms + their update %.2f ms + fixed %.1f ms; a host "
                "moves %.2f MB each way (bound %.1f ms)",
                step_s * 1e3, compute_s * 1e3, pull_wait_s * 1e3, push_tail_s * 1e3,
                aggregate_s * 1e3,
                (step_s - compute_s - pull_wait_s - push_tail_s - aggregate_s) * 1e3,
                wire_bytes / 1e6, wire_bound_s * 1e3);
  return buf;
}

} // namespace runnel
