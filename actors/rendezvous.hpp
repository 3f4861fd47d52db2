#pragma once
// The local rendezvous: where a Send leaves a tensor for its Recv, keyed by step and by
// TensorFlow's rendezvous key (placement/partition.hpp). Tensors are handed over, never copied.
// A Recv that comes first waits (asynchronously); a step's leftovers are dropped when it ends.
// Internal to actors/ (the session wires Send/Recv actors on cross-device edges).

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include "ops/tensor.hpp"

namespace runnel {

class local_rendezvous {
public:
  using recv_fn = std::function<void(status, tensor)>;
  void send(int64_t step, const std::string& key, tensor value);
  void recv(int64_t step, const std::string& key, recv_fn done);
  /// Drops what step `step` left; Recvs still waiting get `cancelled`.
  void end_step(int64_t step);

private:
  struct slot {
    bool has_value = false;
    tensor value;
    recv_fn waiting;
  };
  std::mutex mu_;
  std::unordered_map<int64_t, std::map<std::string, slot>> steps_;
};

} // namespace runnel
