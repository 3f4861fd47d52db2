#pragma once
// Queues served by an actor each: what the runtime's devices make for the queue ops (registered
// with the executor, actors/exec/providers.hpp); benchmarks make them directly.
#include <memory>
#include <string>

#include "runnel/ops/kernel/queue.hpp"

namespace caf {
class actor_system;
}

namespace runnel {

/// A queue of `spec` named `name`, served by its own actor in `sys`.
std::shared_ptr<queue_resource> make_actor_queue(caf::actor_system& sys, std::string name,
                                                 queue_spec spec);

} // namespace runnel
