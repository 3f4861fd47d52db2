#pragma once
// What the folders above the executor lend it, registered from their own files when the program
// starts, the way session hooks are (actors/exec/session.hpp): the executor calls no function of
// actors/state, actors/data or actors/cluster by name, so it depends on none of them.
//
//   actors/state/queue.cpp          queues served by an actor each
//   actors/state/accumulator.cpp    gradient accumulators
//   actors/data/iterator.cpp        dataset iterators
//   actors/cluster/remote_session.cpp  sessions on a cluster: session(rt, g, "runnel://host:port")
//
// A static library's member that nothing calls is left out of a program, and its registration
// with it: each registering file defines an extern "C" `runnel_<name>_linked` symbol that
// actors/CMakeLists.txt makes every program link.
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "runnel/actors/exec/session.hpp"
#include "runnel/ops/kernel/accumulator.hpp"
#include "runnel/ops/kernel/queue.hpp"

namespace caf {
class actor_system;
}

namespace runnel {

/// A session's link to a cluster's master (actors/cluster/remote_session.cpp).
struct session::remote {
  virtual ~remote() = default;
  /// Runs one step; `done` gets the fetches or the error.
  virtual void run(const feed_list& feeds, const std::vector<output>& fetches,
                   const std::vector<operation>& targets,
                   std::function<void(result<std::vector<tensor>>)> done) = 0;
  /// The same, waited for up to session_options::remote_timeout; while it runs,
  /// `options.interrupted` is asked every `options.interrupt_poll`, and true asks the master
  /// to cancel the session's steps in flight and returns `cancelled` (Python's Ctrl-C).
  virtual result<std::vector<tensor>> run_waiting(const feed_list& feeds,
                                                  const std::vector<output>& fetches,
                                                  const std::vector<operation>& targets,
                                                  const run_options& options) = 0;
  /// A traced step: every task's nodes in `metadata`, on this process's clock.
  virtual result<std::vector<tensor>> run_traced(const feed_list& feeds,
                                                 const std::vector<output>& fetches,
                                                 const std::vector<operation>& targets,
                                                 run_metadata& metadata) = 0;
  /// Closes the session on the master (idempotent).
  virtual void close() = 0;
};

struct executor_providers {
  std::function<std::shared_ptr<queue_resource>(caf::actor_system&, std::string, queue_spec)> queue;
  std::function<std::shared_ptr<accumulator_resource>(caf::actor_system&, std::string,
                                                      accumulator_spec)>
      accumulator;
  std::function<std::shared_ptr<iterator_resource>(caf::actor_system&, std::string)> iterator;
  std::function<std::shared_ptr<session::remote>(const graph&, const std::string&,
                                                 const session_options&)>
      remote_session;
};

/// The one set of providers; each member is set by the file that implements it, from a static
/// initialiser, before main runs.
executor_providers& providers();

/// The error for a provider no linked file registered, naming what is missing.
status missing_provider(const char* what, const char* file);

} // namespace runnel
