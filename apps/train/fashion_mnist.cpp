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
#include "runnel/actors/exec/session.hpp"
#include "runnel/actors/state/saver.hpp"
#include "runnel/apps/support/app_support.hpp"
#include "runnel/apps/support/records_tools.hpp"
#include "runnel/apps/support/training_log.hpp"
#include "runnel/apps/train/device_flags.hpp"
#include "runnel/apps/train/fashion_mnist_data.hpp"
#include "runnel/apps/train/fashion_mnist_model.hpp"
#include "runnel/apps/train/fashion_mnist_setup.hpp"
#include "runnel/ops/layers/data_flow.hpp"
#include "runnel/ops/layers/nn_layers.hpp"
#include "runnel/ops/layers/summary.hpp"
#include "runnel/ops/train/mixed_precision.hpp"
#include "runnel/ops/train/optimizers.hpp"
#include "runnel/ops/train/replica.hpp"
#include "runnel/ops/train/sync_replicas.hpp"
#include "runnel/storage/checkpoint.hpp"
#include "runnel/storage/record_index.hpp"

using namespace runnel;
using namespace runnel::apps;

namespace {

// clang-format off
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
    "                           (implies --input memory); this process places the graph and\n"
    "                           calls every task's worker itself (one round trip per task)\n"
    "  --daemon-master          with --connect: go through the daemon's master instead\n"
    "  --auth-token-file FILE   the cluster's shared secret (its first line)\n"
    "  --step-delay-ms N        sleep N ms before each step (a straggler, for tests and demos)\n";
// clang-format on

int64_t shared_step(session& s, const graph_variable& step) {
  auto r = s.run({}, {step.value}).value();
  return *r[0].data<int64_t>();
}

/// Initializes the model, restores --resume's checkpoint, or (not the chief) waits until the chief
/// has done one of those. Returns the global step to go on from.
int64_t start_model(session& s, const model& m, operation init, saver& sv, const options& o,
                    const role& r) {
  if (!r.chief) {
    std::fprintf(stderr, "worker %d: waiting for the chief to initialize the model ...\n", r.task);
    for (;;) {
      std::vector<output> fetches{m.step.value};
      fetches.insert(fetches.end(), m.ready.begin(), m.ready.end());
      auto run = s.run({}, fetches);
      if (run.ok()) // asynchronous: this worker counts its own steps; synchronous: the shared step
        return o.sync ? *run.value()[0].data<int64_t>() : 0;
      if (run.error().code() != error_code::failed_precondition &&
          run.error().code() != error_code::unavailable)
        throw error(run.error());
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  if (o.resume) {
    auto latest = saver::latest_checkpoint(o.ckpt_dir);
    if (latest) {
      throw_if_error(sv.restore(s, *latest));
      int64_t step = read_checkpoint_global_step(*latest).value().value_or(0);
      std::fprintf(stderr, "resumed from %s (step %lld)\n", latest->c_str(),
                   static_cast<long long>(step));
      return step;
    }
    std::fprintf(stderr, "no checkpoint in %s: starting from scratch\n", o.ckpt_dir.c_str());
  }
  throw_if_error(s.run({init}));
  return 0;
}

/// The test loss and accuracy, in slices of 1,000 images (a conv net's activations for all
/// 10,000 at once take GBs).
std::pair<double, double> evaluate(session& s, const model& m, const image_set& test) {
  double loss_sum = 0, acc_sum = 0;
  int64_t n = test.size();
  std::vector<int64_t> all(static_cast<size_t>(n));
  std::iota(all.begin(), all.end(), 0);
  for (int64_t b = 0; b < n; b += 1000) {
    int64_t e = std::min(n, b + 1000);
    feed_list feeds{{m.x, gather_rows(test.images, all, b, e)},
                    {m.y, gather_rows(test.labels, all, b, e)}};
    if (m.training.valid())
      feeds.emplace_back(m.training, tensor::scalar<bool>(false));
    auto r = s.run(feeds, {m.loss, m.accuracy}).value();
    loss_sum += *r[0].data<float>() * double(e - b);
    acc_sum += *r[1].data<float>() * double(e - b);
  }
  return {loss_sum / double(n), acc_sum / double(n)};
}

/// --trace: one evaluation step on 100 test images, its timeline as Chrome trace JSON.
void write_trace(session& s, const model& m, const image_set& test, const std::string& path) {
  run_metadata md;
  int64_t n = std::min<int64_t>(100, test.size());
  std::vector<int64_t> first(static_cast<size_t>(n));
  std::iota(first.begin(), first.end(), 0);
  feed_list feeds{{m.x, gather_rows(test.images, first, 0, n)},
                  {m.y, gather_rows(test.labels, first, 0, n)}};
  if (m.training.valid())
    feeds.emplace_back(m.training, tensor::scalar<bool>(false));
  throw_if_error(s.run(feeds, {m.loss, m.accuracy}, {}, {.trace = true}, &md).error());
  std::FILE* out = std::fopen(path.c_str(), "w");
  if (!out)
    throw error(not_found("cannot write trace file " + path));
  auto json = md.to_chrome_trace();
  std::fwrite(json.data(), 1, json.size(), out);
  if (std::fclose(out) != 0)
    throw error(data_loss("cannot write trace file " + path));
  std::fprintf(stderr, "trace of one step (%zu nodes) -> %s\n", md.nodes.size(), path.c_str());
}

/// One epoch's running sums: the whole epoch's and the current curve point's.
struct epoch_sums {
  double loss = 0, acc = 0, window_loss = 0, window_acc = 0;
  int64_t n = 0, window = 0;
};

/// The training loop, epoch after epoch, with its curve, progress line and checkpoints.
struct trainer {
  session& s;
  model& m;
  runtime& rt;
  const options& o;
  const role& r;
  const datasets& d;
  training_log& log;
  saver& sv;
  output weight_histograms; ///< the chief's, with --logdir
  int64_t steps_per_epoch;
  int64_t total_steps;
  int64_t global_step;
  progress_line progress{total_steps, o.epochs};
  std::vector<curve_point> curve;
  std::vector<int64_t> order = std::vector<int64_t>(size_t(d.train.labels.dim(0)));
  double test_loss = 0, test_accuracy = 0, last_loss = 0;
  std::string last_checkpoint;
  bool training_ended = false;
  // Steps after the first (which includes building the instance), and when they ran.
  std::chrono::steady_clock::time_point first_step_done, last_step_done;
  int64_t timed_steps = 0;

  /// Synchronous workers go by the shared step, which may move back (a restarted chief restores
  /// a checkpoint) or jump (a late worker): they train until it reaches the total, however many
  /// passes over their share that takes.
  void run() {
    for (int epoch = int(global_step / steps_per_epoch);
         (o.sync || epoch < o.epochs) && global_step < total_steps && !training_ended; ++epoch) {
      epoch_sums sums;
      train_steps(epoch, sums);
      end_epoch(epoch, sums);
    }
    if (off_pace()) // the fault outlasted training: its last line
      say_off_pace("training ended at", "with this worker still off its pace: ", "");
  }

  /// This epoch's data: a fixed seed per epoch, so a resumed run skips exactly the batches it
  /// already trained on.
  void start_data(int epoch, int64_t resume_batches) {
    uint64_t epoch_seed = uint64_t(o.seed * 1000 + epoch) + uint64_t(r.task) * 7919;
    if (!o.use_records) {
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), std::mt19937_64(epoch_seed));
      return;
    }
    auto ds = dataset::records(d.train_files);
    if (o.limit_train > 0)
      ds = ds.take(o.limit_train);
    if (r.workers > 1)
      ds = ds.shard(r.workers, r.task);
    ds = ds.shuffle(10'000, epoch_seed, false)
             .batch(o.batch)
             .skip(resume_batches)
             .map(decode_batch(), dataset::autotune) // as many decoders as pay for themselves
             .prefetch(dataset::autotune);
    throw_if_error(initialize_iterator(rt, "train", ds));
    progress.set_input_wait([this] {
      auto st = get_iterator_stats(rt, "train");
      return st ? st->wait_seconds : -1.0;
    });
  }

  void train_steps(int epoch, epoch_sums& sums) {
    int64_t resume_batches = global_step % steps_per_epoch;
    start_data(epoch, resume_batches);
    progress.start_epoch(global_step, global_step * o.batch);
    int64_t log_every = std::max<int64_t>(1, steps_per_epoch / 10);
    int64_t train_size = d.train.labels.dim(0);
    for (int64_t b = resume_batches * o.batch; b < train_size; b += o.batch) {
      feed_list feeds;
      if (!o.use_records) {
        int64_t e = std::min(train_size, b + o.batch);
        feeds = {{m.x, gather_rows(d.train.images, order, b, e)},
                 {m.y, gather_rows(d.train.labels, order, b, e)}};
      }
      if (m.training.valid())
        feeds.emplace_back(m.training, tensor::scalar<bool>(true));
      if (o.step_delay_ms > 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(o.step_delay_ms));
      std::vector<output> fetches{m.loss, m.accuracy};
      if (m.sync)
        fetches.push_back(m.sync_step);
      auto began = std::chrono::steady_clock::now();
      int64_t step_before = global_step;
      auto step = s.run(feeds, fetches, {m.train});
      if (first_step_done.time_since_epoch().count() == 0)
        first_step_done = std::chrono::steady_clock::now();
      else
        ++timed_steps;
      last_step_done = std::chrono::steady_clock::now();
      if (!step && step.error().code() == error_code::out_of_range) {
        if (step.error().message().find("training ended") != std::string::npos) {
          if (m.sync) // held up until the others had finished?
            note_stall(last_step_done - began, step_before, true);
          std::fprintf(stderr, "\n%s\n", step.error().message().c_str());
          training_ended = true;
        }
        break; // the dataset ended (the last batch may be smaller), or the chief ended training
      }
      auto out = std::move(step).value();
      double l = *out[0].data<float>(), a = *out[1].data<float>();
      sums.loss += l;
      sums.acc += a;
      sums.window_loss += l;
      sums.window_acc += a;
      ++sums.n;
      ++sums.window;
      ++global_step;
      if (m.sync) { // the shared step this worker goes on from (all workers see the same)
        global_step = *out[2].data<int64_t>();
        note_stall(std::chrono::steady_clock::now() - began, step_before);
      }
      if (sums.window == log_every) { // a point of the training curve (no test evaluation)
        add_curve_point(epoch, sums, -1);
        sums.window_loss = sums.window_acc = 0;
        sums.window = 0;
      }
      progress.update(epoch + 1, global_step, sums.loss / double(sums.n), sums.acc / double(sums.n),
                      global_step * o.batch);
      if (global_step >= total_steps)
        break;
    }
  }

  /// One line when a synchronous step of this worker took far longer than usual (stopped, cut
  /// off, starved): the others went on without it, its late gradients dropped as stale. One line
  /// when it turns a straggler, and one when it is back. A run of stalled steps (a link so slow
  /// that every step stalls) is one line at its first and one when back, not a line a step.
  double usual_step_s = 0;
  int64_t usual_steps = 0, slow_steps = 0, stalled_steps = 0;
  double unusual_s = 0; // time in the slow and stalled steps since the last usual one
  void note_stall(std::chrono::steady_clock::duration took, int64_t step_before,
                  bool ended = false) {
    double s = std::chrono::duration<double>(took).count();
    if (usual_steps >= 10 && s > std::max(2.0, 10 * usual_step_s)) {
      unusual_s += s;
      // Named at the first of a run of stalled steps; the line when back gives the count.
      if (++stalled_steps > 1 && !ended) {
        if (slow_steps + stalled_steps == 100)
          take_as_usual_pace(s);
        return;
      }
      // The others went on (the shared step moved more than one): this worker was the one held
      // up. Otherwise the whole job waited, for this worker among others.
      bool alone = ended || global_step - step_before > 1;
      std::fprintf(stderr,
                   "\nworker %d (/job:worker/replica:0/task:%d at %s): stalled at step %lld: a "
                   "step took %.1f s, %.0fx the usual %.0f ms; %s %lld%s\n",
                   r.task, r.task, r.worker_address.c_str(), static_cast<long long>(step_before), s,
                   s / usual_step_s, usual_step_s * 1e3,
                   ended   ? "the others went on without it and ended training; its last step was"
                   : alone ? "the others went on without it (its late gradients dropped as "
                             "stale) to step"
                           : "the whole job waited: the shared step is",
                   static_cast<long long>(global_step), ended ? "" : "; back in step");
      if (ended) // its last line
        slow_steps = stalled_steps = 0;
      return;
    }
    // Slower than twice the usual for 10 steps in a row: a straggler (its link or host slow, or
    // the whole job slower), named once, and once more when it is back to the usual pace.
    if (usual_steps >= 10 && s > 2 * usual_step_s) {
      unusual_s += s;
      if (++slow_steps == 10)
        std::fprintf(stderr,
                     "\nworker %d (/job:worker/replica:0/task:%d at %s): slow since step %lld: "
                     "10 steps in a row took over twice the usual %.0f ms (the last %.1fx; a "
                     "straggling link or host, or the whole job slower)\n",
                     r.task, r.task, r.worker_address.c_str(),
                     static_cast<long long>(step_before - 9), usual_step_s * 1e3, s / usual_step_s);
      if (slow_steps + stalled_steps == 100)
        take_as_usual_pace(s);
      return; // the usual pace stays what it was
    }
    if (off_pace())
      say_off_pace("back to the usual pace at", "after ", " off its pace");
    slow_steps = stalled_steps = 0;
    unusual_s = 0;
    usual_step_s = usual_steps == 0 ? s : 0.9 * usual_step_s + 0.1 * s;
    ++usual_steps;
  }
  /// Named as a straggler (10 slow steps in a row) or stalled more than one step in a row.
  bool off_pace() const { return slow_steps >= 10 || stalled_steps > 1; }
  /// "worker …: WHEN step S BEFOREN steps AFTER (… stalled, … slow; T s)": the line that closes a
  /// run of slow or stalled steps.
  void say_off_pace(const char* when, const char* before, const char* after) const {
    std::fprintf(
        stderr,
        "\nworker %d (/job:worker/replica:0/task:%d at %s): %s step %lld %s%lld steps%s "
        "(%lld stalled, %lld slow; %.1f s)\n",
        r.task, r.task, r.worker_address.c_str(), when, static_cast<long long>(global_step), before,
        static_cast<long long>(slow_steps + stalled_steps), after,
        static_cast<long long>(stalled_steps), static_cast<long long>(slow_steps), unusual_s);
  }
  /// 100 slow or stalled steps in a row are not a passing fault: the pace from here on.
  void take_as_usual_pace(double step_s) {
    std::fprintf(stderr, "\nworker %d: %.0f ms a step taken as the usual pace from here\n", r.task,
                 step_s * 1e3);
    usual_step_s = step_s, slow_steps = stalled_steps = 0, unusual_s = 0;
  }

  void add_curve_point(int epoch, const epoch_sums& sums, double test_acc) {
    double loss = sums.window_loss / double(sums.window),
           acc = sums.window_acc / double(sums.window);
    if (test_acc < 0) {
      log.scalar("train/loss", loss, global_step);
      log.scalar("train/accuracy", acc, global_step);
    }
    curve.push_back({epoch + 1, global_step, loss, acc, test_acc});
  }

  /// The test evaluation, TensorBoard's points, the chief's checkpoint and the epoch's line.
  void end_epoch(int epoch, const epoch_sums& sums) {
    last_loss = sums.n ? sums.loss / double(sums.n) : last_loss;
    progress.finish();
    auto eval_start = std::chrono::steady_clock::now();
    std::tie(test_loss, test_accuracy) = evaluate(s, m, d.test);
    double eval_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - eval_start).count();
    log.scalar("test/loss", test_loss, global_step);
    log.scalar("test/accuracy", test_accuracy, global_step);
    if (weight_histograms.valid())
      log.summary(s.run({}, {weight_histograms}).value()[0], global_step);
    if (r.chief) // named by the shared global_step, which counts every worker's steps
      last_checkpoint = sv.save(s, o.ckpt_dir + "/model", shared_step(s, m.step)).value();
    std::fprintf(stderr,
                 "epoch %d: train loss %.4f, train accuracy %.4f, test accuracy %.4f -> %s "
                 "(training %s at %.0f ex/s, evaluation %s)\n",
                 epoch + 1, last_loss, sums.n ? sums.acc / double(sums.n) : 0.0, test_accuracy,
                 last_checkpoint.c_str(), format_seconds(progress.epoch_seconds()).c_str(),
                 progress.epoch_rate(), format_seconds(eval_seconds).c_str());
    if (sums.window == 0 && !curve.empty() && curve.back().step == global_step)
      curve.back().test_accuracy = test_accuracy;
    else if (sums.window > 0)
      add_curve_point(epoch, sums, test_accuracy);
  }
};

/// The chief's histograms of every trainable variable, once per epoch (--logdir).
output weight_histograms_of(model& m, const training_log& log, const role& r) {
  if (!log.enabled() || !r.chief)
    return {};
  std::vector<output> hists;
  for (int id : m.g.collection("trainable_variables"))
    hists.push_back(histogram_summary(m.g.at(id).name, output(&m.g, {id, 0})));
  return merge_summary(hists, "weight_histograms");
}

/// What training ends with: the sync stop, the trace, the curves, the summary lines; the exit
/// status --min-accuracy asks for.
int finish(const flags& f, trainer& t, double untrained_loss) {
  session& s = t.s;
  model& m = t.m;
  if (m.sync && t.r.chief) { // the other workers' next step ends with "training ended"
    auto counts = s.run({}, {m.sync->ops().dropped, m.sync->ops().refused}).value();
    std::printf("sync: %lld stale gradients dropped, %lld second gradients of a replica for one "
                "step refused\n",
                static_cast<long long>(*counts[0].data<int64_t>()),
                static_cast<long long>(*counts[1].data<int64_t>()));
    throw_if_error(s.run({m.sync->ops().stop}));
  }
  if (t.curve.empty())
    std::tie(t.test_loss, t.test_accuracy) = evaluate(s, m, t.d.test);
  if (f.has("trace"))
    write_trace(s, m, t.d.test, f.get("trace", ""));
  if (f.has("csv"))
    throw_if_error(write_curve_csv(f.get("csv", ""), t.curve));
  if (f.has("plot"))
    throw_if_error(write_curve_svg(f.get("plot", ""), "Fashion-MNIST " + t.o.kind, t.curve));
  t.log.close();
  if (!t.last_checkpoint.empty())
    std::printf("checkpoint: %s\n", t.last_checkpoint.c_str());
  if (t.timed_steps > 0) // what bench/sync_backup_bench.sh reads
    std::printf(
        "step time: %.3f ms (mean of %lld steps after the first)\n",
        std::chrono::duration<double, std::milli>(t.last_step_done - t.first_step_done).count() /
            double(t.timed_steps),
        static_cast<long long>(t.timed_steps));
  std::printf("test accuracy: %.4f\n", t.test_accuracy);
  if (t.o.min_accuracy < 0)
    return 0;
  if (t.test_accuracy < t.o.min_accuracy) {
    std::fprintf(stderr, "FAILED: test accuracy %.4f < %.4f\n", t.test_accuracy, t.o.min_accuracy);
    return 3;
  }
  if (!(t.test_loss < untrained_loss)) {
    std::fprintf(stderr, "FAILED: the test loss %.4f is not below the untrained model's %.4f\n",
                 t.test_loss, untrained_loss);
    return 3;
  }
  return 0;
}

int run(const flags& f) {
  options o = parse_options(f);
  // Distributed: start this task's node first; a ps only serves.
  role r = join_cluster(f, o);
  if (r.served_parameters)
    return 0;
  datasets d = load_data(f, o, r);
  int64_t train_size = d.train.labels.dim(0);
  std::fprintf(stderr,
               "%lld training%s and %lld test images; model %s (%s math), %s lr %g, batch %lld\n",
               static_cast<long long>(train_size), r.workers > 1 ? " (this worker's share)" : "",
               static_cast<long long>(d.test.size()), o.kind.c_str(), o.precision.c_str(),
               o.opt_name.c_str(), o.lr, static_cast<long long>(o.batch));
  std::optional<sync_replicas_options> sync_options;
  if (o.sync)
    sync_options = sync_options_of(f, r);
  std::string worker_device = "/job:worker/task:" + std::to_string(r.task);
  auto m = build(
      {.kind = o.kind,
       .opt_name = o.opt_name,
       .lr = o.lr,
       .seed = o.seed,
       .device_fn = f.has("cluster") ? replica_device_setter(r.ps_tasks, worker_device) : nullptr,
       .sync = sync_options,
       .wire_bf16 = f.has("wire-bf16"),
       .compute = o.compute});
  saver sv(m->g, {}, {.max_to_keep = 3});
  auto init = global_variables_initializer(m->g);
  // TensorBoard: the graph, training and test curves, and (from the chief) the weights'
  // histograms once per epoch through summary ops.
  training_log log(f.get("logdir", ""), f.has("cluster") ? "worker-" + std::to_string(r.task) : "");
  output weight_histograms = weight_histograms_of(*m, log, r);
  log.graph(m->g);
  if (r.node && (f.has("device") || f.has("simulated-gpus")))
    throw error(invalid_argument("--device and --simulated-gpus are for a local run; a cluster's "
                                 "tasks place by their own devices"));
  std::unique_ptr<runtime> local_rt = r.node ? nullptr : local_training_runtime(f);
  runtime& rt = r.node ? r.node->rt() : *local_rt;
  // Distributed, the session runs through this worker's own node: its master places the graph
  // over the cluster.
  session_options so;
  so.auth_token = o.auth_token;
  // A client that runs no node is its own master: a step is one runGraph per task instead of a
  // call to the daemon's master and its calls to the tasks (docs/cluster.md, "How a step runs").
  so.client_master = o.connect && !f.has("daemon-master");
  auto s = f.has("cluster")
               ? std::make_unique<session>(rt, m->g, "runnel://" + r.worker_address, so)
               : std::make_unique<session>(rt, m->g);
  int64_t steps_per_epoch = (train_size + o.batch - 1) / o.batch;
  if (o.sync) // counted in shared steps, the same on every worker: the smallest share's batches
    steps_per_epoch = std::max<int64_t>(1, (d.total_examples / r.workers + o.batch - 1) / o.batch);
  int64_t global_step = start_model(*s, *m, init, sv, o, r);
  // What --min-accuracy compares the final test loss with: the untrained model's test loss,
  // measured where this process initializes the model. A worker that joins a model the chief
  // initialized (and may have trained), or a resumed run, uses the loss of predicting all ten
  // classes uniformly, ln 10, which is where these models start (softmax: exactly).
  double untrained_loss = std::log(10.0);
  if (r.chief && !o.resume && o.min_accuracy >= 0)
    untrained_loss = evaluate(*s, *m, d.test).first;
  int64_t total_steps = int64_t(o.epochs) * steps_per_epoch;
  if (o.max_steps > 0)
    total_steps = std::min(total_steps, o.max_steps);
  trainer t{.s = *s,
            .m = *m,
            .rt = rt,
            .o = o,
            .r = r,
            .d = d,
            .log = log,
            .sv = sv,
            .weight_histograms = weight_histograms,
            .steps_per_epoch = steps_per_epoch,
            .total_steps = total_steps,
            .global_step = global_step};
  t.run();
  return finish(f, t, untrained_loss);
}

} // namespace

int main(int argc, char** argv) {
  return app_main("fashion_mnist", argc, argv, usage,
                  {"cluster",
                   "job",
                   "task",
                   "sync",
                   "replicas-to-aggregate",
                   "sync-timeout",
                   "step-delay-ms",
                   "wire-bf16",
                   "precision",
                   "device",
                   "simulated-gpus",
                   "connect",
                   "daemon-master",
                   "auth-token-file",
                   "model",
                   "epochs",
                   "batch",
                   "optimizer",
                   "lr",
                   "data",
                   "input",
                   "records-dir",
                   "checkpoint-dir",
                   "trace",
                   "resume",
                   "csv",
                   "plot",
                   "logdir",
                   "limit-train",
                   "max-steps",
                   "min-accuracy",
                   "seed"},
                  run);
}
