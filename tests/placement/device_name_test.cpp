#include <catch2/catch.hpp>

#include "placement/device_name.hpp"

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
