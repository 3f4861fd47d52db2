// Step calls on connections of their own, read and answered off the event loop (step_plane.hpp).
#include "runnel/net/step_plane.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <unordered_map>

#include "runnel/net/endpoint_impl.hpp"

namespace runnel::net {

using clock_type = std::chrono::steady_clock;

// ---- the socket ------------------------------------------------------------------------------

step_link::~step_link() {
  ::close(fd_);
}

void step_link::shut() {
  std::lock_guard lock(mu_);
  if (!shut_) {
    shut_ = true;
    ::shutdown(fd_, SHUT_RDWR);
  }
}

bool step_link::write(const encoded_step& m) {
  std::vector<iovec> iov;
  iov.reserve(1 + m.payloads.size());
  iov.push_back({const_cast<char*>(m.head.data()), m.head.size()});
  for (auto& t : m.payloads)
    iov.push_back({t.raw_data(), t.bytes()});
  std::lock_guard lock(mu_);
  if (shut_)
    return false;
  size_t first = 0;
  while (first < iov.size()) {
    msghdr msg{};
    msg.msg_iov = iov.data() + first;
    msg.msg_iovlen = std::min<size_t>(iov.size() - first, 1024);
    ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      shut_ = true;
      ::shutdown(fd_, SHUT_RDWR); // the reading thread sees the end and fails the calls
      return false;
    }
    // Skip what was written, then go on from the middle of a piece if need be.
    auto left = size_t(n);
    while (first < iov.size() && left >= iov[first].iov_len)
      left -= iov[first++].iov_len;
    if (left > 0) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  return true;
}

// ---- reading a message -----------------------------------------------------------------------

namespace {

/// Reads `n` bytes. With `at_start` (nothing of the message read yet), a clean end of stream is
/// `out_of_range` and a receive timeout with no byte is `deadline_exceeded`; in the middle of a
/// message, a stall longer than `stall` is `unavailable`.
status read_full(int fd, void* buf, size_t n, bool at_start, std::chrono::milliseconds stall,
                 uint64_t& bytes_read) {
  auto* p = static_cast<char*>(buf);
  size_t got = 0;
  auto progress = clock_type::now();
  while (got < n) {
    ssize_t r = ::recv(fd, p + got, n - got, 0);
    if (r > 0) {
      got += size_t(r);
      bytes_read += uint64_t(r);
      progress = clock_type::now();
      continue;
    }
    if (r == 0) {
      if (got == 0 && at_start)
        return out_of_range("the connection closed");
      return unavailable("the connection closed in the middle of a message");
    }
    if (errno == EINTR)
      continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (got == 0 && at_start)
        return deadline_exceeded("no message yet");
      if (stall.count() > 0 && clock_type::now() - progress > stall)
        return unavailable("no byte for " + std::to_string(stall.count()) +
                           " ms in the middle of a message");
      continue;
    }
    return unavailable(std::strerror(errno));
  }
  return {};
}

/// Reads `total` bytes into `out` as they arrive (each buffer as large as everything before it),
/// so that a length cannot reserve memory its sender never fills.
status read_grown(int fd, uint64_t total, std::vector<char>& out, std::chrono::milliseconds stall,
                  uint64_t& bytes_read) {
  constexpr uint64_t first_piece = uint64_t(1) << 20;
  out.clear();
  uint64_t got = 0;
  while (got < total) {
    uint64_t n = std::min(total - got, std::max(first_piece, got));
    out.resize(size_t(got + n));
    if (auto s = read_full(fd, out.data() + got, size_t(n), false, stall, bytes_read); !s.ok())
      return s;
    got += n;
  }
  return {};
}

} // namespace

