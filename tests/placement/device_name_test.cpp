#include <catch2/catch.hpp>

#include "runnel/placement/device_name.hpp"

using namespace runnel;

TEST_CASE("device specs parse and print in TensorFlow's grammar", "[placement]") {
  auto full = device_spec::parse("/job:ps/replica:0/task:1/device:CPU:0").value();
  CHECK(*full.job == "ps");
  CHECK(*full.replica == 0);
  CHECK(*full.task == 1);
  CHECK(*full.type == "CPU");
  CHECK(*full.id == 0);
  CHECK(full.fully_specified());
  CHECK(full.to_string() == "/job:ps/replica:0/task:1/device:CPU:0");
  // Lower-case types (our runtime's names) and the legacy forms.
  CHECK(device_spec::parse("/job:localhost/replica:0/task:0/device:cpu:3").value().to_string() ==
        "/job:localhost/replica:0/task:0/device:CPU:3");
  CHECK(device_spec::parse("/gpu:1").value().to_string() == "/device:GPU:1");
  CHECK(device_spec::parse("/job:worker/cpu:0").value().to_string() == "/job:worker/device:CPU:0");
  // Partial specs and wildcards.
  auto any_gpu = device_spec::parse("/device:GPU:*").value();
  CHECK(*any_gpu.type == "GPU");
  CHECK_FALSE(any_gpu.id);
  CHECK(any_gpu.to_string() == "/device:GPU:*");
  CHECK(device_spec::parse("/job:*/task:2").value().to_string() == "/task:2");
  CHECK(device_spec::parse("").value() == device_spec{});
  CHECK(device_spec::parse("/device:CPU").value().to_string() == "/device:CPU:*");
}

TEST_CASE("malformed device specs are errors that quote them", "[placement]") {
  for (const char* bad : {"job:ps", "/job:", "/job:ps/job:worker", "/task:1/job:ps",
                          "/replica:x", "/device:CPU:-1", "/device:C P U:0", "/tpu:0",
                          "/job:ps//task:0", "/task:1/replica:0"}) {
    auto r = device_spec::parse(bad);
    INFO(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == error_code::invalid_argument);
    CHECK_THAT(r.error().message(), Catch::Contains(std::string("'") + bad + "'"));
  }
}

TEST_CASE("device specs match devices and merge", "[placement]") {
  auto dev = device_spec::parse("/job:worker/replica:0/task:1/device:CPU:0").value();
  CHECK(device_spec::parse("/job:worker").value().matches(dev));
  CHECK(device_spec::parse("/device:cpu:*").value().matches(dev));
  CHECK(device_spec::parse("").value().matches(dev));
  CHECK_FALSE(device_spec::parse("/task:0").value().matches(dev));
  CHECK_FALSE(device_spec::parse("/gpu:0").value().matches(dev));

  auto job = device_spec::parse("/job:worker/task:1").value();
  auto gpu = device_spec::parse("/device:GPU:0").value();
  auto merged = device_spec::merge(job, gpu).value();
  CHECK(merged.to_string() == "/job:worker/task:1/device:GPU:0");

  auto cpu = device_spec::parse("/device:CPU:0").value();
  auto conflict = device_spec::merge(cpu, gpu);
  REQUIRE_FALSE(conflict.ok());
  CHECK_THAT(conflict.error().message(), Catch::Contains("device types differ"));
  CHECK_THAT(conflict.error().message(), Catch::Contains("/device:CPU:0"));
  CHECK(device_spec::merge(cpu, gpu, true).value().to_string() == "/device:CPU:0");
  auto ids = device_spec::merge(cpu, device_spec::parse("/cpu:1").value(), true).value();
  CHECK(ids.to_string() == "/device:CPU:0");
  CHECK_FALSE(device_spec::merge(device_spec::parse("/job:ps").value(),
                                 device_spec::parse("/job:worker").value(), true)
                  .ok()); // jobs never relax
}

#include "runnel/ops/graph/builder.hpp"
#include "runnel/placement/placer.hpp"

namespace {

std::vector<placement_device> two_cpus_one_gpu() {
  return placement_devices_from({"/job:localhost/replica:0/task:0/device:CPU:0",
                                 "/job:localhost/replica:0/task:0/device:CPU:1",
                                 "/job:localhost/replica:0/task:0/device:GPU:0"});
}



} // namespace

TEST_CASE("the simple placer honours specs, colocation and kernels", "[placement]") {
  graph g;
  output x, y;
  graph_variable w;
  {
    auto d = g.device("/device:CPU:1");
    w = variable(g, constant(g, {1.f, 2.f}), "w"); // its initializer's Assign is colocated
  }
  {
    auto d = g.device("/device:GPU:*");
    x = w.value * 2.0;
  }
  y = x + 1.0;
  auto nodes = all_nodes(g);
  auto where = place_simple(g, nodes, two_cpus_one_gpu(), any_kernel).value();
  auto device_of = [&](const std::string& name) { return where[size_t(*g.find(name))]; };
  CHECK(device_of("w") == 1);
  CHECK(device_of(w.initializer.name()) == 1); // Assign follows its variable
  CHECK(device_of(w.value.node().name) == 1);   // and so does the read (it reads the resource)
  CHECK(device_of(x.node().name) == 2);
  CHECK(device_of(y.node().name) == 0); // unconstrained: the first device
  // Without GPU kernels for Mul, the GPU spec cannot be met...
  auto no_gpu_mul = [](const node& n, const std::string& type) {
    return !(n.op == "Mul" && type == "GPU");
  };
  auto err = place_simple(g, nodes, two_cpus_one_gpu(), no_gpu_mul);
  REQUIRE_FALSE(err.ok());
  CHECK_THAT(err.error().message(), Catch::Contains("cannot place node '" + x.node().name + "'"));
  CHECK_THAT(err.error().message(), Catch::Contains("has no GPU kernel"));
  CHECK_THAT(err.error().message(), Catch::Contains("device:CPU:1"));
  // ...unless soft placement relaxes it to a device that has them.
  auto soft = place_simple(g, nodes, two_cpus_one_gpu(), no_gpu_mul, {.allow_soft_placement = true})
                  .value();
  CHECK(soft[size_t(x.node_id())] == 0);
}

TEST_CASE("conflicting specs in one colocation group are named", "[placement]") {
  graph g;
  output a, b;
  {
    auto d = g.device("/device:CPU:0");
    a = constant(g, 1.f) + 1.0;
  }
  {
    auto c = g.colocate_with(operation(a));
    auto d = g.device("/device:CPU:1");
    b = a * 2.0;
  }
  auto err = place_simple(g, all_nodes(g), two_cpus_one_gpu(), any_kernel);
  REQUIRE_FALSE(err.ok());
  CHECK_THAT(err.error().message(), Catch::Contains("colocation group"));
  CHECK_THAT(err.error().message(), Catch::Contains("device ids differ"));
}
