// What a runtime does about GPUs on any machine: discovery, soft placement, and the guard that
// keeps host code off device memory. (Kernels on a real GPU: tests/gpu/, tag [.gpu].)
#include "ops/gpu/gpu_info.hpp"
#include "tests/eval.hpp"

using namespace runnel;
using namespace runnel::testing;

namespace {

/// Host memory labelled as GPU:0's: what a GPU allocator's tensors look like to the host.
tensor fake_device_tensor(const tensor& host) {
  auto* keep = new tensor(host);
  return tensor::wrap(
      host.type(), host.shape(), host.raw_data(), [](void* p) { delete static_cast<tensor*>(p); },
      keep, memory_space::device, 0);
}

} // namespace

TEST_CASE("GPU discovery names the GPUs or says why there are none", "[actors][gpu_host]") {
  auto& found = discover_gpus();
  if (found.gpus.empty()) {
    CHECK_FALSE(found.why_none.empty());
    std::string error;
    std::vector<int> want{0};
    CHECK(visible_gpus(found, &want, &error).empty());
    CHECK_THAT(error, Catch::Contains("GPU 0") && Catch::Contains(found.why_none));
  } else {
    for (auto& g : found.gpus) {
      CHECK_FALSE(g.name.empty());
      CHECK(g.total_memory > 0);
    }
    std::vector<int> none;
    CHECK(visible_gpus(found, &none, nullptr).empty());
  }
  CHECK(visible_gpus(found, nullptr, nullptr).size() == found.gpus.size());
}

TEST_CASE("GPU requests run on the CPU under soft placement, else the error says why",
          "[actors][gpu_host]") {
  runtime rt;
  if (!rt.gpus().empty()) { // the runtime reports GPUs but places nothing there yet
    CHECK_FALSE(rt.no_gpu_reason().empty());
  }
  graph g;
  auto x = placeholder(g, dtype::f32, {2}, "x");
  output y;
  {
    auto d = g.device("/device:GPU:0");
    y = x * 2.0;
  }
  feed_list feeds{{x, tensor::vector<float>({1, 2})}};
  session strict(rt, g);
  auto r = strict.run(feeds, {y});
  REQUIRE_FALSE(r.ok());
  auto msg = r.error().to_string();
  CHECK_THAT(msg, Catch::Contains("cannot place node '"));
  CHECK_THAT(msg, Catch::Contains("/device:GPU:0") && Catch::Contains("device:cpu:0") &&
                      Catch::Contains("no GPU") && Catch::Contains(discover_gpus().why_none));
  session soft(rt, g, {.allow_soft_placement = true});
  check_equal(soft.run(feeds, {y}).value()[0], tensor::vector<float>({2, 4}));
}

TEST_CASE("host code refuses tensors in device memory instead of reading them", "[actors][gpu_host]") {
  auto dev = fake_device_tensor(tensor::vector<float>({1, 2, 3}));
  CHECK_FALSE(dev.host_readable());
  CHECK(dev.memory_name() == "GPU:0 memory");
  CHECK(dev.to_string() == "float32[3] <in GPU:0 memory>");
  CHECK_THROWS_WITH(dev.copy(), Catch::Contains("GPU:0 memory") && Catch::Contains("transfer"));
  CHECK_FALSE(equal(dev, dev));
  // A CPU kernel handed one fails its step with the node and the input named.
  runtime rt;
  graph g;
  auto x = placeholder(g, dtype::f32, {3}, "x");
  auto y = x + 1.0;
  session s(rt, g);
  auto r = s.run({{x, dev}}, {y});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().to_string(), Catch::Contains("input 0") && Catch::Contains("GPU:0 memory") &&
                                        Catch::Contains(y.node().name));
  // The runtime is fine afterwards.
  check_equal(s.run({{x, tensor::vector<float>({1, 2, 3})}}, {y}).value()[0],
              tensor::vector<float>({2, 3, 4}));
}
