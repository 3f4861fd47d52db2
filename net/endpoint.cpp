// The endpoint's loop thread and its client side: connecting with the preamble, RPC connections
// to other nodes, and step connections handed to the step plane (docs/cluster.md). The data
// plane's sending side is in endpoint_send.cpp, the serving side in endpoint_serve.cpp, the
// remote handles in remote_handles.cpp.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>

#include "runnel/net/endpoint_impl.hpp"
#include "runnel/net/step_plane.hpp"

namespace runnel::net {

using namespace detail;

/// A kj exception as a status naming the peer.
status detail::from_exception(const kj::Exception& e, const std::string& peer) {
  std::string what = to_std(e.getDescription());
  if (e.getType() == kj::Exception::Type::DISCONNECTED)
    return unavailable("connection to " + peer + " lost: " + what);
  if (e.getType() == kj::Exception::Type::OVERLOADED)
    return unavailable(peer + " is overloaded: " + what);
  return unavailable(peer + ": " + what);
}

void detail::write_status(wire::Status::Builder b, const status& s) {
  b.setCode(int32_t(s.code()));
  b.setMessage(s.message());
}
status detail::read_status(wire::Status::Reader r) {
  if (r.getCode() == 0)
    return {};
  int code = r.getCode();
  if (code < 1 || code > int(error_code::unauthenticated))
    code = int(error_code::unknown);
  return status(error_code(code), to_std(r.getMessage()));
}

void detail::write_named(capnp::List<wire::NamedTensor>::Builder list, const named_tensors& ts) {
  for (size_t i = 0; i < ts.size(); ++i) {
    list[uint(i)].setName(ts[i].first);
    write_tensor(list[uint(i)].initTensor(), ts[i].second);
  }
}
result<named_tensors> detail::read_named(capnp::List<wire::NamedTensor>::Reader list) {
  named_tensors out;
  for (auto nt : list) {
    auto t = read_tensor(nt.getTensor());
    if (!t)
      return t.error().with_context("tensor '" + to_std(nt.getName()) + "'");
    out.emplace_back(to_std(nt.getName()), std::move(t).value());
  }
  return out;
}
std::vector<std::string> detail::read_texts(capnp::List<capnp::Text>::Reader list) {
  std::vector<std::string> out;
  for (auto t : list)
    out.push_back(to_std(t));
  return out;
}

worker_status detail::read_worker_status(wire::WorkerStatus::Reader r) {
  worker_status s;
  s.task = {to_std(r.getJob()), r.getTask()};
  s.incarnation = r.getIncarnation();
  s.cluster = to_std(r.getCluster());
  for (auto d : r.getDevices())
    s.devices.push_back({to_std(d.getName()), to_std(d.getType()), d.getMemoryBytes(),
                         d.getFlopsPerS(), d.getBytesPerS()});
  return s;
}

// ---- the loop state's client side ------------------------------------------------------

kj::Promise<void> endpoint::impl::loop_state::drain() {
  return wake.whenBecomesReadable().then([this]() {
    uint64_t count;
    [[maybe_unused]] auto n = ::read(ep.wake_fd, &count, sizeof count);
    std::deque<std::function<void()>> batch;
    {
      std::lock_guard lock(ep.mailbox_mu);
      batch.swap(ep.mailbox);
    }
    for (auto& t : batch)
      t();
    return drain();
  });
}

kj::Promise<kj::Own<kj::NetworkAddress>> endpoint::impl::loop_state::resolve(const std::string& address) {
  auto split = cluster_spec::split_address(address);
  if (!split)
    return KJ_EXCEPTION(FAILED, split.error().message());
  return io.provider->getNetwork().parseAddress(split->first, uint(split->second));
}

kj::Promise<kj::Own<kj::AsyncIoStream>>
endpoint::impl::loop_state::open(const std::string& address, conn_kind kind, std::string extra,
                                 std::shared_ptr<uint8_t> second) {
  // Connecting and the handshake share one deadline: a node that accepts TCP but never answers
  // (stopped, or its accept queue full) fails the call instead of holding it forever.
  auto handshake =
      resolve(address)
          .then([](kj::Own<kj::NetworkAddress> a) { return a->connect().attach(kj::mv(a)); })
          .then([this, address, kind](
                    kj::Own<kj::AsyncIoStream> stream) -> kj::Promise<kj::Own<kj::AsyncIoStream>> {
            // Step calls are calls: they must not queue behind tensors on a shared link.
            bool calls = kind == conn_kind::rpc || kind == conn_kind::step;
            set_traffic_class(*stream, calls ? ep.options.rpc_tos : ep.options.data_tos);
            if (!tls)
              return kj::mv(stream);
            // The server's certificate must name the host as the cluster spec gives it.
            auto host = cluster_spec::split_address(address).value().first;
            return tls->wrapClient(kj::mv(stream), host);
          })
          .then([this, kind, extra, second](kj::Own<kj::AsyncIoStream> stream) {
            std::string bytes = make_preamble(kind, ep.options.auth_token) + extra;
            auto pre = kj::heapArray<kj::byte>(bytes_of(bytes)); // (has NULs: not a string)
            auto& s = *stream;
            auto answer = kj::heap<kj::byte>(0);
            auto& a = *answer;
            return s.write(pre.begin(), pre.size())
                .attach(kj::mv(pre))
                .then([&s, &a]() { return s.read(&a, 1); })
                .then([&s, &a, second]() -> kj::Promise<int> {
                  if (handshake_answer(a) != handshake_answer::bad_version &&
                      !(handshake_answer(a) == handshake_answer::ok && second))
                    return -1;
                  // One more byte: the node's own version, or whether it mapped our ring.
                  auto v = kj::heap<kj::byte>(0);
                  auto& vr = *v;
                  return s.read(&vr, 1).then([&vr]() { return int(vr); }).attach(kj::mv(v));
                })
                .then([stream = kj::mv(stream), answer = kj::mv(answer),
                       second](int version) mutable -> kj::Own<kj::AsyncIoStream> {
                  switch (handshake_answer(*answer)) {
                    case handshake_answer::ok:
                      if (second)
                        *second = uint8_t(version);
                      return kj::mv(stream);
                    case handshake_answer::bad_version:
                      KJ_FAIL_REQUIRE("the node speaks Runnel wire version " +
                                      std::to_string(version) + "; this process speaks version " +
                                      std::to_string(wire_version) +
                                      " (run the same Runnel release on every node)");
                    case handshake_answer::bad_token:
                      KJ_FAIL_REQUIRE("the node refused our auth token (is --auth-token-file the "
                                      "same on both sides?)");
                    case handshake_answer::busy:
                      KJ_FAIL_REQUIRE("the node refused the connection: it is at its connection "
                                      "limit for this host");
                    default:
                      KJ_FAIL_REQUIRE("the node refused the connection preamble");
                  }
                });
          });
  return io.provider->getTimer().timeoutAfter(to_kj(ep.options.connect_timeout),
                                              kj::mv(handshake));
}

kj::Promise<endpoint::impl::loop_state::rpc_conn*> endpoint::impl::loop_state::rpc_to(const std::string& address) {
  auto& peer = rpc_peers[address];
  if (peer.conn)
    return peer.conn.get();
  KJ_IF_MAYBE(c, peer.connecting) {
    return c->addBranch().then([this, address]() -> kj::Promise<rpc_conn*> {
      return rpc_to(address);
    });
  }
  auto fork = open(address, conn_kind::rpc)
                  .then([this, address](kj::Own<kj::AsyncIoStream> stream) {
                    auto conn = kj::heap<rpc_conn>();
                    conn->stream = kj::mv(stream);
                    conn->network = kj::heap<capnp::TwoPartyVatNetwork>(
                        *conn->stream, capnp::rpc::twoparty::Side::CLIENT, rpc_options);
                    conn->rpc = kj::heap<capnp::RpcSystem<capnp::rpc::twoparty::VatId>>(
                        capnp::makeRpcClient(*conn->network));
                    capnp::MallocMessageBuilder vat;
                    auto id = vat.initRoot<capnp::rpc::twoparty::VatId>();
                    id.setSide(capnp::rpc::twoparty::Side::SERVER);
                    conn->node = conn->rpc->bootstrap(id).castAs<wire::Node>();
                    conn->worker = conn->node.workerRequest().send().getWorker();
                    conn->master = conn->node.masterRequest().send().getMaster();
                    // When it drops, forget it: the next call reconnects.
                    auto* raw = conn.get();
                    debug("rpc connection to " + address + " open");
                    tasks.add(conn->network->onDisconnect().then([this, address, raw]() {
                      debug("rpc connection to " + address + " closed");
                      auto it = rpc_peers.find(address);
                      if (it != rpc_peers.end() && it->second.conn.get() == raw)
                        rpc_peers.erase(it);
                    }));
                    auto& p = rpc_peers[address];
                    p.conn = kj::mv(conn);
                    p.connecting = nullptr;
                  },
                        [this, address](kj::Exception&& e) {
                          rpc_peers.erase(address);
                          kj::throwFatalException(kj::mv(e));
                        })
                  .fork();
  auto branch = fork.addBranch();
  peer.connecting = kj::mv(fork);
  return branch.then([this, address]() -> kj::Promise<rpc_conn*> {
    auto it = rpc_peers.find(address);
    if (it == rpc_peers.end() || !it->second.conn)
      return KJ_EXCEPTION(DISCONNECTED, "connection closed while opening");
    return it->second.conn.get();
  });
}

int detail::take_socket(kj::AsyncIoStream& s) {
  int fd = -1;
  KJ_IF_MAYBE (f, s.getFd()) {
    fd = ::fcntl(*f, F_DUPFD_CLOEXEC, 0);
  }
  if (fd < 0)
    return -1;
  // The copy shares the socket's flags: kj made it non-blocking, and kj reads it no more.
  int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

void endpoint::impl::loop_state::open_step(const std::string& address,
                                           std::function<void(result<int>)> done) {
  // Answered once: with the socket, the failure, or `cancelled` if the loop stops first.
  auto cb = std::make_shared<once<result<int>>>(std::move(done));
  tasks.add(
      open(address, conn_kind::step)
          .then(
              [cb, peer = describe_peer(ep.options, address)](kj::Own<kj::AsyncIoStream> stream) {
                int fd = take_socket(*stream);
                if (fd < 0)
                  (*cb)(unavailable(peer + ": cannot take the step connection's socket"));
                else
                  (*cb)(fd);
              },
              [cb, peer = describe_peer(ep.options, address)](kj::Exception&& e) {
                (*cb)(from_exception(e, peer));
              }));
}

void endpoint::impl::loop_state::forget(const std::string& address) {
  rpc_peers.erase(address);
  auto it = data_peers.find(address);
  if (it != data_peers.end())
    it->second->broken = true;
}

// ---- the loop thread -------------------------------------------------------------------------

status endpoint::impl::loop_state::setup_tls() {
  auto& o = ep.options;
  int given = !o.tls_cert.empty() + !o.tls_key.empty() + !o.tls_ca.empty();
  if (given == 0)
    return {};
  if (given != 3)
    return invalid_argument("TLS needs a certificate, its key and the CA (--tls-cert, --tls-key "
                            "and --tls-ca): give all three or none");
  auto read = [](const std::string& path, std::string& out) -> status {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f)
      return not_found("cannot read " + path + ": " + std::strerror(errno));
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;)
      out.append(buf, n);
    std::fclose(f);
    return {};
  };
  std::string cert, key, ca;
  RUNNEL_RETURN_IF_ERROR(read(o.tls_cert, cert));
  RUNNEL_RETURN_IF_ERROR(read(o.tls_key, key));
  RUNNEL_RETURN_IF_ERROR(read(o.tls_ca, ca));
  KJ_IF_MAYBE(e, kj::runCatchingExceptions([&]() {
                tls_keypair = kj::heap<kj::TlsKeypair>(
                    kj::TlsKeypair{kj::TlsPrivateKey(kj::StringPtr(key.c_str())),
                                   kj::TlsCertificate(kj::StringPtr(cert.c_str()))});
                tls_ca = kj::heap<kj::TlsCertificate>(kj::StringPtr(ca.c_str()));
                kj::TlsContext::Options t;
                t.useSystemTrustStore = false;
                t.verifyClients = true;
                t.trustedCertificates = kj::arrayPtr(tls_ca.get(), 1);
                t.defaultKeypair = *tls_keypair;
                tls = kj::heap<kj::TlsContext>(kj::mv(t));
              })) {
    return invalid_argument("TLS setup from " + o.tls_cert + ", " + o.tls_key + " and " +
                            o.tls_ca + " failed: " + to_std(e->getDescription()));
  }
  return {};
}

