#include "runnel/actors/cluster/sync_runner.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "runnel/ops/core/atomic_file.hpp"
#include "runnel/ops/train/sync_replicas.hpp"

namespace runnel {

// Every session gets a sync runner (idle unless its graph has synchronous replicas). The symbol
// below is what actors/CMakeLists.txt makes every program link (a static library's member that
// nothing calls would otherwise be left out, and its registration with it).
extern "C" const int runnel_sync_runner_linked = 1;
namespace {
[[maybe_unused]] const bool registered = register_session_hook(
    [](const graph& g) -> std::unique_ptr<session_hook> { return std::make_unique<sync_runner>(g); });
} // namespace

struct sync_runner::chief_loop {
  session* s = nullptr;
  operation step, fail, stop;
  output message;
  std::atomic<bool> stopping{false};
  std::atomic<bool> failed{false}; ///< ended by an error: the accumulators stay open
  std::thread thread;
  /// RUNNEL_SYNC_TRACE=FILE@K: the loop's K-th step (0 the first, the one that ends the
  /// workers' first step) is traced to FILE, to be set beside the workers' traces of the same
  /// step (docs/scaling.md, "Where a step's time goes, on every worker").
  std::string trace_file;
  int64_t trace_step = -1, steps = 0;

  void run() {
    for (;;) {
      bool traced = steps++ == trace_step;
      run_metadata md;
      auto r = s->run({}, {}, {step}, run_options{.trace = traced}, traced ? &md : nullptr);
      status st = r ? status() : r.error();
      if (traced)
        if (status w = write_file_atomically(trace_file, md.to_chrome_trace()); !w.ok())
          std::fprintf(stderr, "runnel: RUNNEL_SYNC_TRACE: %s\n", w.to_string().c_str());
      if (stopping.load())
        return;
      if (st.ok())
        continue;
      if (st.code() == error_code::cancelled || st.code() == error_code::out_of_range)
        return; // someone ran `stop`: training ended
      // The step cannot go on (a worker is missing, a ps died): tell every worker why instead of
      // leaving them waiting for tokens, and end the loop. A restarted chief starts a new one.
      failed.store(true);
      std::fprintf(stderr, "runnel: the chief's sync loop stopped: %s\n", st.to_string().c_str());
      // The workers' own error names the token queue's task and node: pass on what the
      // accumulator said ("sync step N: ... nothing from replica R ..."), not its context too.
      std::string why = st.message();
      if (auto at = why.find("sync step "); at != std::string::npos)
        why = why.substr(at);
      status f = s->run({{message, tensor::scalar<std::string>(why)}}, {}, {fail}).error();
      if (!f.ok() && !stopping.load())
        std::fprintf(stderr, "runnel: could not fail the sync token queue: %s\n",
                     f.to_string().c_str());
      return;
    }
  }
};

status sync_runner::before_run(session& s, const std::vector<operation>& targets) {
  if (idle_.load(std::memory_order_acquire) || targets.empty())
    return {};
  const auto& train_ops = g_.collection(sync_replicas_collection);
  if (train_ops.empty()) {
    idle_.store(true, std::memory_order_release);
    return {};
  }
  for (auto& t : targets) {
    if (std::find(train_ops.begin(), train_ops.end(), t.node_id()) == train_ops.end())
      continue;
    std::lock_guard lock(mu_);
    if (std::find(set_up_.begin(), set_up_.end(), t.node_id()) != set_up_.end())
      continue;
    RUNNEL_RETURN_IF_ERROR(set_up(s, t.node_id()));
    set_up_.push_back(t.node_id());
    if (set_up_.size() == train_ops.size())
      idle_.store(true, std::memory_order_release);
  }
  return {};
}

status sync_runner::set_up(session& s, int train_node) {
  auto& g = const_cast<graph&>(g_);
  const auto& own = g_.collection(std::string(sync_replicas_collection) + "/" +
                                  g_.at(train_node).name);
  if (own.empty())
    return internal_error("sync train op '" + g_.at(train_node).name + "' lists no local init");
  auto context = "setting up synchronous training for '" + g_.at(train_node).name + "'";
  RUNNEL_RETURN_IF_ERROR(s.run({operation(&g, own[0])}).with_context(context + ": local step"));
  if (own.size() < 6)
    return {}; // not the chief
  RUNNEL_RETURN_IF_ERROR(
      s.run({operation(&g, own[1])}).with_context(context + ": the chief's token barrier"));
  auto loop = std::make_shared<chief_loop>();
  loop->s = &s;
  loop->step = operation(&g, own[2]);
  loop->message = output(&g, endpoint{own[3], 0});
  loop->fail = operation(&g, own[4]);
  loop->stop = operation(&g, own[5]);
  if (const char* spec = std::getenv("RUNNEL_SYNC_TRACE"); spec && *spec) {
    std::string text = spec;
    auto at = text.rfind('@');
    char* end = nullptr;
    long long k = at == std::string::npos ? -1 : std::strtoll(text.c_str() + at + 1, &end, 10);
    if (at == 0 || k < 0 || !end || *end != '\0')
      return invalid_argument("RUNNEL_SYNC_TRACE='" + text +
                              "': expected FILE@K, K the chief's step to trace (0 the first)");
    loop->trace_file = text.substr(0, at);
    loop->trace_step = k;
  }
  loop->thread = std::thread([l = loop.get()] { l->run(); });
  loops_.push_back(std::move(loop));
  return {};
}

void sync_runner::stop() {
  std::vector<std::shared_ptr<chief_loop>> loops;
  {
    std::lock_guard lock(mu_);
    loops.swap(loops_);
  }
  for (auto& l : loops) {
    l->stopping.store(true);
    // Closing the accumulators ends a take in progress; ending the token queues tells the other
    // workers that training is over. After a failure they stay open: restarted workers send
    // their gradients and wait for a restarted chief.
    status st = l->failed.load() ? status() : l->s->run({l->stop});
    if (!st.ok())
      std::fprintf(stderr, "runnel: stopping the chief's sync loop: %s\n", st.to_string().c_str());
    if (l->thread.joinable())
      l->thread.join();
  }
}

} // namespace runnel
