#include "runnel/placement/partition.hpp"

#include <cstdio>
#include <functional>
#include <map>
#include <unordered_map>

#include "runnel/ops/graph/frames.hpp"

namespace runnel {

std::string rendezvous_key(const std::string& src_device, int64_t src_incarnation,
                           const std::string& dst_device, const std::string& tensor_name,
                           const std::string& frame_iter) {
  char inc[17];
  std::snprintf(inc, sizeof inc, "%016llx", static_cast<unsigned long long>(src_incarnation));
  return src_device + ";" + inc + ";" + dst_device + ";" + tensor_name + ";" + frame_iter;
}

namespace {

/// One partitioning: the graph's nodes by device, with Sends and Recvs on the edges between
/// devices and, for values of loop iterations, a control loop per receiving device.
class partitioner {
public:
  partitioner(const graph& g, const std::vector<int>& nodes,
              const std::vector<std::string>& device_of, const partition_options& options)
      : g(g), nodes(nodes), device_of(device_of), options(options),
        loops(find_loop_frames(g, nodes)) {
    for (size_t i = 0; i < nodes.size(); ++i)
      index_of[nodes[i]] = i;
  }

  result<std::vector<graph_partition>> run() {
    for (size_t i = 0; i < nodes.size(); ++i) {
      const node& n = g.at(nodes[i]);
      const std::string& dst = device_of[i];
      node_def def{n.name, n.op, {}, dst, n.attrs};
      for (auto e : n.inputs)
        RUNNEL_RETURN_IF_ERROR(add_input(i, n, e, def));
      for (int c : n.control_inputs)
        RUNNEL_RETURN_IF_ERROR(add_control_input(c, dst, def));
      part(dst).nodes.push_back(std::move(def));
    }
    for (auto& [device, extra] : deferred)
      for (auto& d : extra)
        part(device).nodes.push_back(std::move(d));
    return std::move(parts);
  }

private:
  graph_partition& part(const std::string& device) {
    auto it = part_of_device.find(device);
    if (it == part_of_device.end()) {
      it = part_of_device.emplace(device, parts.size()).first;
      parts.push_back({device, {}});
    }
    return parts[it->second];
  }

  std::string device_tag(const std::string& device) {
    part(device);
    return std::to_string(part_of_device.at(device));
  }

  /// The attributes a Send and its Recv share.
  attr_map transfer_attrs(const std::string& tensor_name, const std::string& src,
                          const std::string& dst) const {
    return {{"tensor_name", tensor_name},
            {"send_device", src},
            {"send_device_incarnation", options.incarnation},
            {"recv_device", dst},
            {"client_terminated", false}};
  }

  /// Adds a Send of `input` on `src` and its Recv `recv` on `dst`, gated by frame `frame`'s control
  /// loop there. `send_extra` adds to the Send's attributes.
  status add_transfer(const std::string& input, const std::string& tensor_name,
                      const std::string& base, const std::string& src, const std::string& dst,
                      dtype type, shape shp, int frame, attr_map send_extra = {}) {
    attr_map common = transfer_attrs(tensor_name, src, dst);
    attr_map send_attrs = common;
    send_attrs["T"] = type;
    for (auto& [k, v] : send_extra)
      send_attrs[k] = v;
    part(src).nodes.push_back({"_send/" + base, "_Send", {input}, src, send_attrs});
    attr_map recv_attrs = common;
    recv_attrs["tensor_type"] = type;
    recv_attrs["shape"] = std::move(shp);
    RUNNEL_ASSIGN_OR_RETURN(auto waits, gate(dst, frame));
    part(dst).nodes.push_back({"_recv/" + base, "_Recv", waits, dst, recv_attrs});
    return {};
  }

  /// A device that receives values of a loop's iterations runs a control loop of its own (as
  /// TensorFlow's partitioner adds): Enter -> Merge -> Switch on the loop's predicate, received
  /// from the LoopCond's device each iteration -> Identity -> NextIteration -> Merge. Its Merge
  /// gates the Recvs of that frame, so that they run once per iteration, keyed by it.
  result<std::string> control_loop(const std::string& dst, int f) {
    if (auto it = control_loops.find({dst, f}); it != control_loops.end())
      return it->second;
    const loop_frame& fr = loops.frames[size_t(f)];
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
    nodes_of.push_back({base + "/start",
                        "Const",
                        start_inputs,
                        dst,
                        {{"value", tensor::scalar(0.0f)}, {"dtype", dtype::f32}}});
    nodes_of.push_back({base + "/enter",
                        "Enter",
                        {base + "/start"},
                        dst,
                        {{"T", dtype::f32},
                         {"frame_name", fr.name},
                         {"is_constant", false},
                         {"parallel_iterations", fr.parallel_iterations}}});
    nodes_of.push_back({base + "/merge",
                        "Merge",
                        {base + "/enter", base + "/next"},
                        dst,
                        {{"T", dtype::f32}, {"N", int64_t(2)}}});
    const node& lc = g.at(nodes[size_t(fr.loop_cond)]);
    const std::string& home = device_of[size_t(fr.loop_cond)];
    std::string pred = lc.name;
    if (home != dst) {
      attr_map common =
          transfer_attrs("loop_pred_" + lc.name + "_to_" + device_tag(dst), home, dst);
      attr_map send_attrs = common;
      send_attrs["T"] = dtype::boolean;
      deferred[home].push_back({base + "/send_pred", "_Send", {lc.name}, home, send_attrs});
      attr_map recv_attrs = common;
      recv_attrs["tensor_type"] = dtype::boolean;
      recv_attrs["shape"] = shape{};
      pred = base + "/pred";
      nodes_of.push_back({pred, "_Recv", {"^" + base + "/merge"}, dst, recv_attrs});
    }
    nodes_of.push_back(
        {base + "/switch", "Switch", {base + "/merge", pred}, dst, {{"T", dtype::f32}}});
    nodes_of.push_back(
        {base + "/pivot", "Identity", {base + "/switch:1"}, dst, {{"T", dtype::f32}}});
    nodes_of.push_back(
        {base + "/next", "NextIteration", {base + "/pivot"}, dst, {{"T", dtype::f32}}});
    control_loops[{dst, f}] = base + "/merge";
    return base + "/merge";
  }