namespace {
bool is_loopback(const sockaddr_storage& sa) {
  if (sa.ss_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&sa);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (sa.ss_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(&sa);
    return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
  }
  return sa.ss_family == AF_UNIX;
}
} // namespace

void endpoint::impl::run_loop(std::promise<status>& started) {
  kj::Own<loop_state> state;
  KJ_IF_MAYBE(e, kj::runCatchingExceptions([&]() { state = kj::heap<loop_state>(*this); })) {
    started.set_value(internal_error("cannot start the network loop: " +
                                     to_std(e->getDescription())));
    return;
  }
  loop = state.get();
  auto& ws = state->io.waitScope;
  if (status s = state->setup_tls(); !s.ok()) {
    loop = nullptr;
    state = nullptr;
    started.set_value(s);
    return;
  }
  if (!options.listen.empty()) {
    auto split = cluster_spec::split_address(options.listen);
    if (!split) {
      loop = nullptr;
      started.set_value(split.error());
      return;
    }
    KJ_IF_MAYBE(e, kj::runCatchingExceptions([&]() {
                  auto addr = state->io.provider->getNetwork()
                                  .parseAddress(split->first, uint(split->second))
                                  .wait(ws);
                  state->listener = addr->listen();
                  port = int(state->listener->getPort());
                  sockaddr_storage sa{};
                  uint len = sizeof sa;
                  state->listener->getsockname(reinterpret_cast<sockaddr*>(&sa), &len);
                  loopback_only = is_loopback(sa);
                })) {
      loop = nullptr;
      state = nullptr;
      started.set_value(unavailable("cannot listen on " + options.listen + ": " +
                                    to_std(e->getDescription())));
      return;
    }
    if (!loopback_only && options.auth_token.empty() && !options.allow_unauthenticated) {
      loop = nullptr;
      state = nullptr;
      started.set_value(failed_precondition(
          "refusing to listen on " + options.listen +
          " without an auth token: it is reachable from other hosts, and any of them could "
          "register and run graphs here. Give the cluster a shared secret (--auth-token-file), "
          "listen on a loopback address, or allow it explicitly on a trusted network "
          "(--allow-unauthenticated)"));
      return;
    }
    state->tasks.add(state->accept_loop());
  }
  auto stop = kj::newPromiseAndFulfiller<void>();
  auto* stop_fulfiller = stop.fulfiller.get();
  stop_task = [stop_fulfiller]() { stop_fulfiller->fulfill(); }; // the destructor posts it
  state->tasks.add(state->drain());
  started.set_value(status());
  stop.promise.wait(ws);
  // Tear down on this thread: the tasks first (pending calls' callbacks get `cancelled`), then
  // the connections, then the event loop (loop_state's members are ordered for that).
  state = nullptr;
  loop = nullptr;
}

