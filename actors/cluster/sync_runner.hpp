#pragma once
// What a session runs for synchronous replicas (ops/train/sync_replicas.hpp) so that nobody has to
// remember to: before the first run of a sync train op, the worker's local-step init, and in the
// chief's session the token barrier's (re)start and the chief's loop, on a thread of its own
// until the session closes. A session hook (actors/exec/session.hpp): it registers itself, and every
// session gets one. Internal to actors/.

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "runnel/actors/exec/session.hpp"

namespace runnel {

class sync_runner : public session_hook {
public:
  explicit sync_runner(const graph& g) : g_(g) {}
  ~sync_runner() override { stop(); }

  /// Called before every run; cheap unless `targets` holds a sync train op not yet set up.
  status before_run(session& s, const std::vector<operation>& targets) override;
  /// Ends the chief's loop (closing the accumulators and ending the token queue so other workers
  /// stop waiting) and waits for it. Called when the session closes.
  void stop() override;

private:
  struct chief_loop;
  status set_up(session& s, int train_node);

  const graph& g_;
  std::atomic<bool> idle_{false}; ///< every sync train op of the graph is set up (or none)
  std::mutex mu_;
  std::vector<int> set_up_;
  std::vector<std::shared_ptr<chief_loop>> loops_;
};

} // namespace runnel
