// TLS on both planes, with certificates made by openssl for the test: a peer with a certificate
// from the cluster's CA is served (RPC and tensors); one without TLS, or with a certificate from
// another CA, is refused and the node goes on.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>

#include "runnel/actors/cluster/cluster.hpp"
#include "runnel/actors/exec/session.hpp"
#include "runnel/net/endpoint.hpp"
#include "runnel/ops/graph/builder.hpp"
#include "runnel/tests/net/wait_until.hpp"
#include "runnel/tests/ports.hpp"

using namespace runnel;
using namespace runnel::net;
namespace fs = std::filesystem;

namespace {

/// A CA and certificates it signs, in a scratch directory (EC P-256: fast to make).
struct test_pki {
  fs::path dir;
  explicit test_pki(const std::string& name) {
    dir = fs::temp_directory_path() / ("runnel-tls-" + std::to_string(::getpid()) + "-" + name);
    fs::remove_all(dir);
    fs::create_directories(dir);
    sh("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key "
       "-out ca.pem -days 2 -subj /CN=" + name +
       "-ca -addext keyUsage=critical,keyCertSign,cRLSign");
    // What OpenSSL's strict checks (which kj's TLS turns on) want: a CA key usage, key ids.
    std::ofstream(dir / "ext.cnf") << "subjectAltName=DNS:127.0.0.1,IP:127.0.0.1,DNS:localhost\n"
                                      "basicConstraints=CA:FALSE\n"
                                      "keyUsage=critical,digitalSignature\n"
                                      "extendedKeyUsage=serverAuth,clientAuth\n"
                                      "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n";
  }
  ~test_pki() { fs::remove_all(dir); }
  void sh(const std::string& cmd) {
    std::string full = "cd '" + dir.string() + "' && " + cmd + " >/dev/null 2>&1";
    REQUIRE(std::system(full.c_str()) == 0);
  }
  /// Makes `name`.pem / `name`.key signed by this CA.
  void issue(const std::string& name) {
    sh("openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " + name +
       ".key -out " + name + ".csr -subj /CN=" + name);
    sh("openssl x509 -req -in " + name + ".csr -CA ca.pem -CAkey ca.key -CAcreateserial -out " +
       name + ".pem -days 2 -extfile ext.cnf");
  }
  void use(endpoint_options& o, const std::string& name) const {
    o.tls_cert = (dir / (name + ".pem")).string();
    o.tls_key = (dir / (name + ".key")).string();
    o.tls_ca = (dir / "ca.pem").string();
  }
};

class status_worker : public worker_service {
public:
  worker_status status() override { return {{"worker", 0}, 99, {}, ""}; }
  void register_graph(std::string, callback<std::string> done) override {
    done(std::string("h"));
  }
  void run_graph(const std::string&, int64_t, named_tensors, std::vector<std::string>,
                 callback<named_tensors> done) override {
    done(named_tensors{});
  }
  void cleanup_step(int64_t) override {}
  void deregister_graph(const std::string&) override {}
};

result<worker_status> status_of(net::endpoint& client, const std::string& address) {
  std::promise<result<worker_status>> p;
  client.worker(address)->status([&](result<worker_status> r) { p.set_value(r); });
  return p.get_future().get();
}

} // namespace

TEST_CASE("both planes run over TLS between peers of one CA, and strangers are refused",
          "[net][security]") {
  test_pki pki("cluster"), rogue("rogue");
  pki.issue("node");
  pki.issue("client");
  rogue.issue("intruder");

  status_worker w;
  std::promise<tensor> got;
  endpoint_options so;
  so.listen = "127.0.0.1:0";
  so.worker = &w;
  so.log = [](const std::string&) {}; // expected refusals
  so.on_tensor = [&](int64_t, std::string, tensor t) { got.set_value(t); };
  pki.use(so, "node");
  auto server = net::endpoint::start(so).value();
  std::string address = "127.0.0.1:" + std::to_string(server->port());

  endpoint_options co;
  pki.use(co, "client");
  auto client = net::endpoint::start(co).value();
  auto st = status_of(*client, address);
  INFO(st.error().to_string());
  REQUIRE(st.ok());
  CHECK(st->incarnation == 99);
  std::promise<status> sent;
  client->send_tensor(address, 1, "k", tensor::vector<float>({1, 2, 3}), {},
                      [&](status s) { sent.set_value(s); });
  REQUIRE(sent.get_future().get().ok());
  CHECK(got.get_future().get().data<float>()[2] == 3);

  // No TLS at all, and a certificate from another CA: refused.
  auto plain = net::endpoint::start(endpoint_options{}).value();
  CHECK(!status_of(*plain, address).ok());
  endpoint_options ro;
  rogue.use(ro, "intruder");
  auto intruder = net::endpoint::start(ro).value();
  CHECK(!status_of(*intruder, address).ok());
  // (The loop counts a failed TLS handshake after it has closed the connection.)
  runnel::testing::wait_until([&] { return server->stats().connections_rejected.load() >= 2; });
  // The node still serves its own.
  CHECK(status_of(*client, address).ok());

  // Half a configuration is an error naming the flags.
  endpoint_options half;
  half.tls_cert = (pki.dir / "node.pem").string();
  auto bad = net::endpoint::start(half);
  REQUIRE(!bad.ok());
  CHECK_THAT(bad.error().message(), Catch::Contains("--tls-ca"));
}

TEST_CASE("a cluster node and a remote session run a step over TLS", "[net][security]") {
  test_pki pki("node");
  pki.issue("worker");
  pki.issue("client");
  auto port = runnel::testing::free_ports(1)[0];
  std::string addr = "127.0.0.1:" + std::to_string(port);
  node_options o;
  o.cluster = cluster_spec::parse("worker=" + addr).value();
  o.job = "worker";
  o.log = [](const std::string&, const std::string&) {};
  o.tls_cert = (pki.dir / "worker.pem").string();
  o.tls_key = (pki.dir / "worker.key").string();
  o.tls_ca = (pki.dir / "ca.pem").string();
  auto node = cluster_node::start(o).value();
  runtime client;
  graph g;
  auto y = constant(g, 20.f) + 1.0;
  session_options so{.remote_timeout = std::chrono::seconds(20)};
  so.tls_cert = (pki.dir / "client.pem").string();
  so.tls_key = (pki.dir / "client.key").string();
  so.tls_ca = (pki.dir / "ca.pem").string();
  session s(client, g, "runnel://" + addr, so);
  auto r = s.run({}, {y});
  INFO(r.error().to_string());
  REQUIRE(r.ok());
  CHECK(r.value()[0].data<float>()[0] == 21.f);
  session plain(client, g, "runnel://" + addr, {.remote_timeout = std::chrono::seconds(20)});
  CHECK(!plain.run({}, {y}).ok());
}
