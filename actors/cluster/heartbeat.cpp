#include "runnel/actors/cluster/heartbeat.hpp"

#include <algorithm>

namespace runnel {

using clock_type = std::chrono::steady_clock;

struct heartbeat_monitor::watch {
  std::shared_ptr<const task_list> tasks;
  std::function<void(status)> fail;
  clock_type::time_point started;
  bool failed = false; ///< guarded by the monitor's lock
};

struct heartbeat_monitor::pings {
  std::mutex mu;
  /// Tasks with a ping in flight, and since when.
  std::map<std::string, clock_type::time_point> outstanding;
};

heartbeat_monitor::heartbeat_monitor(std::chrono::milliseconds timeout)
    : timeout_(timeout), pings_(std::make_shared<pings>()) {
  thread_ = std::thread([this] { loop(); });
}

heartbeat_monitor::~heartbeat_monitor() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::shared_ptr<heartbeat_monitor::watch>
heartbeat_monitor::start(std::shared_ptr<const task_list> tasks, std::function<void(status)> fail) {
  auto w = std::make_shared<watch>();
  w->tasks = std::move(tasks);
  w->fail = std::move(fail);
  w->started = clock_type::now();
  std::lock_guard lock(mu_);
  watches_.push_back(w);
  return w;
}

void heartbeat_monitor::loop() {
  auto interval = std::max<std::chrono::milliseconds>(timeout_ / 4, std::chrono::milliseconds(20));
  std::unique_lock lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, interval);
    if (stop_)
      break;
    auto now = clock_type::now();
    std::vector<std::shared_ptr<watch>> live;
    std::erase_if(watches_, [&](const std::weak_ptr<watch>& w) {
      auto p = w.lock();
      if (p && !p->failed && now - p->started >= interval)
        live.push_back(p);
      return !p;
    });
    lock.unlock();
    std::vector<std::pair<std::shared_ptr<watch>, std::string>> to_fail;
    for (auto& w : live)
      for (auto& entry : *w->tasks) {
        const auto& name = entry.first;
        auto& worker = entry.second;
        clock_type::time_point since;
        bool send = false;
        {
          std::lock_guard plock(pings_->mu);
          auto it = pings_->outstanding.find(name);
          if (it == pings_->outstanding.end()) {
            pings_->outstanding.emplace(name, now);
            send = true;
          } else {
            since = it->second;
          }
        }
        if (send) {
          worker->heartbeat([p = pings_, name](status) {
            std::lock_guard plock(p->mu); // any answer, even an error, is a sign of life
            p->outstanding.erase(name);
          });
        } else if (now - since > timeout_) {
          auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - since).count();
          to_fail.emplace_back(w, "task " + name + " (" + worker->address() +
                                      ") has not answered a heartbeat for " + std::to_string(ms) +
                                      " ms while its connection stays open: is it stopped "
                                      "(SIGSTOP), hung or swapping? (heartbeat timeout " +
                                      std::to_string(timeout_.count()) + " ms)");
          break;
        }
      }
    lock.lock();
    for (auto& [w, why] : to_fail) {
      if (w->failed)
        continue;
      w->failed = true;
      auto fail = w->fail;
      lock.unlock();
      fail(unavailable(why));
      lock.lock();
    }
  }
}

} // namespace runnel
