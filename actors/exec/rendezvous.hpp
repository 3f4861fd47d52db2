#pragma once
// The local rendezvous: where a Send leaves a tensor for its Recv, keyed by step and by
// TensorFlow's rendezvous key (placement/partition.hpp). Tensors are handed over, never copied.
// A Recv that comes first waits (asynchronously); a step's leftovers are dropped when it ends.
// Internal to actors/ (the session wires Send/Recv actors on cross-device edges).

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <deque>
#include <unordered_map>
#include <unordered_set>

#include "runnel/ops/kernel/kernel.hpp"
#include "runnel/ops/core/tensor.hpp"

namespace runnel {

class local_rendezvous {
public:
  using recv_fn = std::function<void(status, tensor)>;
  void send(int64_t step, const std::string& key, tensor value);
  void recv(int64_t step, const std::string& key, recv_fn done);
  /// Drops what step `step` left; Recvs still waiting get `cancelled`.
  void end_step(int64_t step);
  /// Ends `step` for good (a cluster step that failed elsewhere): as end_step, and a Recv of it
  /// that comes later (its partition had not reached it yet) fails at once instead of waiting
  /// forever; values sent to it later are dropped. The last 4096 such steps are remembered.
  void cancel_step(int64_t step);
  /// Ends every step: Recvs still waiting get `cancelled` with `reason`.
  void cancel_all(const std::string& reason);

  /// A value that came over the network. As `send`, but a value for a step this process is not
  /// running (begin_step) waits at most `unclaimed_ttl` (then it is dropped), and such values
  /// together hold at most `max_unclaimed_bytes` (beyond it, new ones are dropped); both are
  /// counted. A sender ahead of this process's partition is served; a stranger cannot fill its
  /// memory.
  void send_remote(int64_t step, const std::string& key, tensor value);
  /// The step runs here now: its values are kept until it ends.
  void begin_step(int64_t step);
  void set_unclaimed_limits(uint64_t max_bytes, std::chrono::milliseconds ttl);
  uint64_t unclaimed_dropped() const { return unclaimed_dropped_.load(); }
  uint64_t unclaimed_bytes() const;

private:
  /// Drops unclaimed values past their time or over the byte limit (mu_ held).
  void expire_unclaimed(std::chrono::steady_clock::time_point now);
  struct slot {
    bool has_value = false;
    tensor value;
    recv_fn waiting;
  };
  /// A step's keys: hashed, not ordered (a key is ~100 characters, and keys share their first
  /// sixty or so: an ordered map compared those at every level).
  using slot_table = std::unordered_map<std::string, slot>;
  /// The lock tries a little before it sleeps: a Send and its Recv meet here from two threads
  /// (a device's Recvs all wait at the step's start while the other device's Sends arrive), the
  /// critical sections are a few lookups, and a futex wait and wake costs µs on our VMs
  /// (local_sendrecv's profile: 8% in the wake-up).
  class spin_then_block {
  public:
    void lock() {
      for (int i = 0; i < 128; ++i) {
        if (mu_.try_lock())
          return;
        pause();
      }
      mu_.lock();
    }
    void unlock() { mu_.unlock(); }

  private:
    static void pause();
    std::mutex mu_;
  };
  mutable spin_then_block mu_;
  std::unordered_map<int64_t, slot_table> steps_;
  std::unordered_set<int64_t> cancelled_;
  std::deque<int64_t> cancelled_order_; ///< oldest first, to bound cancelled_
  std::unordered_set<int64_t> active_;  ///< steps begun here and not ended
  struct unclaimed {
    std::chrono::steady_clock::time_point arrived;
    int64_t step;
    std::string key;
    uint64_t bytes;
  };
  std::deque<unclaimed> unclaimed_; ///< oldest first
  uint64_t unclaimed_bytes_ = 0;
  uint64_t max_unclaimed_bytes_ = uint64_t(1) << 30;
  std::chrono::milliseconds unclaimed_ttl_{60'000};
  std::atomic<uint64_t> unclaimed_dropped_{0};
};

/// The rendezvous _Send and _Recv kernels use: a Recv on a device of this process gets the
/// tensor through the local rendezvous; one elsewhere through `remote` (set by a cluster node;
/// without it such a send fails, naming the device).
class process_rendezvous : public tensor_rendezvous {
public:
  /// `priority`: the send's place in the step (lower first: the partitioner's position of the
  /// tensor's first consumer), so a peer's pending frames go out in the order they are needed.
  using remote_fn = std::function<void(int64_t step, const std::string& key,
                                       const std::string& recv_device, tensor value,
                                       bool wire_bf16, int64_t priority,
                                       std::function<void(status)> done)>;
  /// `local_prefix`: the task part of this process's device names, "/job:J/replica:0/task:T/".
  process_rendezvous(local_rendezvous& local, std::string local_prefix)
      : local_(local), prefix_(std::move(local_prefix)) {}
  void set_remote(remote_fn remote);
  void send(int64_t step, const std::string& key, const std::string& recv_device, tensor value,
            std::function<void(status)> done) override {
    send(step, key, recv_device, std::move(value), false, std::move(done));
  }
  void send(int64_t step, const std::string& key, const std::string& recv_device, tensor value,
            bool wire_bf16, std::function<void(status)> done) override {
    send(step, key, recv_device, std::move(value), wire_bf16, 0, std::move(done));
  }
  /// The same with the send's priority among this process's frames to the same peer.
  void send(int64_t step, const std::string& key, const std::string& recv_device, tensor value,
            bool wire_bf16, int64_t priority, std::function<void(status)> done);
  void recv(int64_t step, const std::string& key,
            std::function<void(status, tensor)> done) override;
  local_rendezvous& local() { return local_; }

private:
  local_rendezvous& local_;
  std::string prefix_;
  std::mutex mu_;
  std::shared_ptr<const remote_fn> remote_;
};

/// Registers the _Send and _Recv kernels (placement/partition.hpp's nodes).
void register_sendrecv_kernels(kernel_registry& reg);

} // namespace runnel
