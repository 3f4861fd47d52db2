#pragma once
// Step calls (runGraph, its reply, step cleanup, the heartbeat, and a master's run) on connections
// of their own (conn_kind::step), off the event loop: a call is written by the thread that makes
// it, and read, dispatched and answered on a thread per connection that blocks on its socket. The
// event loop only connects and runs the handshake (auth, per-peer limits), then hands it over.
// Private to net/; docs/cluster.md ("Step calls") has the why and the figures.
//
//   ep.steps->call("10.0.0.2:2222", msg, [](result<step_message> r) { ... }); // reply thread
//   ep.steps->serve(fd, "10.0.0.3", on_end);  // an accepted, handshaken step connection
//   ep.steps->stop();                          // before the loop stops: joins every thread

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runnel/net/endpoint.hpp"
#include "runnel/net/wire_frame.hpp"

namespace runnel::net {

/// One step connection's socket: whole messages written from any thread, one at a time.
class step_link {
public:
  explicit step_link(int fd) : fd_(fd) {}
  ~step_link();
  step_link(const step_link&) = delete;
  step_link& operator=(const step_link&) = delete;
  /// Writes `m` whole; false (and the link shut) when the connection is closed or the write fails.
  bool write(const encoded_step& m);
  /// Shuts the socket both ways: a thread blocked reading it wakes with end of stream.
  void shut();
  int fd() const { return fd_; }

private:
  std::mutex mu_;
  int fd_;
  bool shut_ = false;
};

struct step_read_limits {
  uint64_t max_header_bytes = uint64_t(2) << 30;
  uint64_t max_payload_bytes = uint64_t(16) << 30;
  /// Larger payloads are read into buffers that grow with what arrived.
  uint64_t direct_payload_bytes = uint64_t(64) << 20;
};

/// Reads one whole message from the blocking socket `fd`, counting into `bytes_read`. Errors:
/// `out_of_range` for the end of the stream between messages (a clean close),
/// `deadline_exceeded` for a receive timeout (SO_RCVTIMEO) before its first byte, `unavailable`
/// for a failed read or, with `stall` > 0, one that moved no byte that long midway, and
/// `invalid_argument` for a malformed message (what is wrong, and where).
result<step_message> read_step_message(int fd, const step_read_limits& limits,
                                       std::chrono::milliseconds stall, uint64_t& bytes_read);

class step_plane : public std::enable_shared_from_this<step_plane> {
public:
  using reply_fn = std::function<void(result<step_message>)>;
  /// `open` connects and runs the handshake for a step connection to an address (on the event
  /// loop) and answers with a blocking socket of the caller's to own.
  using open_fn = std::function<void(const std::string& address, std::function<void(result<int>)>)>;
  step_plane(endpoint::impl& ep, open_fn open);

  /// Sends `m` (its call id set here) to the worker at `address`; `reply` (none for
  /// cleanup_step) runs once, on the connection's reading thread: with the answer, or with
  /// `unavailable` naming the address when the connection fails first (the next call reconnects).
  void call(const std::string& address, step_message m, reply_fn reply);
  /// Drops the connection to `address`: its calls in flight fail, the next call reconnects.
  void forget(const std::string& address);
  /// Serves an accepted step connection on a thread of its own; `ended` runs when it closes.
  void serve(int fd, std::string peer, std::function<void()> ended);
  /// Closes every connection, fails the calls in flight with `cancelled`, waits for the threads.
  void stop();

private:
  struct client;
  std::shared_ptr<client> client_for(const std::string& address);
  void connected(const std::shared_ptr<client>& c, result<int> fd);
  void read_replies(std::shared_ptr<client> c);
  void serve_connection(std::shared_ptr<step_link> link, const std::string& peer);
  /// Runs or answers one call; false for a message a server must not get (closes the connection).
  bool dispatch(const std::shared_ptr<step_link>& link, step_message m,
                const std::shared_ptr<std::atomic<int>>& in_flight, int64_t received_ns,
                const std::string& peer);
  /// Fails `c`'s calls with `why` and closes it (idempotent).
  /// Runs a worker's run_graph or a master's run; the reply goes when the service answers.
  void start_call(const std::shared_ptr<step_link>& link, step_message m,
                  const std::shared_ptr<std::atomic<int>>& in_flight, int64_t received_ns);
  void fail(const std::shared_ptr<client>& c, status why);
  void end_thread();

  endpoint::impl& ep_;
  open_fn open_;
  std::mutex mu_;
  std::condition_variable threads_done_;
  int threads_ = 0;
  bool stopping_ = false;
  std::atomic<uint64_t> next_call_{1};
  std::map<std::string, std::shared_ptr<client>> clients_;
  std::vector<std::weak_ptr<step_link>> served_;
};

} // namespace runnel::net
