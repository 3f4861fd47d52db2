// Remote workers and masters: calls posted to the endpoint's loop, made on its RPC connections,
// answered once; step calls (a worker's runGraph, cleanupStep and heartbeat, a master's run) on
// step connections instead (docs/cluster.md).
#include "runnel/net/endpoint_impl.hpp"
#include "runnel/net/step_plane.hpp"

namespace runnel::net {

using namespace detail;

// ---- remote handles --------------------------------------------------------------------------

namespace {

/// Answers `cb` with the reply's error when it carries one, else with `value()`.
template <class Cb, class Response, class Value>
void answer(Cb& cb, Response& response, Value value) {
  auto s = read_status(response.getError());
  if (!s.ok())
    (*cb)(s);
  else
    (*cb)(value());
}

/// What remote workers and masters share: the endpoint, the address, and `call`, which posts to
/// the loop, connects if needed, makes the request and answers `done` once.
template <class Interface> class remote_handle : public Interface {
public:
  remote_handle(std::shared_ptr<endpoint::impl> ep, std::string address)
      : ep_(std::move(ep)), address_(std::move(address)) {}
  const std::string& address() const override { return address_; }

protected:
  template <class T, class Make> void call(callback<T> done, Make make) {
    auto cb = std::make_shared<once<result<T>>>(std::move(done));
    auto ep = ep_;
    std::string address = address_;
    // If the loop has stopped, the task is dropped and the last release of `cb` answers.
    ep_->post([ep, address, cb, make = std::move(make)]() mutable {
      ep->loop->with_rpc(
          address, [make = std::move(make), cb](auto& conn) mutable { return make(conn, cb); },
          [cb](runnel::status s) { (*cb)(s); });
    });
  }

  /// Whether step calls go on a step connection (endpoint_options::step_calls).
  bool steps() const { return ep_->steps_enabled(); }

  std::shared_ptr<endpoint::impl> ep_;

private:
  std::string address_;
};

class remote_worker_impl final : public remote_handle<remote_worker> {
public:
  using remote_handle::remote_handle;

  void status(callback<worker_status> done) override {
    call<worker_status>(std::move(done), [](auto& c, auto cb) {
      return c.worker.getStatusRequest().send().then([cb](auto response) mutable {
        (*cb)(read_worker_status(response.getStatus()));
      });
    });
  }

  void register_graph(std::string graph_bytes, callback<std::string> done) override {
    call<std::string>(std::move(done), [bytes = std::move(graph_bytes)](auto& c, auto cb) {
      auto req = c.worker.registerGraphRequest();
      req.setGraph(bytes_of(bytes));
      return req.send().then([cb](auto response) mutable {
        answer(cb, response, [&] { return to_std(response.getHandle()); });
      });
    });
  }

  void run_graph(const std::string& handle, int64_t step_id, named_tensors feeds,
                 std::vector<std::string> fetches, callback<named_tensors> done) override {
    run_graph_call(handle, step_id, std::move(feeds), std::move(fetches), false,
                   without_trace<named_tensors>(std::move(done)));
  }

  void run_graph_traced(const std::string& handle, int64_t step_id, named_tensors feeds,
                        std::vector<std::string> fetches,
                        callback<traced<named_tensors>> done) override {
    run_graph_call(handle, step_id, std::move(feeds), std::move(fetches), true, std::move(done));
  }

