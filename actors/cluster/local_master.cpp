// Masters of this process's cluster nodes, found by the address they serve: a session whose
// target names one calls it directly instead of over a connection to itself (as TensorFlow's
// LocalMaster does). Saves a step the client->master round trip through the network stack:
// the shape of between-graph replication, where each worker process runs its own client.
#include "runnel/actors/cluster/master.hpp"

#include <map>
#include <mutex>

namespace runnel {
namespace {

/// One node's master while it is registered; `m` is cleared when the node stops. Calls start
/// under the lock (they return at once: the master answers through callbacks), so the node's
/// teardown waits for a call being started and none starts after it. Recursive: a call's
/// callback may run at once, on the calling thread, and start another.
struct link {
  std::recursive_mutex mu;
  net::master_service* m = nullptr;
  std::string credentials; ///< what a session must present, as over the network
};

std::mutex registry_mu;
std::map<std::string, std::weak_ptr<link>>& registry() {
  static auto* r = new std::map<std::string, std::weak_ptr<link>>; // outlives static nodes
  return *r;
}

class local_master_handle final : public net::remote_master {
public:
  local_master_handle(std::shared_ptr<link> l, std::string address)
      : link_(std::move(l)), address_(std::move(address)) {}
  const std::string& address() const override { return address_; }

  void create_session(std::string graph_bytes, bool cost_model,
                      net::callback<std::string> done) override {
    with([&](net::master_service& m) {
      m.create_session(std::move(graph_bytes), cost_model, std::move(done));
    }, [&](status s) { done(s); });
  }
  void extend_session(const std::string& handle, std::string graph_bytes,
                      std::function<void(status)> done) override {
    with([&](net::master_service& m) {
      m.extend_session(handle, std::move(graph_bytes), std::move(done));
    }, [&](status s) { done(s); });
  }
  void run(const std::string& handle, net::named_tensors feeds, std::vector<std::string> fetches,
           std::vector<std::string> targets, net::callback<std::vector<tensor>> done) override {
    with([&](net::master_service& m) {
      m.run(handle, std::move(feeds), std::move(fetches), std::move(targets), std::move(done));
    }, [&](status s) { done(s); });
  }
  void run_traced(const std::string& handle, net::named_tensors feeds,
                  std::vector<std::string> fetches, std::vector<std::string> targets,
                  net::callback<net::traced<std::vector<tensor>>> done) override {
    with([&](net::master_service& m) {
      m.run_traced(handle, std::move(feeds), std::move(fetches), std::move(targets),
                   std::move(done));
    }, [&](status s) { done(s); });
  }
  void close_session(const std::string& handle) override {
    with([&](net::master_service& m) { m.close_session(handle); }, [](status) {});
  }
  void cancel_steps(const std::string& handle, std::function<void(status)> done) override {
    with([&](net::master_service& m) { m.cancel_steps(handle, std::move(done)); },
         [&](status s) { done(s); });
  }

private:
  template <class Call, class Fail> void with(Call call, Fail fail) {
    {
      std::lock_guard lock(link_->mu);
      if (link_->m) {
        call(*link_->m);
        return;
      }
    }
    fail(unavailable("the node serving " + address_ + " in this process has stopped"));
  }
  std::shared_ptr<link> link_;
  std::string address_;
};

} // namespace

std::shared_ptr<void> register_local_master(const std::vector<std::string>& addresses,
                                            const std::string& credentials,
                                            net::master_service& m) {
  auto l = std::make_shared<link>();
  l->m = &m;
  l->credentials = credentials;
  {
    std::lock_guard lock(registry_mu);
    for (auto& a : addresses)
      registry()[a] = l;
  }
  // The returned handle's release unregisters and waits for a call being started.
  return std::shared_ptr<void>(nullptr, [l, addresses](void*) {
    {
      std::lock_guard lock(registry_mu);
      for (auto& a : addresses)
        if (auto it = registry().find(a); it != registry().end() && it->second.lock() == l)
          registry().erase(it);
    }
    std::lock_guard lock(l->mu);
    l->m = nullptr;
  });
}

std::shared_ptr<net::remote_master> find_local_master(const std::string& address,
                                                     const std::string& credentials) {
  std::lock_guard lock(registry_mu);
  auto it = registry().find(address);
  if (it == registry().end())
    return nullptr;
  auto l = it->second.lock();
  // Other credentials go over the network, to be refused there as from anywhere else.
  if (!l || l->credentials != credentials)
    return nullptr;
  return std::make_shared<local_master_handle>(std::move(l), address);
}

} // namespace runnel
