#pragma once
// The Fashion-MNIST app's setup: its flags checked into options, this process's place in a
// cluster (a ps task serves here until stopped), the training data (this worker's share) and the
// test set, --sync's options.
#include <memory>
#include <string>
#include <vector>

#include "runnel/actors/cluster/cluster.hpp"
#include "runnel/apps/support/app_support.hpp"
#include "runnel/ops/train/sync_replicas.hpp"

namespace runnel::apps {

/// What the flags ask for.
struct options {
  bool connect = false, sync = false, use_records = true, resume = false;
  std::string kind, opt_name, precision, data, ckpt_dir, auth_token;
  dtype compute = dtype::f32;
  int epochs = 5;
  int64_t batch = 100, seed = 1, max_steps = -1, step_delay_ms = 0, limit_train = -1;
  double lr = 0.001, min_accuracy = -1;
};

/// This process's place: one local worker, or a task of --cluster (with its node started).
struct role {
  std::unique_ptr<cluster_node> node;
  int ps_tasks = 0, task = 0, workers = 1;
  bool chief = true;
  bool served_parameters = false; ///< a ps task that served until a signal: nothing more to do
  std::string worker_address;
};

/// The training data (this worker's share) and the test set.
struct datasets {
  image_set train, test;
  std::vector<std::string> train_files; ///< --input records: the shards a dataset reads
  int64_t total_examples = 0;           ///< before sharing among workers
};

/// The flags, checked (the cluster's flags are checked by join_cluster).
options parse_options(const flags& f);
/// Starts this task's node on --cluster; a ps task serves the parameters until SIGINT or SIGTERM
/// and comes back with `served_parameters` set.
role join_cluster(const flags& f, const options& o);
/// The record shards (converted once) or the idx data in memory, this worker's share of it.
datasets load_data(const flags& f, const options& o, const role& r);
/// --sync's options for this worker, checked against the cluster.
sync_replicas_options sync_options_of(const flags& f, const role& r);

} // namespace runnel::apps