  void run_graph_call(const std::string& handle, int64_t step_id, named_tensors feeds,
                      std::vector<std::string> fetches, bool trace,
                      callback<traced<named_tensors>> done) {
    if (steps()) {
      step_message m;
      m.kind = step_call::run_graph;
      m.handle = handle;
      m.step_id = step_id;
      m.tensors = std::move(feeds);
      m.fetches = std::move(fetches);
      m.trace = trace;
      auto cb = std::make_shared<once<result<traced<named_tensors>>>>(std::move(done));
      ep_->steps->call(address(), std::move(m), [cb, trace](result<step_message> r) {
        if (!r)
          (*cb)(r.error());
        else if (!r->error.ok())
          (*cb)(r->error);
        else if (trace)
          (*cb)(traced<named_tensors>{std::move(r->tensors), std::move(r->record)});
        else
          (*cb)(traced<named_tensors>{std::move(r->tensors), {}});
      });
      return;
    }
    call<traced<named_tensors>>(
        std::move(done), [handle, step_id, feeds = std::move(feeds), fetches = std::move(fetches),
                          trace](auto& c, auto cb) {
          auto req = c.worker.runGraphRequest();
          req.setHandle(handle);
          req.setStepId(step_id);
          req.setTrace(trace);
          write_named(req.initFeeds(uint(feeds.size())), feeds);
          auto f = req.initFetches(uint(fetches.size()));
          for (size_t i = 0; i < fetches.size(); ++i)
            f.set(uint(i), fetches[i]);
          return req.send().then([cb, trace](auto response) mutable {
            auto s = read_status(response.getError());
            if (!s.ok()) {
              (*cb)(s);
              return;
            }
            auto tensors = read_named(response.getTensors());
            if (!tensors) {
              (*cb)(tensors.error());
              return;
            }
            traced<named_tensors> out{std::move(tensors).value(), {}};
            if (trace && response.hasTrace())
              out.trace = read_trace(response.getTrace());
            (*cb)(std::move(out));
          });
        });
  }

  void cleanup_step(int64_t step_id) override {
    if (steps()) {
      step_message m;
      m.kind = step_call::cleanup_step;
      m.step_id = step_id;
      ep_->steps->call(address(), std::move(m), nullptr);
      return;
    }
    call<bool>([](result<bool>) {}, [step_id](auto& c, auto cb) {
      auto req = c.worker.cleanupStepRequest();
      req.setStepId(step_id);
      return req.send().then([cb](auto) mutable { (*cb)(true); });
    });
  }

  void deregister_graph(const std::string& handle) override {
    call<bool>([](result<bool>) {}, [handle](auto& c, auto cb) {
      auto req = c.worker.deregisterGraphRequest();
      req.setHandle(handle);
      return req.send().then([cb](auto) mutable { (*cb)(true); });
    });
  }

  void heartbeat(std::function<void(runnel::status)> done) override {
    if (!steps()) {
      remote_worker::heartbeat(std::move(done));
      return;
    }
    step_message m;
    m.kind = step_call::heartbeat;
    ep_->steps->call(address(), std::move(m),
                     [done = std::move(done)](result<step_message> r) { done(r.error()); });
  }
};

class remote_master_impl final : public remote_handle<remote_master> {
public:
  using remote_handle::remote_handle;

  void create_session(std::string graph_bytes, bool cost_model,
                      callback<std::string> done) override {
    call<std::string>(std::move(done),
                      [bytes = std::move(graph_bytes), cost_model](auto& c, auto cb) {
                        auto req = c.master.createSessionRequest();
                        req.setGraph(bytes_of(bytes));
                        req.setCostModel(cost_model);
                        return req.send().then([cb](auto response) mutable {
                          answer(cb, response, [&] { return to_std(response.getHandle()); });
                        });
                      });
  }

  void extend_session(const std::string& handle, std::string graph_bytes,
                      std::function<void(runnel::status)> done) override {
    call<bool>(
        [done](result<bool> r) { done(r.error()); },
        [handle, bytes = std::move(graph_bytes)](auto& c, auto cb) {
          auto req = c.master.extendSessionRequest();
          req.setHandle(handle);
          req.setGraph(bytes_of(bytes));
          return req.send().then([cb](auto response) mutable {
            answer(cb, response, [&] { return true; });
          });
        });
  }