endpoint::endpoint(std::shared_ptr<impl> i) : impl_(std::move(i)) {}

std::string describe_peer(const endpoint_options& options, const std::string& address) {
  auto it = options.task_names.find(address);
  if (it == options.task_names.end())
    return "task at " + address;
  return "task " + it->second + " at " + address;
}

result<std::unique_ptr<endpoint>> endpoint::start(endpoint_options options) {
  auto i = std::make_shared<impl>();
  i->options = std::move(options);
  if (i->options.auth_token.size() > max_token_bytes)
    return invalid_argument("auth token of " + std::to_string(i->options.auth_token.size()) +
                            " bytes (at most " + std::to_string(max_token_bytes) + ")");
  if (i->options.chunk_bytes == 0)
    i->options.chunk_bytes = uint64_t(512) << 20;
  i->wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (i->wake_fd < 0)
    return internal_error("eventfd failed: " + std::string(std::strerror(errno)));
  if (const char* v = std::getenv("RUNNEL_STEP_CALLS"); v && std::string(v) == "0")
    i->options.step_calls = false;
  if (const char* v = std::getenv("RUNNEL_SHM"); v && std::string(v) == "0")
    i->options.shm_ring_bytes = 0;
  if (const char* v = std::getenv("RUNNEL_SHM_LEND"); v && std::string(v) == "0")
    i->options.shm_lend = false;
  if (const char* v = std::getenv("RUNNEL_DIRECT_SENDS"); v && std::string(v) == "0")
    i->options.direct_sends = false;
  auto* raw = i.get();
  i->steps = std::make_shared<step_plane>(
      *raw, [raw](const std::string& address, std::function<void(result<int>)> done) {
        // (Once the loop stops, the plane has failed its calls: a dropped task answers nothing.)
        auto cb = std::make_shared<std::function<void(result<int>)>>(std::move(done));
        if (!raw->post([raw, address, cb] { raw->loop->open_step(address, std::move(*cb)); }))
          (*cb)(cancelled("the network endpoint shut down"));
      });
  std::promise<status> started;
  auto ready = started.get_future();
  i->thread = std::thread([raw, &started] { raw->run_loop(started); });
  status s = ready.get();
  if (!s.ok()) {
    i->thread.join();
    return s;
  }
  return std::unique_ptr<endpoint>(new endpoint(std::move(i)));
}

