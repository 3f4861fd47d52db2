#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "runnel/net/cluster_spec.hpp"

using namespace runnel;

TEST_CASE("cluster specs parse jobs and tasks and print back", "[net]") {
  auto spec = cluster_spec::parse("ps=127.0.0.1:2222;worker=127.0.0.1:2223,127.0.0.1:2224");
  REQUIRE(spec.ok());
  CHECK(spec->num_tasks("ps") == 1);
  CHECK(spec->num_tasks("worker") == 2);
  CHECK(spec->address("worker", 1).value() == "127.0.0.1:2224");
  CHECK(spec->to_string() == "ps=127.0.0.1:2222;worker=127.0.0.1:2223,127.0.0.1:2224");
  auto tasks = spec->tasks();
  REQUIRE(tasks.size() == 3);
  CHECK(tasks[0].name() == "/job:ps/replica:0/task:0");
  CHECK(tasks[2].name() == "/job:worker/replica:0/task:1");
  // Files: one job per line, comments.
  auto path = (std::filesystem::temp_directory_path() / "runnel_cluster_test.txt").string();
  {
    std::ofstream f(path);
    f << "# a small cluster\nps = 127.0.0.1:2222\nworker=127.0.0.1:2223, 127.0.0.1:2224  # two\n";
  }
  auto loaded = cluster_spec::load(path);
  REQUIRE(loaded.ok());
  CHECK(loaded->to_string() == spec->to_string());
}

TEST_CASE("bad cluster specs name what is wrong", "[net]") {
  auto message = [](const std::string& text) {
    auto r = cluster_spec::parse(text);
    REQUIRE(!r.ok());
    return r.error().to_string();
  };
  CHECK_THAT(message(""), Catch::Contains("empty"));
  CHECK_THAT(message("ps"), Catch::Contains("'ps' is not job=host:port"));
  CHECK_THAT(message("PS=h:1"), Catch::Contains("job name 'PS'"));
  CHECK_THAT(message("ps=h:1;ps=h:2"), Catch::Contains("job 'ps' appears twice"));
  CHECK_THAT(message("worker=h:1,h"), Catch::Contains("job 'worker' task 1"));
  CHECK_THAT(message("worker=h:99999"), Catch::Contains("above 65535"));
  CHECK_THAT(message("worker=h:1x"), Catch::Contains("not a number"));
  CHECK_THAT(message("ps=h:1;worker=h:1"), Catch::Contains("share the address h:1"));
  auto spec = cluster_spec::parse("ps=h:1").value();
  CHECK_THAT(spec.address("worker", 0).error().to_string(), Catch::Contains("no job 'worker'"));
  CHECK_THAT(spec.address("ps", 3).error().to_string(), Catch::Contains("no task 3 in job 'ps'"));
  CHECK(cluster_spec::load("/nonexistent/cluster.txt").error().code() == error_code::not_found);
}

TEST_CASE("devices name their task", "[net]") {
  auto t = task_of_device("/job:ps/replica:0/task:1/device:CPU:0");
  REQUIRE(t.ok());
  CHECK(t->job == "ps");
  CHECK(t->task == 1);
  CHECK(!task_of_device("/device:CPU:0").ok());
}

TEST_CASE("a device name with a task number too long for an int is refused, not thrown",
          "[net]") {
  // Found by tests/fuzz (cluster_spec): std::stoi threw out_of_range past the parser.
  auto r = task_of_device("/job:w/task:300000000000000000000/device:CPU:0");
  REQUIRE(!r.ok());
  CHECK_THAT(r.error().message(), Catch::Contains("does not name a job and a task"));
}
