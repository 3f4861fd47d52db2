#pragma once
// A cluster: named jobs, each a list of task addresses.
//
//   auto spec = cluster_spec::parse("ps=127.0.0.1:2222;worker=127.0.0.1:2223,127.0.0.1:2224");
//   spec->address("worker", 1);            // "127.0.0.1:2224"
//   spec->task_name("ps", 0);              // "/job:ps/replica:0/task:0"
//   auto from_file = cluster_spec::load("cluster.txt");   // the same, one job per line allowed
//
// Jobs are `name=host:port[,host:port...]`, separated by ';' or newlines; '#' starts a comment.
// Job names follow TensorFlow's ([a-z][a-z0-9_]*); ports are 1..65535 (0 only where a test asks
// for an ephemeral port). Errors name the job, the task and the text at fault.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runnel/ops/core/status.hpp"

namespace runnel {

struct task_id {
  std::string job;
  int task = 0;
  bool operator==(const task_id&) const = default;
  bool operator<(const task_id& o) const { return job != o.job ? job < o.job : task < o.task; }
  /// "/job:NAME/replica:0/task:I"
  std::string name() const;
};

class cluster_spec {
public:
  static result<cluster_spec> parse(const std::string& text);
  static result<cluster_spec> load(const std::string& path);

  /// The address of a task, or not_found naming the job and task.
  result<std::string> address(const std::string& job, int task) const;
  result<std::string> address(const task_id& t) const { return address(t.job, t.task); }
  /// Every task, jobs in name order, tasks in index order.
  std::vector<task_id> tasks() const;
  const std::map<std::string, std::vector<std::string>>& jobs() const { return jobs_; }
  int num_tasks(const std::string& job) const;
  /// Back to the one-line form.
  std::string to_string() const;

  /// Splits "host:port"; the port must be a number (0..65535).
  static result<std::pair<std::string, int>> split_address(const std::string& address);

private:
  std::map<std::string, std::vector<std::string>> jobs_;
};

/// The job and task of a device name or spec ("/job:ps/replica:0/task:1/device:CPU:0"), if it
/// names both.
result<task_id> task_of_device(const std::string& device);

} // namespace runnel
