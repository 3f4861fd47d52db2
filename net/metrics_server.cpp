#include "runnel/net/metrics_server.hpp"

#include <cmath>
#include <cstdio>
#include <future>
#include <sstream>
#include <thread>

#include <kj/async-io.h>
#include <kj/compat/http.h>

#include "runnel/net/cluster_spec.hpp"

namespace runnel::net {

namespace {

class metrics_service final : public kj::HttpService {
public:
  metrics_service(const kj::HttpHeaderTable& table, std::function<std::string()> text)
      : table_(table), text_(std::move(text)) {}

  kj::Promise<void> request(kj::HttpMethod method, kj::StringPtr url, const kj::HttpHeaders&,
                            kj::AsyncInputStream&, Response& response) override {
    if (method != kj::HttpMethod::GET || (url != "/metrics" && !url.startsWith("/metrics?")))
      return response.sendError(404, "Not Found", table_);
    std::string body;
    try {
      body = text_();
    } catch (const std::exception& e) {
      return response.sendError(500, "Internal Server Error", table_);
    }
    kj::HttpHeaders headers(table_);
    headers.set(kj::HttpHeaderId::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8");
    auto out = response.send(200, "OK", headers, body.size());
    auto bytes = kj::heapString(body.data(), body.size());
    auto& s = *out;
    return s.write(bytes.begin(), bytes.size()).attach(kj::mv(out), kj::mv(bytes));
  }

private:
  const kj::HttpHeaderTable& table_;
  std::function<std::string()> text_;
};

} // namespace

struct metrics_server::impl {
  std::thread thread;
  int port = 0;
  const kj::Executor* executor = nullptr;
  kj::Own<kj::PromiseFulfiller<void>>* stop = nullptr;
};

result<std::unique_ptr<metrics_server>> metrics_server::start(std::string listen,
                                                              std::function<std::string()> text) {
  auto split = cluster_spec::split_address(listen);
  if (!split)
    return split.error().with_context("--metrics");
  auto i = std::make_unique<impl>();
  std::promise<status> started;
  auto ready = started.get_future();
  auto* raw = i.get();
  raw->thread = std::thread([raw, &started, host = split->first, port = split->second, listen,
                             text = std::move(text)]() mutable {
    kj::Own<kj::PromiseFulfiller<void>> stop;
    KJ_IF_MAYBE(e, kj::runCatchingExceptions([&]() {
                  auto io = kj::setupAsyncIo();
                  auto addr = io.provider->getNetwork().parseAddress(host, uint(port)).wait(
                      io.waitScope);
                  auto receiver = addr->listen();
                  raw->port = int(receiver->getPort());
                  kj::HttpHeaderTable table;
                  metrics_service service(table, std::move(text));
                  kj::HttpServer server(io.provider->getTimer(), table, service);
                  // The thread ends only when the destructor says so (its executor must live
                  // until then): a failed listener leaves it waiting.
                  auto listening = server.listenHttp(*receiver)
                                       .catch_([](kj::Exception&& e) -> kj::Promise<void> {
                                         std::fprintf(stderr, "runnel metrics: %s\n",
                                                      e.getDescription().cStr());
                                         return kj::NEVER_DONE;
                                       })
                                       .eagerlyEvaluate(nullptr);
                  auto paf = kj::newPromiseAndFulfiller<void>();
                  stop = kj::mv(paf.fulfiller);
                  raw->stop = &stop;
                  raw->executor = &kj::getCurrentThreadExecutor();
                  started.set_value(status());
                  paf.promise.exclusiveJoin(kj::mv(listening)).wait(io.waitScope);
                })) {
      if (!raw->executor)
        started.set_value(unavailable("cannot serve metrics on " + listen + ": " +
                                      std::string(e->getDescription().cStr())));
    }
    raw->executor = nullptr;
  });
  status s = ready.get();
  if (!s.ok()) {
    i->thread.join();
    return s;
  }
  return std::unique_ptr<metrics_server>(new metrics_server(std::move(i)));
}

metrics_server::metrics_server(std::unique_ptr<impl> i) : impl_(std::move(i)) {}

metrics_server::~metrics_server() {
  if (impl_->executor) {
    auto* stop = impl_->stop;
    impl_->executor->executeSync([stop]() { (*stop)->fulfill(); });
  }
  impl_->thread.join();
}

int metrics_server::port() const {
  return impl_->port;
}

std::string metric_line(const std::string& name, double value,
                        const std::vector<std::pair<std::string, std::string>>& labels) {
  std::ostringstream out;
  out << name;
  if (!labels.empty()) {
    out << '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      out << (i ? "," : "") << labels[i].first << "=\"";
      for (char c : labels[i].second) {
        if (c == '\\' || c == '"')
          out << '\\' << c;
        else if (c == '\n')
          out << "\\n";
        else
          out << c;
      }
      out << '"';
    }
    out << '}';
  }
  out << ' ';
  if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 1e15)
    out << int64_t(value);
  else
    out << value;
  out << '\n';
  return out.str();
}

} // namespace runnel::net
