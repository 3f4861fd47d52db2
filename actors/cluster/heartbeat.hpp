#pragma once
// Heartbeats: a master pings the tasks of each step that runs longer than a quarter of the
// timeout (a getStatus call; any answer will do). A task that leaves a ping unanswered for the
// whole timeout while its connection stays open (stopped with SIGSTOP, hung, swapping) fails the
// step with `unavailable` naming it, instead of holding it forever. A killed task needs no
// heartbeat: its connections drop at once.
//
//   heartbeat_monitor hb(std::chrono::seconds(30));
//   auto tasks = std::make_shared<heartbeat_monitor::task_list>(...); // once per registration
//   auto w = hb.start(tasks, [](status why) { fail the step });
//   ...                         // the step runs; drop `w` when it ends

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runnel/net/endpoint.hpp"

namespace runnel {

class heartbeat_monitor {
public:
  struct watch;
  using task_list = std::vector<std::pair<std::string, std::shared_ptr<net::remote_worker>>>;

  explicit heartbeat_monitor(std::chrono::milliseconds timeout);
  ~heartbeat_monitor();
  heartbeat_monitor(const heartbeat_monitor&) = delete;
  heartbeat_monitor& operator=(const heartbeat_monitor&) = delete;

  /// Watches one step over `tasks` (name, worker) until the returned handle is dropped; `fail`
  /// runs at most once, from the monitor's thread, when a task stops answering. The list is
  /// shared (a registration builds it once, not every step).
  std::shared_ptr<watch> start(std::shared_ptr<const task_list> tasks,
                               std::function<void(status)> fail);
  std::chrono::milliseconds timeout() const { return timeout_; }

private:
  struct pings; ///< outstanding pings by task, shared with their callbacks
  void loop();

  std::chrono::milliseconds timeout_;
  std::shared_ptr<pings> pings_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<std::weak_ptr<watch>> watches_;
  std::thread thread_;
};

} // namespace runnel