  void run(const std::string& handle, named_tensors feeds, std::vector<std::string> fetches,
           std::vector<std::string> targets, callback<std::vector<tensor>> done) override {
    run_call(handle, std::move(feeds), std::move(fetches), std::move(targets), false,
             without_trace<std::vector<tensor>>(std::move(done)));
  }

  void run_traced(const std::string& handle, named_tensors feeds,
                  std::vector<std::string> fetches, std::vector<std::string> targets,
                  callback<traced<std::vector<tensor>>> done) override {
    run_call(handle, std::move(feeds), std::move(fetches), std::move(targets), true,
             std::move(done));
  }

  void run_call(const std::string& handle, named_tensors feeds, std::vector<std::string> fetches,
                std::vector<std::string> targets, bool trace,
                callback<traced<std::vector<tensor>>> done) {
    if (steps()) {
      step_message m;
      m.kind = step_call::master_run;
      m.handle = handle;
      m.tensors = std::move(feeds);
      m.fetches = std::move(fetches);
      m.targets = std::move(targets);
      m.trace = trace;
      auto cb = std::make_shared<once<result<traced<std::vector<tensor>>>>>(std::move(done));
      ep_->steps->call(address(), std::move(m), [cb, trace](result<step_message> r) {
        if (!r) {
          (*cb)(r.error());
          return;
        }
        if (!r->error.ok()) {
          (*cb)(r->error);
          return;
        }
        traced<std::vector<tensor>> out;
        for (auto& [name, t] : r->tensors)
          out.value.push_back(std::move(t));
        if (trace)
          out.trace = std::move(r->record);
        (*cb)(std::move(out));
      });
      return;
    }
    call<traced<std::vector<tensor>>>(
        std::move(done), [handle, feeds = std::move(feeds), fetches = std::move(fetches),
                          targets = std::move(targets), trace](auto& c, auto cb) {
          auto req = c.master.runRequest();
          req.setHandle(handle);
          req.setTrace(trace);
          write_named(req.initFeeds(uint(feeds.size())), feeds);
          auto f = req.initFetches(uint(fetches.size()));
          for (size_t i = 0; i < fetches.size(); ++i)
            f.set(uint(i), fetches[i]);
          auto t = req.initTargets(uint(targets.size()));
          for (size_t i = 0; i < targets.size(); ++i)
            t.set(uint(i), targets[i]);
          return req.send().then([cb, trace](auto response) mutable {
            auto s = read_status(response.getError());
            if (!s.ok()) {
              (*cb)(s);
              return;
            }
            traced<std::vector<tensor>> out;
            for (auto tr : response.getTensors()) {
              auto v = read_tensor(tr);
              if (!v) {
                (*cb)(v.error().with_context("fetched tensor " + std::to_string(out.value.size())));
                return;
              }
              out.value.push_back(std::move(v).value());
            }
            if (trace && response.hasTrace())
              out.trace = read_trace(response.getTrace());
            (*cb)(std::move(out));
          });
        });
  }

  void close_session(const std::string& handle) override {
    call<bool>([](result<bool>) {}, [handle](auto& c, auto cb) {
      auto req = c.master.closeSessionRequest();
      req.setHandle(handle);
      return req.send().then([cb](auto) mutable { (*cb)(true); });
    });
  }

  void cancel_steps(const std::string& handle, std::function<void(status)> done) override {
    call<bool>([done](result<bool> r) { done(r ? status() : r.error()); },
               [handle](auto& c, auto cb) {
                 auto req = c.master.cancelStepsRequest();
                 req.setHandle(handle);
                 return req.send().then([cb](auto) mutable { (*cb)(true); });
               });
  }
};

} // namespace

std::shared_ptr<remote_worker> endpoint::worker(const std::string& address) {
  return std::make_shared<remote_worker_impl>(impl_, address);
}

std::shared_ptr<remote_master> endpoint::master(const std::string& address) {
  return std::make_shared<remote_master_impl>(impl_, address);
}

} // namespace runnel::net
