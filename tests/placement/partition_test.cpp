#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <set>

#include "runnel/ops/graph/builder.hpp"
#include "runnel/placement/partition.hpp"

using namespace runnel;

namespace {

const std::string cpu0 = "/job:localhost/replica:0/task:0/device:CPU:0";
const std::string cpu1 = "/job:localhost/replica:0/task:0/device:CPU:1";
const std::string cpu2 = "/job:localhost/replica:0/task:0/device:CPU:2";

std::string key_of(const node_def& n) {
  return rendezvous_key(std::get<std::string>(n.attrs.at("send_device")),
                        std::get<int64_t>(n.attrs.at("send_device_incarnation")),
                        std::get<std::string>(n.attrs.at("recv_device")),
                        std::get<std::string>(n.attrs.at("tensor_name")));
}

/// Builds every partition as a graph (so each is valid on its own) and pairs Sends with Recvs.
void check_partitions(const std::vector<graph_partition>& parts, size_t& sends, size_t& recvs) {
  std::multiset<std::string> send_keys, recv_keys;
  for (auto& p : parts) {
    graph sub;
    for (auto& n : p.nodes) {
      auto id = sub.add_node(n);
      INFO(p.device << ": " << n.name);
      REQUIRE(id.ok());
      CHECK(n.device == p.device);
      if (n.op == "_Send")
        send_keys.insert(key_of(n));
      if (n.op == "_Recv")
        recv_keys.insert(key_of(n));
    }
  }
  CHECK(send_keys == recv_keys);
  CHECK(std::set<std::string>(send_keys.begin(), send_keys.end()).size() == send_keys.size());
  sends = send_keys.size();
  recvs = recv_keys.size();
}

} // namespace

TEST_CASE("rendezvous keys use TensorFlow's format", "[placement]") {
  CHECK(rendezvous_key(cpu0, 1, cpu1, "edge_4_a:0") ==
        cpu0 + ";0000000000000001;" + cpu1 + ";edge_4_a:0;0:0");
  CHECK(rendezvous_key(cpu0, 0xabcdef, cpu1, "t", "2:7") ==
        cpu0 + ";0000000000abcdef;" + cpu1 + ";t;2:7");
}

TEST_CASE("partitioning cuts edges into Send/Recv pairs, one Recv per tensor and device",
          "[placement]") {
  graph g;
  auto x = placeholder(g, dtype::f32, {2}, "x");
  auto a = mul(x, constant(g, 2.f), "a");
  auto b = tanh(a, "b");
  auto c = add(a, constant(g, 1.f), "c");
  [[maybe_unused]] auto d = add(b, c, "d");
  output e;
  {
    auto deps = g.control_dependencies({operation(a)});
    e = neg(x, "e");
  }
  std::map<std::string, std::string> where{{"b", cpu1}, {"c", cpu1}, {"e", cpu1}};
  std::vector<int> nodes;
  std::vector<std::string> device_of;
  for (int v = 0; v < g.num_nodes(); ++v) {
    nodes.push_back(v);
    auto it = where.find(g.at(v).name);
    device_of.push_back(it != where.end() ? it->second : cpu0);
  }
  auto parts = partition(g, nodes, device_of).value();
  REQUIRE(parts.size() == 2);
  size_t sends = 0, recvs = 0;
  check_partitions(parts, sends, recvs);
  // a -> cpu1 once (b and c share it); c's constant -> cpu1; b and c -> cpu0; x -> cpu1 (for e);
  // a's control edge.
  CHECK(sends == 6);
  auto& p1 = parts[1];
  CHECK(p1.device == cpu1);
  int recv_a = 0;
  for (auto& n : p1.nodes)
    if (n.op == "_Recv" && std::get<std::string>(n.attrs.at("tensor_name")).find("a:0") !=
                               std::string::npos)
      ++recv_a;
  CHECK(recv_a == 1);
  // The Recv keeps the sender's inferred shape.
  for (auto& n : p1.nodes)
    if (n.op == "_Recv" && std::get<std::string>(n.attrs.at("tensor_name")).find("a:0") !=
                               std::string::npos)
      CHECK(std::get<shape>(n.attrs.at("shape")) == shape{2});
  // e waits for a through a control Recv.
  for (auto& n : p1.nodes)
    if (n.name == "e")
      CHECK(std::count_if(n.inputs.begin(), n.inputs.end(),
                          [](const std::string& s) { return s.rfind("^_recv/", 0) == 0; }) == 1);
}

TEST_CASE("random graphs over three devices partition into valid, paired subgraphs",
          "[placement]") {
  std::mt19937 rng(42);
  for (int trial = 0; trial < 20; ++trial) {
    graph g;
    std::vector<output> values{placeholder(g, dtype::f32, {3}, "x")};
    for (int i = 0; i < 30; ++i) {
      auto pick = [&] { return values[std::uniform_int_distribution<size_t>(0, values.size() - 1)(rng)]; };
      output v = (rng() % 2) ? add(pick(), pick()) : tanh(pick());
      values.push_back(v);
    }
    std::vector<int> nodes;
    std::vector<std::string> device_of;
    const std::string devs[] = {cpu0, cpu1, cpu2};
    for (int v = 0; v < g.num_nodes(); ++v) {
      nodes.push_back(v);
      device_of.push_back(devs[rng() % 3]);
    }
    auto parts = partition(g, nodes, device_of).value();
    size_t sends = 0, recvs = 0;
    check_partitions(parts, sends, recvs);
    // Expected Recvs: distinct (tensor, destination) pairs that cross devices.
    std::set<std::pair<std::string, std::string>> crossing;
    std::set<std::string> originals;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const node& n = g.at(nodes[i]);
      originals.insert(n.name);
      for (auto e : n.inputs)
        if (device_of[size_t(e.node)] != device_of[i])
          crossing.insert({g.at(e.node).name + ":" + std::to_string(e.index), device_of[i]});
    }
    CHECK(recvs == crossing.size());
    // Every original node lands in exactly one partition, on its device.
    std::multiset<std::string> placed;
    for (auto& p : parts)
      for (auto& n : p.nodes)
        if (n.op != "_Send" && n.op != "_Recv")
          placed.insert(n.name);
    CHECK(placed == std::multiset<std::string>(originals.begin(), originals.end()));
  }
}
