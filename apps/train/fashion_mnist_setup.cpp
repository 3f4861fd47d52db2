#include "runnel/apps/train/fashion_mnist_setup.hpp"

#include <cstdio>

#include "runnel/apps/train/fashion_mnist_data.hpp"
#include "runnel/storage/record_index.hpp"

namespace runnel::apps {

options parse_options(const flags& f) {
  options o;
  // --connect: the tasks are runnel-node daemons; this process is only a client of worker
  // `task`'s master (the data is fed from here: --input memory).
  o.connect = f.has("connect");
  if (f.has("auth-token-file"))
    o.auth_token = read_token(f.get("auth-token-file", "")).value();
  if (o.connect && !f.has("cluster"))
    throw error(invalid_argument("--connect needs --cluster (the daemons' addresses)"));
  if (f.has("daemon-master") && !o.connect)
    throw error(invalid_argument("--daemon-master is for --connect (a client of daemons)"));
  if (o.connect && f.get("input", "memory") != "memory")
    throw error(invalid_argument("--connect feeds the data from this process: use --input memory "
                                 "(a dataset iterator would live in the daemon)"));
  o.sync = f.has("sync");
  if (!o.sync && (f.has("replicas-to-aggregate") || f.has("sync-timeout")))
    throw error(invalid_argument("--replicas-to-aggregate and --sync-timeout need --sync"));
  if (o.sync && !f.has("cluster"))
    throw error(invalid_argument("--sync trains replicas on a cluster: give --cluster too"));
  o.kind = f.get("model", "mlp");
  o.opt_name = f.get("optimizer", "adam");
  if (o.kind != "mlp" && o.kind != "softmax" && o.kind != "cnn")
    throw error(invalid_argument("--model must be mlp, softmax or cnn, got '" + o.kind + "'"));
  if (o.opt_name != "adam" && o.opt_name != "sgd" && o.opt_name != "momentum")
    throw error(
        invalid_argument("--optimizer must be adam, sgd or momentum, got '" + o.opt_name + "'"));
  o.precision = f.get("precision", "f32");
  o.compute = o.precision == "bf16" ? dtype::bf16 : o.precision == "f16" ? dtype::f16 : dtype::f32;
  if (o.precision != "f32" && o.precision != "bf16" && o.precision != "f16")
    throw error(
        invalid_argument("--precision must be f32, bf16 or f16, got '" + o.precision + "'"));
  if (o.compute == dtype::f16 && o.sync)
    throw error(invalid_argument("--precision f16 (loss scaling) does not combine with --sync; "
                                 "bf16 needs no loss scaling and does"));
  o.epochs = int(f.get_int("epochs", 5).value());
  o.batch = f.get_int("batch", 100).value();
  o.lr = f.get_double("lr", o.opt_name == "adam" ? 0.001 : 0.1).value();
  o.seed = f.get_int("seed", 1).value();
  o.max_steps = f.get_int("max-steps", -1).value();
  o.min_accuracy = f.get_double("min-accuracy", -1).value();
  o.step_delay_ms = f.get_int("step-delay-ms", 0).value();
  if (o.epochs < 1 || o.batch < 1)
    throw error(invalid_argument("--epochs and --batch must be positive"));
  o.data = f.get("data", "/usr/share/datasets/fashion-mnist");
  o.ckpt_dir = f.get("checkpoint-dir", "runnel-fashion-mnist");
  auto input = f.get("input", o.connect ? "memory" : "records");
  if (input != "records" && input != "memory")
    throw error(invalid_argument("--input must be records or memory, got '" + input + "'"));
  o.use_records = input == "records";
  o.limit_train = f.get_int("limit-train", -1).value();
  o.resume = f.has("resume");
  return o;
}

role join_cluster(const flags& f, const options& o) {
  role r;
  if (!f.has("cluster"))
    return r;
  auto spec = cluster_spec::parse(f.get("cluster", "")).value();
  std::string job = f.get("job", "worker");
  r.task = int(f.get_int("task", 0).value());
  r.ps_tasks = spec.num_tasks("ps");
  r.workers = spec.num_tasks("worker");
  if (r.ps_tasks == 0 || r.workers == 0)
    throw error(invalid_argument("--cluster needs a 'ps' job and a 'worker' job"));
  if (o.connect && job != "worker")
    throw error(invalid_argument("--connect trains as a worker: the ps tasks are daemons"));
  if (!o.connect)
    r.node = cluster_node::start(
                 {.cluster = spec, .job = job, .task = r.task, .auth_token = o.auth_token})
                 .value();
  if (job == "ps") {
    serve_until_signal(r.task);
    r.served_parameters = true;
    return r;
  }
  if (job != "worker")
    throw error(invalid_argument("--job must be ps or worker, got '" + job + "'"));
  if (r.task < 0 || r.task >= r.workers)
    throw error(invalid_argument("--task " + std::to_string(r.task) + ": the cluster has " +
                                 std::to_string(r.workers) + " worker tasks"));
  r.chief = r.task == 0;
  r.worker_address = spec.address("worker", r.task).value();
  return r;
}

datasets load_data(const flags& f, const options& o, const role& r) {
  datasets d;
  if (o.use_records) {
    auto dir = f.get("records-dir", "runnel-fashion-mnist-records");
    d.train_files = record_shards(dir, o.data, "train", 4);
    auto test_files = record_shards(dir, o.data, "test", 1);
    std::fprintf(stderr, "reading %s/{train,test}-*-of-* through datasets ...\n", dir.c_str());
    // The training split is read once here only to count it; batches stream from the dataset.
    int64_t count = 0;
    for (auto& file : d.train_files)
      count += count_records(file, /*use_index=*/true).value();
    if (o.limit_train > 0)
      count = std::min(o.limit_train, count);
    d.total_examples = count;
    // With W workers, this one trains on examples task, task + W, ... (dataset::shard).
    d.train.labels = tensor(dtype::i32, shape{(count - r.task + r.workers - 1) / r.workers});
    d.test = read_split(test_files, -1);
    return d;
  }
  std::fprintf(stderr, "loading %s ...\n", o.data.c_str());
  d.train = load_image_set(o.data + "/train-images-idx3-ubyte.gz",
                           o.data + "/train-labels-idx1-ubyte.gz", o.limit_train)
                .value();
  d.test =
      load_image_set(o.data + "/t10k-images-idx3-ubyte.gz", o.data + "/t10k-labels-idx1-ubyte.gz")
          .value();
  d.total_examples = d.train.size();
  if (r.workers > 1) { // this worker's share: examples task, task + W, ...
    std::vector<int64_t> share;
    for (int64_t i = r.task; i < d.train.size(); i += r.workers)
      share.push_back(i);
    d.train = {gather_rows(d.train.images, share, 0, int64_t(share.size())),
               gather_rows(d.train.labels, share, 0, int64_t(share.size()))};
  }
  return d;
}

/// --sync's options for this worker, checked against the cluster.
sync_replicas_options sync_options_of(const flags& f, const role& r) {
  int aggregate = int(f.get_int("replicas-to-aggregate", r.workers).value());
  if (aggregate < 1 || aggregate > r.workers)
    throw error(invalid_argument("--replicas-to-aggregate " + std::to_string(aggregate) +
                                 " must be in [1, " + std::to_string(r.workers) +
                                 "] (the cluster's worker tasks)"));
  double timeout_s = f.get_double("sync-timeout", 60).value();
  if (!(timeout_s > 0))
    throw error(invalid_argument("--sync-timeout must be positive"));
  std::fprintf(stderr, "synchronous training: %d of %d workers' gradients per step%s\n", aggregate,
               r.workers, aggregate < r.workers ? " (the rest are backups)" : "");
  return {.replicas_to_aggregate = aggregate,
          .total_num_replicas = r.workers,
          .replica = r.task,
          .timeout_ms = int64_t(timeout_s * 1000),
          .worker_device = "/job:worker/task:" + std::to_string(r.task)};
}

} // namespace runnel::apps