result<step_message> read_step_message(int fd, const step_read_limits& limits,
                                       std::chrono::milliseconds stall, uint64_t& bytes_read) {
  uint32_t length = 0;
  if (auto s = read_full(fd, &length, 4, true, stall, bytes_read); !s.ok())
    return s;
  if (length == 0 || length % 8 != 0 || length > limits.max_header_bytes)
    return invalid_argument("header length " + std::to_string(length) + " is invalid");
  std::vector<uint64_t> words(length / 8);
  if (length <= (uint32_t(1) << 20)) {
    if (auto s = read_full(fd, words.data(), length, false, stall, bytes_read); !s.ok())
      return s;
  } else {
    std::vector<char> staged;
    if (auto s = read_grown(fd, length, staged, stall, bytes_read); !s.ok())
      return s;
    std::memcpy(words.data(), staged.data(), length);
  }
  auto h =
      decode_step_header(words.data(), length, {.max_payload_bytes = limits.max_payload_bytes});
  if (!h)
    return h.error();
  auto& m = h->message;
  for (size_t i = 0; i < h->tensors.size(); ++i) {
    auto& d = h->tensors[i];
    if (d.type == dtype::string)
      continue; // whole in the header
    std::vector<char> staged;
    if (d.payload_bytes > limits.direct_payload_bytes)
      if (auto s = read_grown(fd, d.payload_bytes, staged, stall, bytes_read); !s.ok())
        return s;
    tensor t;
    try {
      t = tensor(d.type, d.shape);
    } catch (const std::exception& e) {
      return resource_exhausted("cannot allocate tensor '" + d.key + "': " + e.what());
    }
    if (!staged.empty())
      std::memcpy(t.raw_data(), staged.data(), staged.size());
    else if (d.payload_bytes > 0)
      if (auto s = read_full(fd, t.raw_data(), d.payload_bytes, false, stall, bytes_read); !s.ok())
        return s;
    m.tensors[i].second = std::move(t);
  }
  return std::move(m);
}

// ---- the plane -------------------------------------------------------------------------------

struct step_plane::client {
  std::string address;
  std::mutex mu;
  bool open = false;   ///< connected: calls are written at once
  bool broken = false; ///< failed or forgotten: calls fail with `why`
  status why;
  std::vector<encoded_step> queued; ///< written when the connection opens
  std::shared_ptr<step_link> link;
  std::unordered_map<uint64_t, reply_fn> pending;
};

step_plane::step_plane(endpoint::impl& ep, open_fn open) : ep_(ep), open_(std::move(open)) {}

namespace {
step_read_limits limits_of(const endpoint_options& o) {
  return {.max_header_bytes = o.max_rpc_message_bytes,
          .max_payload_bytes = o.max_payload_bytes,
          .direct_payload_bytes = o.direct_payload_bytes};
}
} // namespace

std::shared_ptr<step_plane::client> step_plane::client_for(const std::string& address) {
  std::shared_ptr<client> c;
  {
    std::lock_guard lock(mu_);
    if (stopping_)
      return nullptr;
    auto& slot = clients_[address];
    if (slot) {
      std::lock_guard clock(slot->mu);
      if (!slot->broken)
        return slot;
    }
    slot = std::make_shared<client>();
    slot->address = address;
    c = slot;
  }
  open_(address,
        [self = shared_from_this(), c](result<int> fd) { self->connected(c, std::move(fd)); });
  return c;
}

void step_plane::call(const std::string& address, step_message m, reply_fn reply) {
  auto c = client_for(address);
  if (!c) {
    if (reply)
      reply(cancelled("the network endpoint shut down"));
    return;
  }
  m.call_id = next_call_++;
  auto bytes = encode_step_message(m);
  std::shared_ptr<step_link> link;
  {
    std::unique_lock lock(c->mu);
    if (c->broken) {
      status why = c->why;
      lock.unlock();
      if (reply)
        reply(why);
      return;
    }
    if (reply)
      c->pending.emplace(m.call_id, std::move(reply));
    if (!c->open) {
      c->queued.push_back(std::move(bytes));
      return;
    }
    link = c->link;
  }
  // A failed write shuts the link: the reading thread then fails the calls in flight.
  link->write(bytes);
}

void step_plane::connected(const std::shared_ptr<client>& c, result<int> fd) {
  if (!fd) {
    fail(c, fd.error());
    return;
  }
  auto link = std::make_shared<step_link>(*fd);
  {
    std::lock_guard lock(mu_);
    if (stopping_) {
      link->shut();
      return; // stop() failed the calls
    }
    ++threads_;
  }
  {
    std::lock_guard lock(c->mu);
    if (c->broken) {
      link->shut();
      end_thread();
      return;
    }
    c->link = link;
    // Under the lock: calls made meanwhile queue behind these.
    for (auto& q : c->queued)
      if (!link->write(q))
        break;
    c->queued.clear();
    c->open = true;
  }
  std::thread([self = shared_from_this(), c] { self->read_replies(c); }).detach();
}

