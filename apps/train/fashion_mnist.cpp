// Trains a classifier on Fashion-MNIST with the embedded API: softmax regression or an MLP
// (784-512-10, ReLU), with a live progress line, a checkpoint per epoch, --resume, and the
// loss/accuracy curves as CSV and SVG. Data: Debian's dataset-fashion-mnist, converted once into
// sharded record files of tf.train.Examples that a dataset reads (shuffle, batch, parallel parse,
// prefetch) into the graph through an iterator op; `--input memory` feeds the idx data directly.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <random>

#include <csignal>
#include <optional>
#include <thread>

#include "runnel/actors/cluster/cluster.hpp"
#include "runnel/actors/data/dataset.hpp"
#include "runnel/actors/state/saver.hpp"
#include "runnel/actors/exec/session.hpp"
#include "runnel/apps/support/app_support.hpp"
#include "runnel/apps/train/fashion_mnist_data.hpp"
#include "runnel/apps/train/fashion_mnist_model.hpp"
#include "runnel/apps/support/records_tools.hpp"
#include "runnel/apps/support/training_log.hpp"
#include "runnel/apps/train/device_flags.hpp"
#include "runnel/ops/layers/data_flow.hpp"
#include "runnel/ops/train/mixed_precision.hpp"
#include "runnel/ops/train/optimizers.hpp"
#include "runnel/ops/layers/nn_layers.hpp"
#include "runnel/ops/train/replica.hpp"
#include "runnel/ops/layers/summary.hpp"
#include "runnel/ops/train/sync_replicas.hpp"
#include "runnel/storage/checkpoint.hpp"
#include "runnel/storage/record_index.hpp"

using namespace runnel;
using namespace runnel::apps;

