#pragma once
// The session's internals shared by actors/exec/session.cpp (steps, running, closing) and
// actors/exec/session_build.cpp (placing a graph and building an instance of a signature). Includes
// CAF through actors/exec/internal.hpp; never include it from a public header.

#include <condition_variable>
#include <mutex>
#include <semaphore>
#include <unordered_map>

#include "runnel/actors/exec/flow.hpp"

namespace runnel {

/// One instantiated signature: its node actors and how a step is started.
struct instance {
  std::shared_ptr<instance_actors> actors;
  std::vector<std::vector<consumer>> feed_consumers; ///< per feed
  std::vector<node_actor> sources;                   ///< nodes with no inputs at all
  /// The Recvs of edges between this process's devices: the step's caller starts them itself
  /// (their kernel only leaves a callback with the rendezvous), before any value can arrive.
  std::vector<std::shared_ptr<node_setup>> local_recvs;
  std::vector<int> fed_fetches;                      ///< per fetch: feed index, or -1
  int num_nodes = 0;
  bool uses_rendezvous = false; ///< some edge crosses devices, or it has _Send/_Recv nodes
  /// With control flow: the frames; the instance's messages carry flow tags.
  std::shared_ptr<const flow_plan> flow;
  std::unique_ptr<std::counting_semaphore<4096>> in_flight;
  /// The graph optimizer's rewrite of the signature's nodes, which the node actors were built
  /// from (null: built from the session's graph).
  std::shared_ptr<const graph> optimized;
};

struct signature_hash {
  size_t operator()(const std::vector<int64_t>& v) const {
    size_t h = 1469598103934665603ull;
    for (auto x : v)
      h = (h ^ size_t(x)) * 1099511628211ull;
    return h;
  }
};

/// Guards cost models that sessions share (session_options::costs) while placing and learning.
extern std::mutex shared_costs_mu;

struct session::impl {
  runtime::impl& rt; // valid while the session is open
  std::shared_ptr<session_registry> registry;
  const graph& g;
  session_options options;
  std::mutex mu; // guards instances_ and closed
  std::unordered_map<std::vector<int64_t>, std::shared_ptr<instance>, signature_hash> instances;
  bool closed = false;
  std::mutex active_mu;
  std::condition_variable active_cv;
  int active = 0;

  /// The device of each node of `g` (placed when a build first sees the graph at its size).
  std::vector<size_t> device_of_node;

  /// session_options::optimizer as RUNNEL_GRAPH_OPTIMIZER changes it.
  graph_optimizer_options optimizer;

  impl(runtime::impl& r, const graph& graph, session_options o)
      : rt(r), registry(r.sessions), g(graph), options(o),
        optimizer(graph_optimizer_options::from_environment(o.optimizer).value()) {}

  /// Places the nodes added since the last placement (all of them the first time); nodes placed
  /// before keep their device, and new members of their colocation groups follow them.
  status place_graph();
  result<std::shared_ptr<instance>> build(const std::vector<endpoint>& feeds,
                                          const std::vector<endpoint>& fetches,
                                          const std::vector<int>& targets);
  /// Spawns and wires the node actors of `needed` nodes of `g` (the session's graph, or the
  /// optimizer's rewrite of it), each on its device in `device_of_node`.
  result<std::shared_ptr<instance>>
  instantiate(const graph& g, const std::vector<size_t>& device_of_node,
              const std::vector<endpoint>& feeds, const std::vector<endpoint>& fetches,
              const std::vector<int>& targets, const std::vector<char>& needed);
  result<step_ptr> start(const feed_list& feeds, const std::vector<output>& fetches,
                         const std::vector<operation>& targets,
                         std::function<void(step_state&)> extra_finish,
                         std::shared_ptr<trace_buffer> trace = nullptr, int64_t step_id = 0);
  void stop_instances();
};

} // namespace runnel
