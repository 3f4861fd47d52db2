#include "runnel/ops/train/replica.hpp"

#include "runnel/ops/graph/builder.hpp"

#include <memory>
#include <vector>

namespace runnel {

std::vector<output> variables_ready(graph& g) {
  std::vector<output> ready;
  for (int id : g.collection("variables")) {
    output ref(&g, endpoint{id, 0});
    auto col = g.colocate_with(ref);
    ready.push_back(size(identity(ref), dtype::i32, "ready"));
  }
  return ready;
}

void send_as_bf16(output x) {
  x.owner().mutable_node(x.node_id()).attrs["_wire_bf16"] = true;
}

std::function<std::string(const node&)> replica_device_setter(int ps_tasks,
                                                              std::string worker_device,
                                                              ps_strategy strategy,
                                                              std::string ps_job) {
  struct state {
    int next = 0;
    std::vector<int64_t> bytes;
  };
  auto st = std::make_shared<state>();
  st->bytes.assign(size_t(std::max(1, ps_tasks)), 0);
  return [=](const node& n) -> std::string {
    if (n.device.find("/job:") != std::string::npos)
      return n.device; // explicit
    bool is_variable = n.op == "VariableV2" || n.op == "Variable" || n.op == "VarHandleOp";
    if (!is_variable || ps_tasks <= 0)
      return worker_device + n.device;
    int task = 0;
    if (strategy == ps_strategy::round_robin) {
      task = st->next;
      st->next = (st->next + 1) % ps_tasks;
    } else {
      for (int t = 1; t < ps_tasks; ++t)
        if (st->bytes[size_t(t)] < st->bytes[size_t(task)])
          task = t;
    }
    // Shapes are not inferred yet: the variable's attributes say its size.
    int64_t size = 0;
    auto s = find_attr<shape>(n.attrs, "shape");
    auto t = find_attr<dtype>(n.attrs, "dtype");
    if (s.ok() && s->is_fully_defined())
      size = s->num_elements() * int64_t(t.ok() && *t != dtype::string ? size_of(*t) : 4);
    st->bytes[size_t(task)] += std::max<int64_t>(size, 1);
    return "/job:" + ps_job + "/task:" + std::to_string(task) + n.device;
  };
}

} // namespace runnel