namespace {

const char* usage =
    "usage: fashion_mnist [options]\n"
    "Trains on the 60k Fashion-MNIST images and reports accuracy on the 10k test images.\n"
    "  --model mlp|softmax|cnn  784-512-10 ReLU network, softmax regression, or a conv net (two\n"
    "                           3x3 conv/pool blocks of 32 and 64 channels, a dense layer of 256\n"
    "                           with dropout 0.5) (default mlp)\n"
    "  --epochs N               passes over the training set (default 5)\n"
    "  --batch N                examples per step (default 100)\n"
    "  --optimizer adam|sgd|momentum   (default adam)\n"
    "  --lr X                   learning rate (default 0.001 adam, 0.1 sgd/momentum)\n"
    "  --data DIR               idx files (default /usr/share/datasets/fashion-mnist)\n"
    "  --input records|memory   read through record files and a dataset (default), or feed\n"
    "                           the idx data from memory\n"
    "  --records-dir DIR        where the record shards are converted once and cached\n"
    "                           (default ./runnel-fashion-mnist-records)\n"
    "  --checkpoint-dir DIR     a checkpoint per epoch (default ./runnel-fashion-mnist)\n"
    "  --resume                 continue from the latest checkpoint in --checkpoint-dir\n"
    "  --csv FILE, --plot FILE  write the loss/accuracy curves as CSV / SVG\n"
    "  --logdir DIR             TensorBoard logs: the graph, train/test curves, weight histograms\n"
    "  --trace FILE             after training, trace one evaluation step on 100 test images and\n"
    "                           write its timeline (Chrome trace JSON: Perfetto, chrome://tracing)\n"
    "  --limit-train N          use only the first N training images\n"
    "  --max-steps N            stop after N steps in total\n"
    "  --min-accuracy A         exit with status 3 unless test accuracy >= A and the test loss\n"
    "                           is below the untrained model's\n"
    "  --seed N                 initialisation and shuffling seed (default 1)\n"
    "\n"
    "Distributed (data parallelism, parameters on ps tasks; asynchronous unless --sync):\n"
    "  --cluster SPEC           e.g. \"ps=127.0.0.1:2222;worker=127.0.0.1:2223,127.0.0.1:2224\"\n"
    "  --job ps|worker --task I this process's task: a ps serves the parameters until stopped;\n"
    "                           a worker trains its share (every W-th example of W workers);\n"
    "                           worker 0 (the chief) initializes or\n"
    "                           restores the model and writes checkpoints, the others wait for it\n"
    "  --sync                   synchronous training: each step averages one batch's gradients\n"
    "                           from each of N workers (the chief applies them); the others wait\n"
    "  --replicas-to-aggregate N   with --sync: gradients per step (default: every worker); with\n"
    "                           more workers than N the late ones are backups, their gradients\n"
    "                           dropped\n"
    "  --sync-timeout S         with --sync: fail a step that waits longer than S seconds for\n"
    "                           gradients, naming the missing workers (default 60)\n"
    "  --wire-bf16              send the gradients to the ps tasks as bfloat16 (half the bytes)\n"
    "  --precision f32|bf16|f16 the model's math (weights stay float32; f16 adds dynamic loss\n"
    "                           scaling)\n"
    RUNNEL_DEVICE_FLAGS_USAGE
    "  --connect                the tasks are runnel-node daemons (systemd, Kubernetes): train as\n"
    "                           a client of worker --task's daemon, feeding the data from here\n"
    "                           (implies --input memory)\n"
    "  --auth-token-file FILE   the cluster's shared secret (its first line)\n"
    "  --step-delay-ms N        sleep N ms before each step (a straggler, for tests and demos)\n";

int64_t shared_step(session& s, const graph_variable& step) {
  auto r = s.run({}, {step.value}).value();
  return *r[0].data<int64_t>();
}

std::atomic<int> stop_signal{0};
void on_signal(int sig) {
  stop_signal = sig;
}

int run(const flags& f) {
  // Distributed: start this task's node first; a ps only serves.
  std::unique_ptr<cluster_node> node;
  int ps_tasks = 0, task = 0, workers = 1;
  bool chief = true;
  // --connect: the tasks are runnel-node daemons; this process is only a client of worker
  // `task`'s master (the data is fed from here: --input memory).
  bool connect = f.has("connect");
  std::string worker_address, auth_token;
  if (f.has("auth-token-file"))
    auth_token = read_token(f.get("auth-token-file", "")).value();
  if (connect && !f.has("cluster"))
    throw error(invalid_argument("--connect needs --cluster (the daemons' addresses)"));
  if (connect && f.get("input", "memory") != "memory")
    throw error(invalid_argument("--connect feeds the data from this process: use --input memory "
                                 "(a dataset iterator would live in the daemon)"));
  bool sync = f.has("sync");
  if (!sync && (f.has("replicas-to-aggregate") || f.has("sync-timeout")))
    throw error(invalid_argument("--replicas-to-aggregate and --sync-timeout need --sync"));
  if (sync && !f.has("cluster"))
    throw error(invalid_argument("--sync trains replicas on a cluster: give --cluster too"));
  if (f.has("cluster")) {
    auto spec = cluster_spec::parse(f.get("cluster", "")).value();
    std::string job = f.get("job", "worker");
    task = int(f.get_int("task", 0).value());
    ps_tasks = spec.num_tasks("ps");
    workers = spec.num_tasks("worker");
    if (ps_tasks == 0 || workers == 0)
      throw error(invalid_argument("--cluster needs a 'ps' job and a 'worker' job"));
    if (connect && job != "worker")
      throw error(invalid_argument("--connect trains as a worker: the ps tasks are daemons"));
    if (!connect)
      node = cluster_node::start(
                 {.cluster = spec, .job = job, .task = task, .auth_token = auth_token})
                 .value();
    if (job == "ps") {
      std::signal(SIGINT, on_signal);
      std::signal(SIGTERM, on_signal);
      std::fprintf(stderr, "ps task %d: serving the parameters; stop with Ctrl-C\n", task);
      while (stop_signal.load() == 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      return 0;
    }
    if (job != "worker")
      throw error(invalid_argument("--job must be ps or worker, got '" + job + "'"));
    if (task < 0 || task >= workers)
      throw error(invalid_argument("--task " + std::to_string(task) + ": the cluster has " +
                                   std::to_string(workers) + " worker tasks"));
    chief = task == 0;
    worker_address = spec.address("worker", task).value();
  }
  auto kind = f.get("model", "mlp");
  auto opt_name = f.get("optimizer", "adam");
  if (kind != "mlp" && kind != "softmax" && kind != "cnn")
    throw error(invalid_argument("--model must be mlp, softmax or cnn, got '" + kind + "'"));
  if (opt_name != "adam" && opt_name != "sgd" && opt_name != "momentum")
    throw error(
        invalid_argument("--optimizer must be adam, sgd or momentum, got '" + opt_name + "'"));
  auto precision = f.get("precision", "f32");
  dtype compute = precision == "bf16" ? dtype::bf16 : precision == "f16" ? dtype::f16 : dtype::f32;
  if (precision != "f32" && precision != "bf16" && precision != "f16")
    throw error(invalid_argument("--precision must be f32, bf16 or f16, got '" + precision + "'"));
  if (compute == dtype::f16 && f.has("sync"))
    throw error(invalid_argument("--precision f16 (loss scaling) does not combine with --sync; "
                                 "bf16 needs no loss scaling and does"));
  int epochs = int(f.get_int("epochs", 5).value());
  int64_t batch = f.get_int("batch", 100).value();
  double lr = f.get_double("lr", opt_name == "adam" ? 0.001 : 0.1).value();
  int64_t seed = f.get_int("seed", 1).value();
  int64_t max_steps = f.get_int("max-steps", -1).value();
  double min_accuracy = f.get_double("min-accuracy", -1).value();
  int64_t step_delay_ms = f.get_int("step-delay-ms", 0).value();
  if (epochs < 1 || batch < 1)
    throw error(invalid_argument("--epochs and --batch must be positive"));
  auto data = f.get("data", "/usr/share/datasets/fashion-mnist");
  auto ckpt_dir = f.get("checkpoint-dir", "runnel-fashion-mnist");
  auto input = f.get("input", connect ? "memory" : "records");
  if (input != "records" && input != "memory")
    throw error(invalid_argument("--input must be records or memory, got '" + input + "'"));
  bool use_records = input == "records";
  int64_t limit_train = f.get_int("limit-train", -1).value();

  image_set train, test;
  std::vector<std::string> train_files;
  int64_t total_examples = 0; // before sharing among workers
  if (use_records) {
    auto dir = f.get("records-dir", "runnel-fashion-mnist-records");
    train_files = record_shards(dir, data, "train", 4);
    auto test_files = record_shards(dir, data, "test", 1);
    std::fprintf(stderr, "reading %s/{train,test}-*-of-* through datasets ...\n", dir.c_str());
    // The training split is read once here only to count it; batches stream from the dataset.
    int64_t count = 0;
    for (auto& file : train_files)
      count += count_records(file, /*use_index=*/true).value();
    if (limit_train > 0)
      count = std::min(limit_train, count);
    total_examples = count;
    // With W workers, this one trains on examples task, task + W, ... (dataset::shard).
    train.labels = tensor(dtype::i32, shape{(count - task + workers - 1) / workers});
    test = read_split(test_files, -1);
  } else {
    std::fprintf(stderr, "loading %s ...\n", data.c_str());
    train = load_image_set(data + "/train-images-idx3-ubyte.gz",
                           data + "/train-labels-idx1-ubyte.gz", limit_train)
                .value();
    test = load_image_set(data + "/t10k-images-idx3-ubyte.gz", data + "/t10k-labels-idx1-ubyte.gz")
               .value();
    total_examples = train.size();
    if (workers > 1) { // this worker's share: examples task, task + W, ...
      std::vector<int64_t> share;
      for (int64_t i = task; i < train.size(); i += workers)
        share.push_back(i);
      train = {gather_rows(train.images, share, 0, int64_t(share.size())),
               gather_rows(train.labels, share, 0, int64_t(share.size()))};
    }
  }
  int64_t train_size = train.labels.dim(0);
  std::fprintf(stderr,
               "%lld training%s and %lld test images; model %s (%s math), %s lr %g, batch %lld\n",
               static_cast<long long>(train_size), workers > 1 ? " (this worker's share)" : "",
               static_cast<long long>(test.size()), kind.c_str(), precision.c_str(),
               opt_name.c_str(), lr, static_cast<long long>(batch));

  std::optional<sync_replicas_options> sync_options;
  if (sync) {
    int aggregate = int(f.get_int("replicas-to-aggregate", workers).value());
    if (aggregate < 1 || aggregate > workers)
      throw error(invalid_argument("--replicas-to-aggregate " + std::to_string(aggregate) +
                                   " must be in [1, " + std::to_string(workers) +
                                   "] (the cluster's worker tasks)"));
    double timeout_s = f.get_double("sync-timeout", 60).value();
    if (!(timeout_s > 0))
      throw error(invalid_argument("--sync-timeout must be positive"));
    sync_options = sync_replicas_options{.replicas_to_aggregate = aggregate,
                                         .total_num_replicas = workers,
                                         .replica = task,
                                         .timeout_ms = int64_t(timeout_s * 1000),
                                         .worker_device = "/job:worker/task:" +
                                                          std::to_string(task)};
    std::fprintf(stderr, "synchronous training: %d of %d workers' gradients per step%s\n",
                 aggregate, workers, aggregate < workers ? " (the rest are backups)" : "");
  }
  auto m = build({.kind = kind,
                  .opt_name = opt_name,
                  .lr = lr,
                  .seed = seed,
                  .device_fn = f.has("cluster") ? replica_device_setter(ps_tasks, "/job:worker/task:" +
                                                                               std::to_string(task))
                                                : nullptr,
                  .sync = sync_options,
                  .wire_bf16 = f.has("wire-bf16"),
                  .compute = compute});
  saver sv(m->g, {}, {.max_to_keep = 3});
  auto init = global_variables_initializer(m->g);
  // TensorBoard: the graph, training and test curves, and (from the chief) the weights'
  // histograms once per epoch through summary ops.
  training_log log(f.get("logdir", ""), f.has("cluster") ? "worker-" + std::to_string(task) : "");
  output weight_histograms;
  if (log.enabled() && chief) {
    std::vector<output> hists;
    for (int id : m->g.collection("trainable_variables"))
      hists.push_back(histogram_summary(m->g.at(id).name, output(&m->g, {id, 0})));
    weight_histograms = merge_summary(hists, "weight_histograms");
  }
  log.graph(m->g);
  if (node && (f.has("device") || f.has("simulated-gpus")))
    throw error(invalid_argument("--device and --simulated-gpus are for a local run; a cluster's "
                                 "tasks place by their own devices"));
  std::unique_ptr<runtime> local_rt = node ? nullptr : local_training_runtime(f);
  runtime& rt = node ? node->rt() : *local_rt;
  // Distributed, the session runs through this worker's own node: its master places the graph
  // over the cluster.
  session_options so;
  so.auth_token = auth_token;
  auto s_ptr = f.has("cluster")
                   ? std::make_unique<session>(rt, m->g, "runnel://" + worker_address, so)
                   : std::make_unique<session>(rt, m->g);
  session& s = *s_ptr;
  int64_t steps_per_epoch = (train_size + batch - 1) / batch;
  if (sync) // counted in shared steps, the same on every worker: the smallest share's batches
    steps_per_epoch = std::max<int64_t>(1, (total_examples / workers + batch - 1) / batch);
  int64_t global_step = 0;
  if (!chief) {
    // The chief initializes (or restores) the model; wait until it has.
    std::fprintf(stderr, "worker %d: waiting for the chief to initialize the model ...\n", task);
    for (;;) {
      std::vector<output> fetches{m->step.value};
      fetches.insert(fetches.end(), m->ready.begin(), m->ready.end());
      auto r = s.run({}, fetches);
      if (r.ok()) {
        // Asynchronous: this worker counts its own steps. Synchronous: every worker goes by the
        // shared step.
        global_step = sync ? *r.value()[0].data<int64_t>() : 0;
        break;
      }
      if (r.error().code() != error_code::failed_precondition &&
          r.error().code() != error_code::unavailable)
        throw error(r.error());
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  } else if (f.has("resume")) {
    auto latest = saver::latest_checkpoint(ckpt_dir);
    if (!latest) {
      std::fprintf(stderr, "no checkpoint in %s: starting from scratch\n", ckpt_dir.c_str());
      throw_if_error(s.run({init}));
    } else {
      throw_if_error(sv.restore(s, *latest));
      global_step = read_checkpoint_global_step(*latest).value().value_or(0);
      std::fprintf(stderr, "resumed from %s (step %lld)\n", latest->c_str(),
                   static_cast<long long>(global_step));
    }
  } else {
    throw_if_error(s.run({init}));
  }

  // What --min-accuracy compares the final test loss with: the untrained model's test loss,
  // measured where this process initializes the model. A worker that joins a model the chief
  // initialized (and may have trained), or a resumed run, uses the loss of predicting all ten
  // classes uniformly, ln 10, which is where these models start (softmax: exactly).
  double untrained_loss = std::log(10.0);
  auto evaluate = [&] {
    // In slices of 1,000 images: a conv net's activations for all 10,000 at once take GBs.
    double loss_sum = 0, acc_sum = 0;
    int64_t n = test.size();
    std::vector<int64_t> all(static_cast<size_t>(n));
    std::iota(all.begin(), all.end(), 0);
    for (int64_t b = 0; b < n; b += 1000) {
      int64_t e = std::min(n, b + 1000);
      feed_list feeds{{m->x, gather_rows(test.images, all, b, e)},
                      {m->y, gather_rows(test.labels, all, b, e)}};
      if (m->training.valid())
        feeds.emplace_back(m->training, tensor::scalar<bool>(false));
      auto r = s.run(feeds, {m->loss, m->accuracy}).value();
      loss_sum += *r[0].data<float>() * double(e - b);
      acc_sum += *r[1].data<float>() * double(e - b);
    }
    return std::pair<double, double>{loss_sum / double(n), acc_sum / double(n)};
  };
  if (chief && !f.has("resume") && min_accuracy >= 0)
    untrained_loss = evaluate().first;

  std::vector<curve_point> curve;
  int64_t total_steps = int64_t(epochs) * steps_per_epoch;
  if (max_steps > 0)
    total_steps = std::min(total_steps, max_steps);
  progress_line progress(total_steps, epochs);
  std::vector<int64_t> order(static_cast<size_t>(train_size));
  double last_loss = 0, test_accuracy = 0, test_loss = 0;
  std::string last_checkpoint;
  int start_epoch = int(global_step / steps_per_epoch);
  bool training_ended = false;
  // Steps after the first (which includes building the instance), and when they ran.
  std::chrono::steady_clock::time_point first_step_done, last_step_done;
  int64_t timed_steps = 0;
  // Synchronous workers go by the shared step, which may move back (a restarted chief restores a
  // checkpoint) or jump (a late worker): they train until it reaches the total, however many
  // passes over their share that takes.
  for (int epoch = start_epoch;
       (sync || epoch < epochs) && global_step < total_steps && !training_ended; ++epoch) {
    uint64_t epoch_seed = uint64_t(seed * 1000 + epoch);
    int64_t resume_batches = global_step % steps_per_epoch;
    if (use_records) {
      // This epoch's data: a fixed seed per epoch, so a resumed run skips exactly the batches it
      // already trained on.
      auto ds = dataset::records(train_files);
      if (limit_train > 0)
        ds = ds.take(limit_train);
      if (workers > 1)
        ds = ds.shard(workers, task);
      ds = ds.shuffle(10'000, epoch_seed + uint64_t(task) * 7919, false)
               .batch(batch)
               .skip(resume_batches)
               .map(decode_batch(), 2)
               .prefetch(4);
      throw_if_error(initialize_iterator(rt, "train", ds));
    } else {
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), std::mt19937_64(epoch_seed + uint64_t(task) * 7919));
    }
    double loss_sum = 0, acc_sum = 0, window_loss = 0, window_acc = 0;
    int64_t n = 0, window = 0;
    progress.start_epoch(global_step, global_step * batch);
    int64_t log_every = std::max<int64_t>(1, steps_per_epoch / 10);
    for (int64_t b = resume_batches * batch; b < train_size; b += batch) {
      feed_list feeds;
      if (!use_records) {
        int64_t e = std::min(train_size, b + batch);
        feeds = {{m->x, gather_rows(train.images, order, b, e)},
                 {m->y, gather_rows(train.labels, order, b, e)}};
      }
      if (m->training.valid())
        feeds.emplace_back(m->training, tensor::scalar<bool>(true));
      if (step_delay_ms > 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(step_delay_ms));
      std::vector<output> fetches{m->loss, m->accuracy};
      if (m->sync)
        fetches.push_back(m->sync_step);
      auto step = s.run(feeds, fetches, {m->train});
      if (first_step_done.time_since_epoch().count() == 0)
        first_step_done = std::chrono::steady_clock::now();
      else
        ++timed_steps;
      last_step_done = std::chrono::steady_clock::now();
      if (!step && step.error().code() == error_code::out_of_range) {
        if (step.error().message().find("training ended") != std::string::npos) {
          std::fprintf(stderr, "\n%s\n", step.error().message().c_str());
          training_ended = true;
        }
        break; // the dataset ended (the last batch may be smaller), or the chief ended training
      }
      auto r = std::move(step).value();
      double l = *r[0].data<float>(), a = *r[1].data<float>();
      loss_sum += l;
      acc_sum += a;
      window_loss += l;
      window_acc += a;
      ++n;
      ++window;
      ++global_step;
      if (m->sync) // the shared step this worker goes on from (all workers see the same)
        global_step = *r[2].data<int64_t>();
      if (window == log_every) { // a point of the training curve (no test evaluation)
        log.scalar("train/loss", window_loss / double(window), global_step);
        log.scalar("train/accuracy", window_acc / double(window), global_step);
        curve.push_back({epoch + 1, global_step, window_loss / double(window),
                         window_acc / double(window), -1});
        window_loss = window_acc = 0;
        window = 0;
      }
      progress.update(epoch + 1, global_step, loss_sum / double(n), acc_sum / double(n),
                      global_step * batch);
      if (global_step >= total_steps)
        break;
    }
    last_loss = n ? loss_sum / double(n) : last_loss;
    progress.finish();
    auto eval_start = std::chrono::steady_clock::now();
    std::tie(test_loss, test_accuracy) = evaluate();
    double eval_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - eval_start).count();
    log.scalar("test/loss", test_loss, global_step);
    log.scalar("test/accuracy", test_accuracy, global_step);
    if (weight_histograms.valid())
      log.summary(s.run({}, {weight_histograms}).value()[0], global_step);
    if (chief) // named by the shared global_step, which counts every worker's steps
      last_checkpoint = sv.save(s, ckpt_dir + "/model", shared_step(s, m->step)).value();
    std::fprintf(stderr,
                 "epoch %d: train loss %.4f, train accuracy %.4f, test accuracy %.4f -> %s "
                 "(training %s at %.0f ex/s, evaluation %s)\n",
                 epoch + 1, last_loss, n ? acc_sum / double(n) : 0.0, test_accuracy,
                 last_checkpoint.c_str(), format_seconds(progress.epoch_seconds()).c_str(),
                 progress.epoch_rate(), format_seconds(eval_seconds).c_str());
    if (window == 0 && !curve.empty() && curve.back().step == global_step)
      curve.back().test_accuracy = test_accuracy;
    else if (window > 0)
      curve.push_back({epoch + 1, global_step, window_loss / double(window),
                       window_acc / double(window), test_accuracy});
  }
  if (m->sync && chief) { // the other workers' next step ends with "training ended"
    auto dropped = s.run({}, {m->sync->ops().dropped}).value()[0];
    std::printf("sync: %lld stale gradients dropped\n",
                static_cast<long long>(*dropped.data<int64_t>()));
    throw_if_error(s.run({m->sync->ops().stop}));
  }
  if (curve.empty())
    std::tie(test_loss, test_accuracy) = evaluate();
  if (f.has("trace")) {
    run_metadata md;
    int64_t n = std::min<int64_t>(100, test.size());
    std::vector<int64_t> first(static_cast<size_t>(n));
    std::iota(first.begin(), first.end(), 0);
    feed_list feeds{{m->x, gather_rows(test.images, first, 0, n)},
                    {m->y, gather_rows(test.labels, first, 0, n)}};
    if (m->training.valid())
      feeds.emplace_back(m->training, tensor::scalar<bool>(false));
    throw_if_error(s.run(feeds,
                         {m->loss, m->accuracy}, {}, {.trace = true}, &md)
                       .error());
    auto path = f.get("trace", "");
    std::FILE* out = std::fopen(path.c_str(), "w");
    if (!out)
      throw error(not_found("cannot write trace file " + path));
    auto json = md.to_chrome_trace();
    std::fwrite(json.data(), 1, json.size(), out);
    if (std::fclose(out) != 0)
      throw error(data_loss("cannot write trace file " + path));
    std::fprintf(stderr, "trace of one step (%zu nodes) -> %s\n", md.nodes.size(), path.c_str());
  }
  if (f.has("csv"))
    throw_if_error(write_curve_csv(f.get("csv", ""), curve));
  if (f.has("plot"))
    throw_if_error(write_curve_svg(f.get("plot", ""), "Fashion-MNIST " + kind, curve));
  log.close();
  if (!last_checkpoint.empty())
    std::printf("checkpoint: %s\n", last_checkpoint.c_str());
  if (timed_steps > 0) // what bench/sync_backup_bench.sh reads
    std::printf("step time: %.3f ms (mean of %lld steps after the first)\n",
                std::chrono::duration<double, std::milli>(last_step_done - first_step_done).count() /
                    double(timed_steps),
                static_cast<long long>(timed_steps));
  std::printf("test accuracy: %.4f\n", test_accuracy);
  if (min_accuracy >= 0) {
    if (test_accuracy < min_accuracy) {
      std::fprintf(stderr, "FAILED: test accuracy %.4f < %.4f\n", test_accuracy, min_accuracy);
      return 3;
    }
    if (!(test_loss < untrained_loss)) {
      std::fprintf(stderr, "FAILED: the test loss %.4f is not below the untrained model's %.4f\n",
                   test_loss, untrained_loss);
      return 3;
    }
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  return app_main("fashion_mnist", argc, argv, usage,
                  {"cluster", "job", "task", "sync", "replicas-to-aggregate", "sync-timeout", "step-delay-ms", "wire-bf16", "precision", "device", "simulated-gpus", "connect", "auth-token-file",
                   "model", "epochs", "batch", "optimizer", "lr", "data", "input", "records-dir",
                   "checkpoint-dir", "trace",
                   "resume", "csv", "plot", "logdir", "limit-train", "max-steps", "min-accuracy", "seed"},
                  run);
}
