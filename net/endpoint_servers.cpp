// The endpoint's RPC services: the worker (register, run and clean up graphs), the master (sessions
// over the cluster) and the node (their bootstrap), each call bounded by the per-peer limits.
#include "runnel/net/endpoint_impl.hpp"

namespace runnel::net {

using namespace detail;

namespace {

class worker_server final : public wire::Worker::Server {
public:
  worker_server(endpoint::impl& ep, std::shared_ptr<int> calls)
      : ep_(ep), calls_(std::move(calls)) {}

  kj::Promise<void> getStatus(GetStatusContext context) override {
    auto s = ep_.options.worker->status();
    auto b = context.getResults().initStatus();
    b.setJob(s.task.job);
    b.setTask(s.task.task);
    b.setIncarnation(s.incarnation);
    b.setCluster(s.cluster);
    auto devs = b.initDevices(uint(s.devices.size()));
    for (size_t i = 0; i < s.devices.size(); ++i) {
      auto& d = s.devices[i];
      devs[uint(i)].setName(d.name);
      devs[uint(i)].setType(d.type);
      devs[uint(i)].setMemoryBytes(d.memory_bytes);
      devs[uint(i)].setFlopsPerS(d.flops_per_s);
      devs[uint(i)].setBytesPerS(d.bytes_per_s);
    }
    return kj::READY_NOW;
  }

  kj::Promise<void> registerGraph(RegisterGraphContext context) override {
    std::string bytes = to_std(context.getParams().getGraph());
    context.releaseParams();
    return await<std::string>(
        [&](callback<std::string> done) {
          ep_.options.worker->register_graph(std::move(bytes), std::move(done));
        },
        [context](result<std::string>& r) mutable {
          auto res = context.getResults();
          write_status(res.initError(), r.error());
          if (r)
            res.setHandle(*r);
        });
  }

  kj::Promise<void> runGraph(RunGraphContext context) override {
    int64_t received = steady_ns();
    auto p = context.getParams();
    bool trace = p.getTrace();
    std::string handle = to_std(p.getHandle());
    int64_t step = p.getStepId();
    auto feeds = read_named(p.getFeeds());
    auto fetches = read_texts(p.getFetches());
    context.releaseParams();
    if (!feeds) {
      write_status(context.getResults().initError(), feeds.error());
      return kj::READY_NOW;
    }
    if (trace)
      return await<traced<named_tensors>>(
          [&](callback<traced<named_tensors>> done) {
            ep_.options.worker->run_graph_traced(handle, step, std::move(feeds).value(),
                                                 std::move(fetches), std::move(done));
          },
          [context, received](result<traced<named_tensors>>& r) mutable {
            auto res = context.getResults();
            write_status(res.initError(), r.error());
            if (!r)
              return;
            write_named(res.initTensors(uint(r->value.size())), r->value);
            r->trace.received_ns = received;
            r->trace.replied_ns = steady_ns();
            write_trace(res.initTrace(), r->trace);
          });
    return await<named_tensors>(
        [&](callback<named_tensors> done) {
          ep_.options.worker->run_graph(handle, step, std::move(feeds).value(),
                                        std::move(fetches), std::move(done));
        },
        [context](result<named_tensors>& r) mutable {
          auto res = context.getResults();
          write_status(res.initError(), r.error());
          if (r)
            write_named(res.initTensors(uint(r->size())), *r);
        });
  }

  kj::Promise<void> cleanupStep(CleanupStepContext context) override {
    ep_.options.worker->cleanup_step(context.getParams().getStepId());
    return kj::READY_NOW;
  }

  kj::Promise<void> deregisterGraph(DeregisterGraphContext context) override {
    ep_.options.worker->deregister_graph(to_std(context.getParams().getHandle()));
    return kj::READY_NOW;
  }

  // Starts a service call whose answer comes through a callback, from any thread; `fill` writes
  // the RPC results on the loop thread, unless the call was cancelled meanwhile.
  template <class T, class Start, class Fill>
  kj::Promise<void> await(Start start, Fill fill) {
    return await_reply<T>(ep_, calls_, start, fill);
  }

  template <class T, class Start, class Fill>
  static kj::Promise<void> await_reply(endpoint::impl& ep, const std::shared_ptr<int>& calls,
                                       Start& start, Fill fill) {
    if (*calls >= ep.options.max_pending_rpcs) {
      ep.stats.rpcs_refused++;
      ep.loop->log_limit("refused an RPC call: " + std::to_string(*calls) +
                         " calls already in flight on one connection (max_pending_rpcs)");
      result<T> refused = resource_exhausted(
          "the node has " + std::to_string(*calls) +
          " calls in flight on this connection (max_pending_rpcs); retry later");
      fill(refused);
      return kj::READY_NOW;
    }
    ++*calls;
    auto paf = kj::newPromiseAndFulfiller<void>();
    uint64_t id = ep.next_reply_id++;
    ep.loop->pending_replies.emplace(id, kj::mv(paf.fulfiller));
    auto slot = std::make_shared<std::optional<result<T>>>();
    auto* epp = &ep;
    start([epp, id, slot](result<T> r) {
      // Plain data only crosses threads; the loop finds the call by id, if it is still there.
      epp->post([epp, id, slot, r = std::move(r)]() mutable {
        auto it = epp->loop->pending_replies.find(id);
        if (it == epp->loop->pending_replies.end())
          return; // cancelled
        slot->emplace(std::move(r));
        auto f = kj::mv(it->second);
        epp->loop->pending_replies.erase(it);
        f->fulfill();
      });
    });
    return paf.promise
        .then([slot, fill = kj::mv(fill)]() mutable { fill(**slot); })
        .attach(kj::defer([epp, id, calls]() {
          --*calls;
          if (epp->loop)
            epp->loop->pending_replies.erase(id);
        }));
  }

private:
  endpoint::impl& ep_;
  std::shared_ptr<int> calls_;
};

class master_server final : public wire::Master::Server {
public:
  master_server(endpoint::impl& ep, std::shared_ptr<int> calls)
      : ep_(ep), calls_(std::move(calls)) {}

