#include "runnel/placement/partition.hpp"

#include <cstdio>
#include <functional>
#include <map>
#include <unordered_map>

#include "runnel/placement/frames.hpp"

namespace runnel {

std::string rendezvous_key(const std::string& src_device, int64_t src_incarnation,
                           const std::string& dst_device, const std::string& tensor_name,
                           const std::string& frame_iter) {
  char inc[17];
  std::snprintf(inc, sizeof inc, "%016llx", static_cast<unsigned long long>(src_incarnation));
  return src_device + ";" + inc + ";" + dst_device + ";" + tensor_name + ";" + frame_iter;
}

result<std::vector<graph_partition>> partition(const graph& g, const std::vector<int>& nodes,
                                               const std::vector<std::string>& device_of,
                                               const partition_options& options) {
  if (device_of.size() != nodes.size())
    return invalid_argument("partition: " + std::to_string(device_of.size()) +
                            " devices for " + std::to_string(nodes.size()) + " nodes");
  std::unordered_map<int, size_t> index_of;
  for (size_t i = 0; i < nodes.size(); ++i)
    index_of[nodes[i]] = i;
  std::vector<graph_partition> parts;
  std::map<std::string, size_t> part_of_device;
  auto part = [&](const std::string& device) -> graph_partition& {
    auto it = part_of_device.find(device);
    if (it == part_of_device.end()) {
      it = part_of_device.emplace(device, parts.size()).first;
      parts.push_back({device, {}});
    }
    return parts[it->second];
  };
  // One Recv per (source tensor, destination device); one Send per (source tensor, destination).
  std::map<std::pair<std::string, std::string>, std::string> recv_name; // (tensor, dst) -> node
  std::map<std::pair<int, std::string>, std::string> control_recv;      // (src node, dst) -> node
  auto device_tag = [&](const std::string& device) {
    part(device);
    return std::to_string(part_of_device.at(device));
  };

  // While loops: each node's frame and each frame's LoopCond.
  auto loops = find_loop_frames(g, nodes);
  auto& frames = loops.frames;
  auto& out_frame = loops.frame_of;
  // A device that receives values of a loop's iterations runs a control loop of its own (as
  // TensorFlow's partitioner adds): Enter -> Merge -> Switch on the loop's predicate, received
  // from the LoopCond's device each iteration -> Identity -> NextIteration -> Merge. Its Merge
  // gates the Recvs of that frame, so that they run once per iteration, keyed by it.
  std::map<std::pair<std::string, int>, std::string> control_loops; // (device, frame) -> Merge
  std::map<std::string, std::vector<node_def>> deferred;             // nodes added last
  std::function<result<std::string>(const std::string&, int)> control_loop =
      [&](const std::string& dst, int f) -> result<std::string> {
    if (auto it = control_loops.find({dst, f}); it != control_loops.end())
      return it->second;
    const loop_frame& fr = frames[size_t(f)];
    if (fr.loop_cond < 0)
      return invalid_argument("partition: the while loop of frame '" + fr.name +
                              "' has no LoopCond among the nodes to partition");
    std::vector<std::string> start_inputs;
    if (fr.parent != 0) {
      RUNNEL_ASSIGN_OR_RETURN(auto parent_merge, control_loop(dst, fr.parent));
      start_inputs.push_back("^" + parent_merge);
    }
    std::string base = "_cloop/" + fr.name + "/" + device_tag(dst);
    auto& nodes_of = part(dst).nodes;
    nodes_of.push_back({base + "/start", "Const", start_inputs, dst,
                        {{"value", tensor::scalar(0.0f)}, {"dtype", dtype::f32}}});
    nodes_of.push_back({base + "/enter", "Enter", {base + "/start"}, dst,
                        {{"T", dtype::f32},
                         {"frame_name", fr.name},
                         {"is_constant", false},
                         {"parallel_iterations", fr.parallel_iterations}}});
    nodes_of.push_back({base + "/merge", "Merge", {base + "/enter", base + "/next"}, dst,
                        {{"T", dtype::f32}, {"N", int64_t(2)}}});
    const node& lc = g.at(nodes[size_t(fr.loop_cond)]);
    const std::string& home = device_of[size_t(fr.loop_cond)];
    std::string pred = lc.name;
    if (home != dst) {
      attr_map common{{"tensor_name", "loop_pred_" + lc.name + "_to_" + device_tag(dst)},
                      {"send_device", home},
                      {"send_device_incarnation", options.incarnation},
                      {"recv_device", dst},
                      {"client_terminated", false}};
      attr_map send_attrs = common;
      send_attrs["T"] = dtype::boolean;
      deferred[home].push_back({base + "/send_pred", "_Send", {lc.name}, home, send_attrs});
      attr_map recv_attrs = common;
      recv_attrs["tensor_type"] = dtype::boolean;
      recv_attrs["shape"] = shape{};
      pred = base + "/pred";
      nodes_of.push_back({pred, "_Recv", {"^" + base + "/merge"}, dst, recv_attrs});
    }
    nodes_of.push_back({base + "/switch", "Switch", {base + "/merge", pred}, dst,
                        {{"T", dtype::f32}}});
    nodes_of.push_back({base + "/pivot", "Identity", {base + "/switch:1"}, dst,
                        {{"T", dtype::f32}}});
    nodes_of.push_back({base + "/next", "NextIteration", {base + "/pivot"}, dst,
                        {{"T", dtype::f32}}});
    control_loops[{dst, f}] = base + "/merge";
    return base + "/merge";
  };
  /// What a Recv of a value of frame `f` on `dst` waits on (none at the top level).
  auto gate = [&](const std::string& dst, int f) -> result<std::vector<std::string>> {
    if (f == 0)
      return std::vector<std::string>{};
    RUNNEL_ASSIGN_OR_RETURN(auto merge, control_loop(dst, f));
    return std::vector<std::string>{"^" + merge};
  };

  for (size_t i = 0; i < nodes.size(); ++i) {
    const node& n = g.at(nodes[i]);
    const std::string& dst = device_of[i];
    node_def def{n.name, n.op, {}, dst, n.attrs};
    for (auto e : n.inputs) {
      const node& src = g.at(e.node);
      auto it = index_of.find(e.node);
      if (it == index_of.end())
        return invalid_argument("partition: node '" + n.name + "' reads '" + src.name +
                                "', which is not among the nodes to partition");
      const std::string& src_dev = device_of[it->second];
      std::string tensor = src.name + ":" + std::to_string(e.index);
      if (src_dev == dst) {
        def.inputs.push_back(tensor);
        continue;
      }
      auto key = std::make_pair(tensor, dst);
      auto r = recv_name.find(key);
      if (r == recv_name.end()) {
        std::string edge = "edge_" + std::to_string(e.node) + "_" + tensor;
        std::string base = src.name + "_" + std::to_string(e.index) + "_to_" + device_tag(dst);
        dtype t = src.output_types[size_t(e.index)];
        attr_map common{{"tensor_name", edge},
                        {"send_device", src_dev},
                        {"send_device_incarnation", options.incarnation},
                        {"recv_device", dst},
                        {"client_terminated", false}};
        attr_map send_attrs = common;
        send_attrs["T"] = t;
        // The first consumer's place in the order the nodes are partitioned (topological): the
        // data plane sends a peer's waiting tensors in this order, so what the receiver needs
        // first goes first (a forward pass's parameters before the later layers').
        send_attrs["_priority"] = int64_t(i);
        // The producer asked for bfloat16 on the wire (send_as_bf16 in ops/train/replica.hpp).
        if (auto bf16 = find_attr<bool>(src.attrs, "_wire_bf16"); bf16 && *bf16)
          send_attrs["_wire_bf16"] = true;
        part(src_dev).nodes.push_back({"_send/" + base, "_Send", {tensor}, src_dev, send_attrs});
        attr_map recv_attrs = common;
        recv_attrs["tensor_type"] = t;
        recv_attrs["shape"] = src.output_shapes[size_t(e.index)];
        RUNNEL_ASSIGN_OR_RETURN(auto waits, gate(dst, out_frame[it->second]));
        part(dst).nodes.push_back({"_recv/" + base, "_Recv", waits, dst, recv_attrs});
        r = recv_name.emplace(key, "_recv/" + base).first;
      }
      def.inputs.push_back(r->second);
    }
    for (int c : n.control_inputs) {
      auto it = index_of.find(c);
      if (it == index_of.end())
        continue; // a control dependency on something outside this run: nothing to wait for
      const std::string& src_dev = device_of[it->second];
      const node& src = g.at(c);
      if (src_dev == dst) {
        def.inputs.push_back("^" + src.name);
        continue;
      }
      auto key = std::make_pair(c, dst);
      auto r = control_recv.find(key);
      if (r == control_recv.end()) {
        // A dummy value sent after the source runs; the destination waits for its Recv.
        std::string base = src.name + "_ctrl_to_" + device_tag(dst);
        std::string dummy = "_ctrl/" + base;
        tensor empty(dtype::f32, shape{0});
        part(src_dev).nodes.push_back(
            {dummy, "Const", {"^" + src.name}, src_dev, {{"value", empty}, {"dtype", dtype::f32}}});
        attr_map common{{"tensor_name", "edge_" + std::to_string(c) + "_" + src.name + ":ctrl"},
                        {"send_device", src_dev},
                        {"send_device_incarnation", options.incarnation},
                        {"recv_device", dst},
                        {"client_terminated", false}};
        attr_map send_attrs = common;
        send_attrs["T"] = dtype::f32;
        part(src_dev).nodes.push_back({"_send/" + base, "_Send", {dummy}, src_dev, send_attrs});
        attr_map recv_attrs = common;
        recv_attrs["tensor_type"] = dtype::f32;
        recv_attrs["shape"] = shape{0};
        RUNNEL_ASSIGN_OR_RETURN(auto waits, gate(dst, out_frame[it->second]));
        part(dst).nodes.push_back({"_recv/" + base, "_Recv", waits, dst, recv_attrs});
        r = control_recv.emplace(key, "_recv/" + base).first;
      }
      def.inputs.push_back("^" + r->second);
    }
    part(dst).nodes.push_back(std::move(def));
  }
  for (auto& [device, extra] : deferred)
    for (auto& d : extra)
      part(device).nodes.push_back(std::move(d));
  return parts;
}

} // namespace runnel