void step_plane::read_replies(std::shared_ptr<client> c) {
  std::shared_ptr<step_link> link;
  {
    std::lock_guard lock(c->mu);
    link = c->link;
  }
  auto limits = limits_of(ep_.options);
  std::string peer = describe_peer(ep_.options, c->address);
  uint64_t bytes = 0;
  for (;;) {
    auto m = read_step_message(link->fd(), limits, std::chrono::milliseconds(0), bytes);
    if (!m) {
      status e = m.error();
      if (e.code() == error_code::invalid_argument)
        ep_.log("step connection to " + peer + ": malformed reply (" + e.message() +
                "); closing the connection");
      fail(c, unavailable(
                  "connection to " + peer + " lost: " +
                  (e.code() == error_code::out_of_range ? "closed by the task" : e.message())));
      break;
    }
    if (m->kind != step_call::run_graph_reply && m->kind != step_call::master_run_reply &&
        m->kind != step_call::heartbeat_reply && m->kind != step_call::refused) {
      ep_.log("step connection to " + peer + ": a call where a reply belongs; closing it");
      fail(c, unavailable("connection to " + peer + " lost: it broke the step-call protocol"));
      break;
    }
    reply_fn fn;
    {
      std::lock_guard lock(c->mu);
      auto it = c->pending.find(m->call_id);
      if (it != c->pending.end()) {
        fn = std::move(it->second);
        c->pending.erase(it);
      }
    }
    if (!fn)
      continue; // failed already (forgotten), or a call that wanted no reply
    if (m->kind == step_call::refused)
      fn(m->error);
    else
      fn(std::move(m).value());
  }
  link->shut();
  end_thread();
}

void step_plane::fail(const std::shared_ptr<client>& c, status why) {
  std::unordered_map<uint64_t, reply_fn> pending;
  std::shared_ptr<step_link> link;
  {
    std::lock_guard lock(c->mu);
    if (!c->broken) {
      c->broken = true;
      c->why = why;
    }
    pending.swap(c->pending);
    c->queued.clear();
    link = c->link;
  }
  if (link)
    link->shut();
  {
    std::lock_guard lock(mu_);
    auto it = clients_.find(c->address);
    if (it != clients_.end() && it->second == c)
      clients_.erase(it);
  }
  for (auto& [id, fn] : pending)
    fn(why);
}

void step_plane::forget(const std::string& address) {
  std::shared_ptr<client> c;
  {
    std::lock_guard lock(mu_);
    auto it = clients_.find(address);
    if (it != clients_.end())
      c = it->second;
  }
  if (c)
    fail(c, unavailable("connection to " + describe_peer(ep_.options, address) +
                        " closed: the task was dropped as failed or restarted"));
}

void step_plane::stop() {
  std::vector<std::shared_ptr<client>> clients;
  std::vector<std::shared_ptr<step_link>> links;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    for (auto& [address, c] : clients_)
      clients.push_back(c);
    for (auto& w : served_)
      if (auto l = w.lock())
        links.push_back(std::move(l));
  }
  for (auto& c : clients)
    fail(c, cancelled("the network endpoint shut down"));
  for (auto& l : links)
    l->shut();
  std::unique_lock lock(mu_);
  threads_done_.wait(lock, [this] { return threads_ == 0; });
}

void step_plane::end_thread() {
  std::lock_guard lock(mu_);
  if (--threads_ == 0)
    threads_done_.notify_all();
}

// ---- serving ---------------------------------------------------------------------------------

void step_plane::serve(int fd, std::string peer, std::function<void()> ended) {
  auto link = std::make_shared<step_link>(fd);
  {
    std::lock_guard lock(mu_);
    if (stopping_) {
      link->shut();
      ended();
      return;
    }
    ++threads_;
    std::erase_if(served_, [](const std::weak_ptr<step_link>& w) { return w.expired(); });
    served_.push_back(link);
  }
  std::thread([self = shared_from_this(), link, peer = std::move(peer), ended = std::move(ended)] {
    self->serve_connection(link, peer);
    link->shut();
    ended();
    self->end_thread();
  }).detach();
}

