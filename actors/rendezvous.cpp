#include "actors/rendezvous.hpp"

namespace runnel {

void local_rendezvous::send(int64_t step, const std::string& key, tensor value) {
  recv_fn ready;
  {
    std::lock_guard lock(mu_);
    auto& table = steps_[step];
    auto& s = table[key];
    if (s.waiting) {
      ready = std::move(s.waiting);
      table.erase(key);
      if (table.empty())
        steps_.erase(step);
    } else {
      s.value = std::move(value);
      s.has_value = true;
      return;
    }
  }
  ready({}, std::move(value));
}

void local_rendezvous::recv(int64_t step, const std::string& key, recv_fn done) {
  tensor value;
  {
    std::lock_guard lock(mu_);
    auto& table = steps_[step];
    auto& s = table[key];
    if (!s.has_value) {
      s.waiting = std::move(done);
      return;
    }
    value = std::move(s.value);
    table.erase(key);
    if (table.empty())
      steps_.erase(step);
  }
  done({}, std::move(value));
}

void local_rendezvous::end_step(int64_t step) {
  std::map<std::string, slot> left;
  {
    std::lock_guard lock(mu_);
    auto it = steps_.find(step);
    if (it == steps_.end())
      return;
    left = std::move(it->second);
    steps_.erase(it);
  }
  for (auto& [key, s] : left)
    if (s.waiting)
      s.waiting(cancelled("step " + std::to_string(step) + " ended before '" + key +
                          "' was sent"),
                {});
}

} // namespace runnel
