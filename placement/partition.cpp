#include "placement/partition.hpp"

#include <cstdio>
#include <map>
#include <unordered_map>

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
        part(src_dev).nodes.push_back({"_send/" + base, "_Send", {tensor}, src_dev, send_attrs});
        attr_map recv_attrs = common;
        recv_attrs["tensor_type"] = t;
        recv_attrs["shape"] = src.output_shapes[size_t(e.index)];
        part(dst).nodes.push_back({"_recv/" + base, "_Recv", {}, dst, recv_attrs});
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
        part(dst).nodes.push_back({"_recv/" + base, "_Recv", {}, dst, recv_attrs});
        r = control_recv.emplace(key, "_recv/" + base).first;
      }
      def.inputs.push_back("^" + r->second);
    }
    part(dst).nodes.push_back(std::move(def));
  }
  return parts;
}

} // namespace runnel
