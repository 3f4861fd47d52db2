#pragma once
// A tiny HTTP server for Prometheus: GET /metrics answers `text()` as text/plain version 0.0.4;
// anything else gets 404. It runs on its own thread (kj's HTTP server), apart from the node's
// endpoint, so a scrape never waits behind the data plane.
//
//   auto m = net::metrics_server::start("127.0.0.1:9100", [&] { return my_metrics(); }).value();

#include <functional>
#include <memory>
#include <string>

#include "runnel/ops/core/status.hpp"

namespace runnel::net {

class metrics_server {
public:
  /// Binds `listen` ("host:port"; port 0: any) and serves until destroyed.
  static result<std::unique_ptr<metrics_server>> start(std::string listen,
                                                       std::function<std::string()> text);
  ~metrics_server();
  int port() const;

  struct impl;

private:
  explicit metrics_server(std::unique_ptr<impl> i);
  std::unique_ptr<impl> impl_;
};

/// One Prometheus sample line: `name{labels} value`, with the label values escaped.
std::string metric_line(const std::string& name, double value,
                        const std::vector<std::pair<std::string, std::string>>& labels = {});

} // namespace runnel::net