  /// What a Recv of a value of frame `f` on `dst` waits on (none at the top level).
  result<std::vector<std::string>> gate(const std::string& dst, int f) {
    if (f == 0)
      return std::vector<std::string>{};
    RUNNEL_ASSIGN_OR_RETURN(auto merge, control_loop(dst, f));
    return std::vector<std::string>{"^" + merge};
  }

  /// Node `n` (the i-th to partition) reads `e`: directly on one device, else through one Recv
  /// per (source tensor, destination device) and its Send.
  status add_input(size_t i, const node& n, endpoint e, node_def& def) {
    const std::string& dst = device_of[i];
    const node& src = g.at(e.node);
    auto it = index_of.find(e.node);
    if (it == index_of.end())
      return invalid_argument("partition: node '" + n.name + "' reads '" + src.name +
                              "', which is not among the nodes to partition");
    const std::string& src_dev = device_of[it->second];
    std::string tensor = src.name + ":" + std::to_string(e.index);
    if (src_dev == dst) {
      def.inputs.push_back(tensor);
      return {};
    }
    auto key = std::make_pair(tensor, dst);
    auto r = recv_name.find(key);
    if (r == recv_name.end()) {
      std::string base = src.name + "_" + std::to_string(e.index) + "_to_" + device_tag(dst);
      // The first consumer's place in the order the nodes are partitioned (topological): the
      // data plane sends a peer's waiting tensors in this order, so what the receiver needs
      // first goes first (a forward pass's parameters before the later layers').
      attr_map extra{{"_priority", int64_t(i)}};
      // The producer asked for bfloat16 on the wire (send_as_bf16 in ops/train/replica.hpp).
      if (auto bf16 = find_attr<bool>(src.attrs, "_wire_bf16"); bf16 && *bf16)
        extra["_wire_bf16"] = true;
      RUNNEL_RETURN_IF_ERROR(add_transfer(tensor, "edge_" + std::to_string(e.node) + "_" + tensor,
                                          base, src_dev, dst, src.output_types[size_t(e.index)],
                                          src.output_shapes[size_t(e.index)],
                                          loops.frame_of[it->second], std::move(extra)));
      r = recv_name.emplace(key, "_recv/" + base).first;
    }
    def.inputs.push_back(r->second);
    return {};
  }

  /// A control input from another device: a dummy value sent after the source runs, one Recv
  /// per (source node, destination device) that the destination waits for.
  status add_control_input(int c, const std::string& dst, node_def& def) {
    auto it = index_of.find(c);
    if (it == index_of.end())
      return {}; // a control dependency on something outside this run: nothing to wait for
    const std::string& src_dev = device_of[it->second];
    const node& src = g.at(c);
    if (src_dev == dst) {
      def.inputs.push_back("^" + src.name);
      return {};
    }
    auto key = std::make_pair(c, dst);
    auto r = control_recv.find(key);
    if (r == control_recv.end()) {
      std::string base = src.name + "_ctrl_to_" + device_tag(dst);
      std::string dummy = "_ctrl/" + base;
      tensor empty(dtype::f32, shape{0});
      part(src_dev).nodes.push_back(
          {dummy, "Const", {"^" + src.name}, src_dev, {{"value", empty}, {"dtype", dtype::f32}}});
      RUNNEL_RETURN_IF_ERROR(
          add_transfer(dummy, "edge_" + std::to_string(c) + "_" + src.name + ":ctrl", base, src_dev,
                       dst, dtype::f32, shape{0}, loops.frame_of[it->second]));
      r = control_recv.emplace(key, "_recv/" + base).first;
    }
    def.inputs.push_back("^" + r->second);
    return {};
  }

  const graph& g;
  const std::vector<int>& nodes;
  const std::vector<std::string>& device_of;
  const partition_options& options;
  loop_frames loops; ///< each node's while-loop frame and each frame's LoopCond
  std::unordered_map<int, size_t> index_of;
  std::vector<graph_partition> parts;
  std::map<std::string, size_t> part_of_device;
  std::map<std::pair<std::string, std::string>, std::string> recv_name; ///< (tensor, dst) -> Recv
  std::map<std::pair<int, std::string>, std::string> control_recv;      ///< (src node, dst) -> Recv
  std::map<std::pair<std::string, int>, std::string> control_loops; ///< (device, frame) -> Merge
  std::map<std::string, std::vector<node_def>> deferred;            ///< nodes added last
};

} // namespace

result<std::vector<graph_partition>> partition(const graph& g, const std::vector<int>& nodes,
                                               const std::vector<std::string>& device_of,
                                               const partition_options& options) {
  if (device_of.size() != nodes.size())
    return invalid_argument("partition: " + std::to_string(device_of.size()) + " devices for " +
                            std::to_string(nodes.size()) + " nodes");
  return partitioner(g, nodes, device_of, options).run();
}

} // namespace runnel