  kj::Promise<void> createSession(CreateSessionContext context) override {
    std::string bytes = to_std(context.getParams().getGraph());
    bool cost = context.getParams().getCostModel();
    context.releaseParams();
    auto start = [&](callback<std::string> done) {
      ep_.options.master->create_session(std::move(bytes), cost, std::move(done));
    };
    return worker_server::await_reply<std::string>(
        ep_, calls_, start, [context](result<std::string>& r) mutable {
          auto res = context.getResults();
          write_status(res.initError(), r.error());
          if (r)
            res.setHandle(*r);
        });
  }

  kj::Promise<void> extendSession(ExtendSessionContext context) override {
    std::string handle = to_std(context.getParams().getHandle());
    std::string bytes = to_std(context.getParams().getGraph());
    context.releaseParams();
    auto start = [&](callback<bool> done) {
      ep_.options.master->extend_session(handle, std::move(bytes), [done](status s) {
        if (s.ok())
          done(true);
        else
          done(s);
      });
    };
    return worker_server::await_reply<bool>(ep_, calls_, start, [context](result<bool>& r) mutable {
      write_status(context.getResults().initError(), r.error());
    });
  }

  kj::Promise<void> run(RunContext context) override {
    int64_t received = steady_ns();
    auto p = context.getParams();
    bool trace = p.getTrace();
    std::string handle = to_std(p.getHandle());
    auto feeds = read_named(p.getFeeds());
    auto fetches = read_texts(p.getFetches());
    auto targets = read_texts(p.getTargets());
    context.releaseParams();
    if (!feeds) {
      write_status(context.getResults().initError(), feeds.error());
      return kj::READY_NOW;
    }
    if (trace) {
      auto start = [&](callback<traced<std::vector<tensor>>> done) {
        ep_.options.master->run_traced(handle, std::move(feeds).value(), std::move(fetches),
                                       std::move(targets), std::move(done));
      };
      return worker_server::await_reply<traced<std::vector<tensor>>>(
          ep_, calls_, start,
          [context, received](result<traced<std::vector<tensor>>>& r) mutable {
            auto res = context.getResults();
            write_status(res.initError(), r.error());
            if (!r)
              return;
            auto list = res.initTensors(uint(r->value.size()));
            for (size_t i = 0; i < r->value.size(); ++i)
              write_tensor(list[uint(i)], r->value[i]);
            r->trace.received_ns = received;
            r->trace.replied_ns = steady_ns();
            write_trace(res.initTrace(), r->trace);
          });
    }
    auto start = [&](callback<std::vector<tensor>> done) {
      ep_.options.master->run(handle, std::move(feeds).value(), std::move(fetches),
                              std::move(targets), std::move(done));
    };
    return worker_server::await_reply<std::vector<tensor>>(
        ep_, calls_, start, [context](result<std::vector<tensor>>& r) mutable {
          auto res = context.getResults();
          write_status(res.initError(), r.error());
          if (r) {
            auto list = res.initTensors(uint(r->size()));
            for (size_t i = 0; i < r->size(); ++i)
              write_tensor(list[uint(i)], (*r)[i]);
          }
        });
  }

  kj::Promise<void> closeSession(CloseSessionContext context) override {
    ep_.options.master->close_session(to_std(context.getParams().getHandle()));
    return kj::READY_NOW;
  }

  kj::Promise<void> cancelSteps(CancelStepsContext context) override {
    // The steps are failed before this returns (their tasks are told to clean up).
    ep_.options.master->cancel_steps(to_std(context.getParams().getHandle()), [](status) {});
    return kj::READY_NOW;
  }

private:
  endpoint::impl& ep_;
  std::shared_ptr<int> calls_;
};

class node_server final : public wire::Node::Server {
public:
  node_server(endpoint::impl& ep, std::shared_ptr<int> calls)
      : ep_(ep), calls_(std::move(calls)) {}
  kj::Promise<void> worker(WorkerContext context) override {
    if (!ep_.options.worker)
      return KJ_EXCEPTION(UNIMPLEMENTED, "this node serves no worker");
    context.getResults().setWorker(kj::heap<worker_server>(ep_, calls_));
    return kj::READY_NOW;
  }
  kj::Promise<void> master(MasterContext context) override {
    if (!ep_.options.master)
      return KJ_EXCEPTION(UNIMPLEMENTED, "this node serves no master");
    context.getResults().setMaster(kj::heap<master_server>(ep_, calls_));
    return kj::READY_NOW;
  }

private:
  endpoint::impl& ep_;
  std::shared_ptr<int> calls_;
};

} // namespace

kj::Own<capnp::Capability::Server> make_node_server(endpoint::impl& ep,
                                                     std::shared_ptr<int> calls) {
  return kj::heap<node_server>(ep, kj::mv(calls));
}


} // namespace runnel::net