endpoint::~endpoint() {
  // First the step connections' threads: they call the services and post to the loop.
  impl_->steps->stop();
  impl_->post(impl_->stop_task);
  impl_->thread.join();
  std::deque<std::function<void()>> left;
  {
    std::lock_guard lock(impl_->mailbox_mu);
    impl_->stopping = true;
    left.swap(impl_->mailbox);
  }
  left.clear(); // tasks never run: their callbacks answer `cancelled` as they are released
}

int endpoint::port() const {
  return impl_->port.load();
}

bool endpoint::loopback_only() const {
  return impl_->loopback_only.load();
}

void endpoint::send_tensor(const std::string& address, int64_t step, const std::string& key,
                           tensor value, send_options options, std::function<void(status)> done) {
  auto* i = impl_.get();
  if (i->send_direct(address, step, key, value, options, done))
    return;
  auto cb = std::make_shared<once<status>>(std::move(done));
  i->post([i, address, step, key, value = std::move(value), options, cb]() mutable {
    i->loop->send_tensor(address, step, key, std::move(value), options,
                         [cb](status s) { (*cb)(std::move(s)); });
  });
}

void endpoint::forget_peer(const std::string& address) {
  auto* i = impl_.get();
  i->steps->forget(address);
  i->forget_direct(address, nullptr);
  i->post([i, address] { i->loop->forget(address); });
}

const endpoint_stats& endpoint::stats() const {
  return impl_->stats;
}

std::map<std::string, peer_traffic> endpoint::traffic_by_peer() const {
  std::lock_guard lock(impl_->peer_bytes_mu);
  return impl_->peer_bytes;
}

status send_raw_bytes(const std::string& address, const std::string& bytes) {
  KJ_IF_MAYBE(e, kj::runCatchingExceptions([&]() {
                auto io = kj::setupAsyncIo();
                auto split = cluster_spec::split_address(address).value();
                auto addr = io.provider->getNetwork()
                                .parseAddress(split.first, uint(split.second))
                                .wait(io.waitScope);
                auto stream = addr->connect().wait(io.waitScope);
                stream->write(bytes.data(), bytes.size()).wait(io.waitScope);
                // Read what the node answers (if anything) until it closes; a node closing on
                // unread garbage resets the connection, which is no failure to send.
                char buf[64];
                kj::runCatchingExceptions([&]() {
                  while (stream->tryRead(buf, 1, sizeof buf).wait(io.waitScope) > 0) {
                  }
                });
              })) {
    return unavailable("sending raw bytes to " + address + ": " + to_std(e->getDescription()));
  }
  return {};
}

} // namespace runnel::net
