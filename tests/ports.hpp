#pragma once
// Ports for test clusters on loopback.
//
// A port found free by binding port 0 comes from the kernel's ephemeral range, which is also where
// every outgoing connection's source port comes from: between the check and the node's own bind,
// another test's connection can take it ("address already in use" under ctest -j2). These ports
// come from below the ephemeral range instead, where only listeners bind.
#include <unistd.h>

#include <fstream>
#include <memory>
#include <random>
#include <vector>

#include "runnel/net/endpoint.hpp"

namespace runnel::testing {

inline std::vector<int> free_ports(int n) {
  int low = 20000, high = 32768;
  if (std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range"); range) {
    int first = 0;
    if (range >> first && first > low + 1000)
      high = first;
  }
  std::mt19937 gen(unsigned(getpid()) * 2654435761u ^ unsigned(time(nullptr)));
  std::uniform_int_distribution<int> pick(low, high - 1);
  std::vector<std::unique_ptr<net::endpoint>> held; // bound until all are found
  std::vector<int> ports;
  for (int tries = 0; int(ports.size()) < n && tries < 1000; ++tries) {
    net::endpoint_options o;
    o.listen = "127.0.0.1:" + std::to_string(pick(gen));
    auto e = net::endpoint::start(o);
    if (!e.ok())
      continue;
    ports.push_back((*e)->port());
    held.push_back(std::move(e).value());
  }
  return ports;
}

} // namespace runnel::testing