void step_plane::serve_connection(std::shared_ptr<step_link> link, const std::string& peer) {
  auto idle = ep_.options.idle_timeout;
  // Reads wake at least this often to check the idle timeout.
  auto tick = std::chrono::milliseconds(1000);
  if (idle.count() > 0)
    tick = std::clamp(idle / 4, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
  timeval tv{long(tick.count() / 1000), long(tick.count() % 1000 * 1000)};
  ::setsockopt(link->fd(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  auto limits = limits_of(ep_.options);
  auto in_flight = std::make_shared<std::atomic<int>>(0);
  auto last = clock_type::now();
  uint64_t messages = 0;
  for (;;) {
    uint64_t bytes = 0;
    auto m = read_step_message(link->fd(), limits, idle, bytes); // idle 0: no stall limit either
    ep_.stats.bytes_received += bytes;
    if (!m) {
      status e = m.error();
      if (e.code() == error_code::deadline_exceeded) {
        if (idle.count() > 0 && *in_flight == 0 && clock_type::now() - last >= idle) {
          ep_.stats.idle_closed++;
          return;
        }
        continue;
      }
      if (e.code() == error_code::invalid_argument || e.code() == error_code::resource_exhausted) {
        ep_.stats.frames_rejected++;
        ep_.log("step connection from " + peer + ": message " + std::to_string(messages) +
                " rejected: " + e.message() + "; closing the connection");
      }
      return;
    }
    last = clock_type::now();
    ++messages;
    if (!dispatch(link, std::move(m).value(), in_flight, steady_ns(), peer))
      return;
  }
}

bool step_plane::dispatch(const std::shared_ptr<step_link>& link, step_message m,
                          const std::shared_ptr<std::atomic<int>>& in_flight, int64_t received_ns,
                          const std::string& peer) {
  switch (m.kind) {
    case step_call::run_graph:
    case step_call::master_run:
      start_call(link, std::move(m), in_flight, received_ns);
      return true;
    case step_call::cleanup_step:
      if (ep_.options.worker)
        ep_.options.worker->cleanup_step(m.step_id);
      return true;
    case step_call::heartbeat: {
      step_message answer;
      answer.call_id = m.call_id;
      answer.kind = step_call::heartbeat_reply;
      link->write(encode_step_message(answer));
      return true;
    }
    default:
      ep_.stats.frames_rejected++;
      ep_.log("step connection from " + peer +
              ": a reply where a call belongs; closing the connection");
      return false;
  }
}

void step_plane::start_call(const std::shared_ptr<step_link>& link, step_message m,
                            const std::shared_ptr<std::atomic<int>>& in_flight,
                            int64_t received_ns) {
  auto* worker = ep_.options.worker;
  auto* master = ep_.options.master;
  bool graph = m.kind == step_call::run_graph;
  step_message answer;
  answer.call_id = m.call_id;
  answer.kind = graph ? step_call::run_graph_reply : step_call::master_run_reply;
  if (graph ? !worker : !master) {
    answer.error =
        failed_precondition(graph ? "this node serves no worker" : "this node serves no master");
    link->write(encode_step_message(answer));
    return;
  }
  if (*in_flight >= ep_.options.max_pending_rpcs) {
    ep_.stats.rpcs_refused++;
    answer.kind = step_call::refused;
    answer.error = resource_exhausted(
        "the node has " + std::to_string(in_flight->load()) +
        " step calls in flight on this connection (max_pending_rpcs); retry later");
    link->write(encode_step_message(answer));
    return;
  }
  ++*in_flight;
  bool trace = m.trace;
  // Runs on whichever thread the service answers on; touches only the link and the counter.
  auto done = [link, answer = std::move(answer), in_flight, received_ns,
               trace](result<traced<named_tensors>> r) mutable {
    if (!r) {
      answer.error = r.error();
    } else {
      answer.tensors = std::move(r->value);
      if (trace) {
        answer.record = std::move(r->trace);
        answer.record.received_ns = received_ns;
        answer.record.replied_ns = steady_ns();
      }
    }
    link->write(encode_step_message(answer));
    --*in_flight;
  };
  if (graph) {
    if (trace)
      worker->run_graph_traced(m.handle, m.step_id, std::move(m.tensors), std::move(m.fetches),
                               std::move(done));
    else
      worker->run_graph(m.handle, m.step_id, std::move(m.tensors), std::move(m.fetches),
                        with_empty_trace<named_tensors>(std::move(done)));
    return;
  }
  // A master's fetched tensors go back unnamed, in the order asked.
  auto unnamed = [done = std::move(done)](result<traced<std::vector<tensor>>> r) mutable {
    if (!r) {
      done(r.error());
      return;
    }
    traced<named_tensors> out{{}, std::move(r->trace)};
    for (auto& t : r->value)
      out.value.emplace_back(std::string(), std::move(t));
    done(std::move(out));
  };
  if (trace)
    master->run_traced(m.handle, std::move(m.tensors), std::move(m.fetches), std::move(m.targets),
                       std::move(unnamed));
  else
    master->run(m.handle, std::move(m.tensors), std::move(m.fetches), std::move(m.targets),
                with_empty_trace<std::vector<tensor>>(std::move(unnamed)));
}

} // namespace runnel::net
