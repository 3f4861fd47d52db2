#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <unistd.h>
#include <unordered_set>

#include <caf/policy/work_stealing.hpp>
#include <caf/scheduler/coordinator.hpp>
#include <caf/thread_hook.hpp>

#include "runnel/actors/exec/internal.hpp"
#include "runnel/ops/core/float_env.hpp"
#include "runnel/ops/core/spin_wait.hpp"
#include "runnel/ops/cpu/builtin_kernels.hpp"
#include "runnel/ops/cpu/cpu_device.hpp"
#include "runnel/ops/gpu/accelerator.hpp"
#include "runnel/ops/gpu/simulated_gpu.hpp"
#include "runnel/storage/example_parse.hpp"
#include "runnel/storage/tf/events.hpp"

namespace runnel {

thread_local caf::execution_unit* worker_unit = nullptr;

namespace {

/// How long an idle worker polls before it sleeps (see configure_scheduler).
constexpr auto poll_budget = std::chrono::microseconds(50);
/// After this much of its polling, an idle worker also yields its core at every look at the
/// clock (polling_first_stealing::dequeue).
constexpr auto yield_after = std::chrono::microseconds(5);

/// CAF's work stealing hands work arriving from outside its workers (a session's feed, a step's
/// start, a tensor from the network) to the workers in turn, waking the one whose turn it is
/// even while another is idle and polling for work: on our VMs that wake-up costs the sender a
/// futex call and the job tens of µs. This policy gives the job to a worker that is polling (in
/// dequeue and not asleep) when there is one, from the turn's on; else it keeps CAF's turn —
/// never a worker that is running a job, where it would wait behind a long kernel.
struct polling_first_stealing : caf::policy::work_stealing {
  using base = caf::policy::work_stealing;
  struct worker_data : base::worker_data {
    explicit worker_data(caf::scheduler::abstract_coordinator* p) : base::worker_data(p) {}
    worker_data(const worker_data& other) : base::worker_data(other) {}
    std::atomic<bool> polling{false};
  };

  /// Work from another worker's queue, looked at without its locks first. Stealing locks both
  /// ends of the victim's queue, and idle workers polling did so every few polls, empty or not:
  /// a caller appending work to that queue then waited on the lock, whose wait is a
  /// sched_yield (15% of a Python run loop's samples, the caller's thread yielding).
  template <class Worker> caf::resumable* steal(Worker* self) {
    auto* p = self->parent();
    size_t n = p->num_workers();
    for (size_t k = 1; k < n; ++k) {
      auto& victim = d(p->worker_by_id((self->id() + k) % n)).queue;
      if (!victim.empty())
        if (caf::resumable* job = victim.take_tail())
          return job;
    }
    return nullptr;
  }

  /// Polls its own queue, and every few polls the others', for `poll_budget`, then sleeps on
  /// the condition variable that external_enqueue signals, looking for work to steal each time
  /// the relaxed interval passes (CAF's scheme). The looks come before the locks, and the
  /// polling is timed rather than counted: without the locks a poll is several times cheaper,
  /// and 1,100 polls (CAF's aggressive and moderate phases) no longer spanned a short step's
  /// gap — counted, they slept sooner, and an actor round trip from outside took 12-19 µs.
  /// Past its first `yield_after`, a polling worker yields its core each time it looks at the
  /// clock: where every core is taken (a ps and a worker sharing two cores, one of them busy)
  /// the thread that has the work runs at once instead of after the poller's slice, and where
  /// a core is free the yield returns at once. Alternating runs (2026-12-04, three rounds):
  /// `remote_step_busy` 2.3-3.0x the raw round trip against 4.2-5.5x without the yields,
  /// `ps_training` 0.82-0.89x the local session against 0.80-0.83x and its CPU per step
  /// 1.26-1.32x against 1.31-1.43x; idle remote steps, `run_overhead`, `node_overhead` and
  /// `local_sendrecv` level. Hand-offs within a process come sooner than `yield_after` and
  /// pay no system call.
  template <class Worker> caf::resumable* dequeue(Worker* self) {
    worker_unit = self;
    auto& me = d(self);
    auto& phases = me.strategies;
    me.polling.store(true, std::memory_order_relaxed);
    caf::resumable* job = spin_for(
        [&](size_t i) {
          caf::resumable* got = me.queue.empty() ? nullptr : me.queue.take_head();
          return got || i % 8 != 0 ? got : steal(self);
        },
        poll_budget, yield_after);
    me.polling.store(false, std::memory_order_relaxed);
    if (job)
      return job;
    auto& wait = me.waitdata;
    for (size_t i = 1;; ++i) {
      bool woken;
      {
        std::unique_lock<std::mutex> guard(wait.lock);
        wait.sleeping = true;
        woken =
            wait.cv.wait_for(guard, phases[2].sleep_duration, [&] { return !me.queue.empty(); });
        wait.sleeping = false;
      }
      job = woken                               ? me.queue.take_head()
            : i % phases[2].steal_interval == 0 ? steal(self)
                                                : nullptr;
      if (job)
        return job;
    }
  }

  template <class Coordinator> void central_enqueue(Coordinator* self, caf::resumable* job) {
    size_t n = self->num_workers();
    size_t start = d(self).next_worker++;
    for (size_t k = 0; k < n; ++k) {
      auto* w = self->worker_by_id((start + k) % n);
      if (!d(w).polling.load(std::memory_order_relaxed))
        continue;
      auto& wait = d(w).waitdata;
      std::unique_lock<std::mutex> guard(wait.lock, std::try_to_lock);
      if (guard.owns_lock() && !wait.sleeping) {
        guard.unlock();
        w->external_enqueue(job);
        return;
      }
    }
    self->worker_by_id(start % n)->external_enqueue(job);
  }
};

/// The scheduler's threads run kernels inline (actors/exec/node_actor.cpp): they flush
/// denormals from the start, so that a kernel's scoped_flush_denormals has nothing to do there.
struct flush_denormals_hook : caf::thread_hook {
  void init(caf::actor_system&) override {}
  void thread_started() override { flush_denormals_on_this_thread(); }
  void thread_terminates() override {}
};

} // namespace

void configure_scheduler(caf::actor_system_config& cfg, int threads) {
  cfg.add_thread_hook<flush_denormals_hook>();
  cfg.set("scheduler.policy", caf::atom("stealing"));
  cfg.module_factories.push_back([](caf::actor_system& sys) -> caf::actor_system::module* {
    return new caf::scheduler::coordinator<polling_first_stealing>(sys);
  });
  cfg.set("scheduler.max-threads", size_t(threads));
  cfg.set("scheduler.max-throughput", size_t(100));
  // Idle workers poll without sleeping for `poll_budget` (a sleep_for of even 1 µs costs
  // ~100 µs on our VMs, and every session::run would pay it), then block on a condition
  // variable that work arriving from outside the scheduler (a session's feed) signals
  // (polling_first_stealing::dequeue). CAF counted polls instead: 1,100 of them, which its
  // locks made last tens of µs. 5,000 were measured too: a Python run loop then stayed fast,
  // but remote steps with one core kept busy took 1.3-2x longer (two processes' workers
  // spinning on the one free core). The timed 50 µs measured level with the counted polls on
  // remote steps, busy and idle, in alternating runs (20 µs and 100 µs were worse busy). Past
  // its first 5 µs the polling yields the core as well (dequeue): that, not a shorter budget,
  // is what brought busy remote steps down (5 µs without yields measured 3.7-4.4x).
  cfg.set("work-stealing.relaxed-sleep-duration", caf::timespan(std::chrono::milliseconds(10)));
}

executor_providers& providers() {
  static executor_providers p;
  return p;
}

status missing_provider(const char* what, const char* file) {
  return failed_precondition(std::string(what) + " are provided by " + file +
                             ", which this program did not link (link runnel_actors as "
                             "actors/CMakeLists.txt says)");
}

bool is_metadata_op(const std::string& op) {
  static const std::unordered_set<std::string> ops = {
      "Const",      "Identity", "NoOp",        "Placeholder", "PlaceholderWithDefault",
      "Shape",      "ShapeN",   "Size",        "Rank",        "Reshape",
      "ExpandDims", "Squeeze",  "StopGradient", "VariableV2", "_Recv", "_Send"};
  return ops.count(op) > 0;
}

const kernel_registry& runtime_kernels() {
  static const kernel_registry* reg = [] {
    auto* r = new kernel_registry;
    register_builtin_kernels(*r);
    register_parsing_kernels(*r);
    register_summary_kernels(*r);
    register_sendrecv_kernels(*r);
    register_gpu_kernels(*r);
    return r;
  }();
  return *reg;
}

runtime::runtime(runtime_options options) : impl_(std::make_unique<impl>()) {
  auto& d = *impl_;
  d.options = std::move(options);
  int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  int threads = d.options.scheduler_threads > 0 ? d.options.scheduler_threads : cores;
  d.config = std::make_unique<caf::actor_system_config>();
  configure_scheduler(*d.config, threads);
  d.system = std::make_unique<caf::actor_system>(*d.config);

  static std::once_flag blas_warning;
  std::call_once(blas_warning, [] {
    if (auto better = blas_core_suggestion(); !better.empty())
      std::fprintf(stderr,
                   "runnel: OpenBLAS chose its generic %s kernels on a CPU that supports %s "
                   "(CPUID hides the model); run with OPENBLAS_CORETYPE=%s for matrix products "
                   "2-5x faster\n",
                   blas_core().c_str(), better.c_str(), better.c_str());
  });
  // GPUs: found once per process, reported once; a device actor per visible GPU.
  const auto& found = discover_gpus();
  std::string visible_error;
  d.gpus = visible_gpus(found, d.options.visible_gpus ? &*d.options.visible_gpus : nullptr,
                        &visible_error);
  if (!visible_error.empty())
    throw error(invalid_argument("runtime_options: " + visible_error));
  std::vector<std::unique_ptr<accelerator>> accelerators;
  std::string gpu_failures;
  // One GPU: its nodes complete when enqueued (the stream orders them; the session waits for
  // the GPU at the end of each step). Several: when run, as a consumer on another GPU's stream
  // must not read a value early. RUNNEL_GPU_SYNC_EACH_OP=1 waits for each node's kernel, so a
  // kernel that fails while running is named (docs/gpu.md).
  const char* sync_each = std::getenv("RUNNEL_GPU_SYNC_EACH_OP");
  bool stream_ordered = d.gpus.size() == 1 && !(sync_each && std::string(sync_each) == "1");
  for (auto& g : d.gpus) {
    auto acc = make_gpu_accelerator(int(accelerators.size()), g.id, d.options.gpu_memory_limit,
                                    stream_ordered);
    if (acc.ok())
      accelerators.push_back(std::move(acc).value());
    else
      gpu_failures += (gpu_failures.empty() ? "" : "; ") + acc.error().to_string();
  }
  for (int i = 0; i < d.options.simulated_gpus; ++i)
    accelerators.push_back(make_simulated_gpu(
        int(accelerators.size()),
        d.options.gpu_memory_limit ? d.options.gpu_memory_limit : size_t(1) << 30));
  if (accelerators.empty())
    d.no_gpu_reason = "this runtime has no GPU (" +
                      (!gpu_failures.empty() ? gpu_failures
                       : found.gpus.empty()  ? found.why_none
                                             : std::string("visible_gpus is empty")) +
                      ")";
  // What was found is said only when asked (RUNNEL_VERBOSE=1, --verbose in the tools): a
  // graph that asks for a missing GPU is told why by its session (placement errors name the
  // reason; soft placement says it once).
  static std::once_flag gpu_report;
  if (verbose_logging() || !gpu_failures.empty()) // a GPU that is there but unusable: always
    std::call_once(gpu_report, [&] {
    if (found.gpus.empty())
      std::fprintf(stderr,
                   "runnel: no GPU found (%s); work asking for /device:GPU:* runs on the CPU "
                   "with soft placement\n",
                   found.why_none.c_str());
    else
      std::fprintf(stderr, "runnel: %zu GPU(s): %s%s%s\n", found.gpus.size(),
                   found.gpus[0].name.c_str(), gpu_failures.empty() ? "" : "; unusable: ",
                   gpu_failures.c_str());
  });
  int n = std::max(1, d.options.cpu_devices);
  int budget = d.options.device_threads;
  if (budget == 0)
    budget = n > 1 ? std::max(1, cores / n) : 0;
  // One thread pool per device: kernels parallelise through it (BLAS over blocks of rows, oneDNN
  // over blocks of the batch, one thread each), so OpenBLAS must not add threads of its own: on
  // our 2-core machines its spinning threads fought the pool and the actors for the cores
  // (docs/performance.md, "One thread pool"). Process-wide.
  set_blas_threads(1);
  d.routes = std::make_unique<process_rendezvous>(
      d.rendezvous,
      "/job:" + d.options.job + "/replica:0/task:" + std::to_string(d.options.task) + "/");
  d.devices.resize(size_t(n) + accelerators.size()); // the device actors keep their addresses
  for (int i = 0; i < n; ++i) {
    auto& dev = d.devices[size_t(i)];
    dev.name = "/job:" + d.options.job + "/replica:0/task:" + std::to_string(d.options.task) +
               "/device:cpu:" + std::to_string(i);
    dev.type = device_type::cpu;
    // The thread running a kernel joins its parallel loops, so the pool needs one thread fewer
    // than the cores it may use.
    int intra = d.options.intra_op_threads > 0 ? d.options.intra_op_threads
                : budget > 0                     ? budget - 1
                                                 : std::max(1, cores / n - 1);
    dev.cpu = std::make_unique<cpu_device>(intra);
    if (budget > 0)
      dev.executor = std::make_unique<device_executor>(dev.name, budget);
    dev.resources = std::make_unique<device_resources>(
        *d.system, i == 0 ? nullptr : d.devices.front().resources.get(), d.routes.get());
    dev.actor = spawn_device_actor(*d.system, dev);
  }
  for (size_t g = 0; g < accelerators.size(); ++g) {
    auto& dev = d.devices[size_t(n) + g];
    dev.name = "/job:" + d.options.job + "/replica:0/task:" + std::to_string(d.options.task) +
               "/device:gpu:" + std::to_string(g);
    dev.type = device_type::gpu;
    dev.gpu = std::move(accelerators[g]);
    // Variables placed on the GPU live in its memory; iterators are the runtime's (the CPU's).
    dev.resources = std::make_unique<device_resources>(*d.system, d.devices.front().resources.get(),
                                                       d.routes.get(), dev.gpu.get());
    dev.actor = spawn_device_actor(*d.system, dev);
  }
}

runtime::~runtime() {
  // Sessions still open (a caller destroyed the runtime first) are closed now; their later
  // destruction finds them closed and touches nothing.
  // Another thread may be destroying a session meanwhile (a cluster worker deregistering a
  // partition): the session is pinned while it is closed here (~session waits for that), and
  // the loop waits until whoever closes it has taken it off the list.
  auto& reg = *impl_->sessions;
  for (;;) {
    session* s = nullptr;
    {
      std::lock_guard lock(reg.mu);
      if (reg.open.empty())
        break;
      s = reg.open.back();
      reg.closing = s;
    }
    s->close(); // returns at once when another thread is already closing it
    std::unique_lock lock(reg.mu);
    reg.closing = nullptr;
    reg.cv.notify_all();
    reg.cv.wait(lock, [&] {
      return std::find(reg.open.begin(), reg.open.end(), s) == reg.open.end();
    });
  }
  // GPU work still queued (kernels of aborted steps) runs and completes while its actors live.
  for (auto& dev : impl_->devices)
    if (dev.gpu)
      dev.gpu->wait_idle();
  {
    caf::scoped_actor self(*impl_->system);
    for (auto& dev : impl_->devices) {
      // Drop the device's resources (variables stop their actors), then stop the device.
      self->send(dev.actor, clear_atom::value);
      self->send_exit(dev.actor, caf::exit_reason::user_shutdown);
    }
  }
  for (auto& dev : impl_->devices)
    dev.actor = nullptr;
  impl_->system.reset(); // waits for every actor to finish
  for (auto& dev : impl_->devices)
    dev.executor.reset(); // runs what is left (kernels of aborted steps), joins
}

const std::vector<gpu_properties>& runtime::gpus() const {
  return impl_->gpus;
}

const std::string& runtime::no_gpu_reason() const {
  return impl_->no_gpu_reason;
}

result<transfer_stats> runtime::gpu_transfers(int id) const {
  for (auto& dev : impl_->devices)
    if (dev.gpu && dev.gpu->id() == id)
      return dev.gpu->transfers();
  return not_found("this runtime has no GPU " + std::to_string(id));
}

status runtime::reset_gpu_memory_peak(int id) {
  for (auto& dev : impl_->devices)
    if (dev.gpu && dev.gpu->id() == id) {
      dev.gpu->reset_memory_peak();
      return {};
    }
  return not_found("this runtime has no /device:GPU:" + std::to_string(id));
}

result<bfc_stats> runtime::gpu_memory(int id) const {
  for (auto& dev : impl_->devices)
    if (dev.gpu && dev.gpu->id() == id)
      return dev.gpu->memory_stats();
  return not_found("this runtime has no /device:GPU:" + std::to_string(id));
}

std::vector<std::string> runtime::devices() const {
  std::vector<std::string> out;
  for (auto& d : impl_->devices)
    out.push_back(d.name);
  return out;
}

namespace {

using calibration_clock = std::chrono::steady_clock;

double seconds_between(calibration_clock::time_point a, calibration_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// The median time of an n x n x n float product (through the library the MatMul kernels use,
/// sgemm_library) on each of `callers` threads at once: a step keeps its devices' threads busy.
/// One thread's best of five on an otherwise idle machine (as before 2026-12-04 #6) read 3-7%
/// faster, and the placer's simulated steps came out 0.84-0.90x the measured ones
/// (placement_bench, `_model` lines; docs/placement.md).
double loaded_sgemm_seconds(int n, int callers) {
  std::vector<float> a(size_t(n * n), 0.5f), b(size_t(n * n), 0.25f);
  std::mutex mu;
  std::vector<double> times;
  std::atomic<int> arrived{0};
  auto run = [&] {
    std::vector<float> c(size_t(n * n));
    arrived.fetch_add(1);
    while (arrived.load() < callers) // all start together
      std::this_thread::yield();
    std::vector<double> mine;
    for (int rep = 0; rep < 6; ++rep) {
      auto t0 = calibration_clock::now();
      parallel_sgemm(nullptr, false, false, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(),
                     n);
      if (rep > 0) // the first warms the caches and the library up
        mine.push_back(seconds_between(t0, calibration_clock::now()));
    }
    std::lock_guard lock(mu);
    times.insert(times.end(), mine.begin(), mine.end());
  };
  std::vector<std::thread> others;
  for (int k = 1; k < callers; ++k)
    others.emplace_back(run);
  run();
  for (auto& t : others)
    t.join();
  std::nth_element(times.begin(), times.begin() + long(times.size() / 2), times.end());
  return times[times.size() / 2];
}

/// Measures one thread's matrix-product rate (with `busy` threads running products: the
/// runtime's compute threads) and the memory copy bandwidth.
device_params measure_cpu_params(int threads, int busy) {
  using clock = calibration_clock;
  auto seconds = seconds_between;
  device_params p;
  constexpr int n = 256;
  // Products run one thread per call under a runtime: scale that rate by the device's threads.
  // A library with threads of its own runs one product at a time.
  double rate =
      2.0 * n * n * n /
      std::max(loaded_sgemm_seconds(n, blas_threads() == 1 ? std::max(1, busy) : 1), 1e-9);
  p.flops_per_s = blas_threads() == 1 ? rate * std::max(1, threads) : rate;
  std::vector<char> src(size_t(16) << 20, 1), dst(src.size());
  double best = 1e9;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = clock::now();
    std::memcpy(dst.data(), src.data(), src.size());
    best = std::min(best, seconds(t0, clock::now()));
  }
  p.bytes_per_s = 2.0 * double(src.size()) / std::max(best, 1e-9); // read + write
  // Activations of a few MB stay in the last-level cache, which copies them 2-3x faster.
  constexpr size_t cached = size_t(1) << 20;
  best = 1e9;
  for (int rep = 0; rep < 8; ++rep) {
    auto t0 = clock::now();
    std::memcpy(dst.data(), src.data(), cached);
    best = std::min(best, seconds(t0, clock::now()));
  }
  p.cache_bytes_per_s = std::max(p.bytes_per_s, 2.0 * double(cached) / std::max(best, 1e-9));
  long l3 = ::sysconf(_SC_LEVEL3_CACHE_SIZE);                  // 0 or -1 where the VM does not say
  p.cache_bytes = l3 > 0 ? int64_t(l3) / 2 : int64_t(8) << 20; // the rest holds other tensors
  p.transcendental_per_s = measure_transcendental_rate() * std::max(1, threads);
  return p;
}

} // namespace

const device_params& resolve_cpu_params(runtime::impl& d) {
  std::call_once(d.cpu_params_once, [&d] {
    if (d.options.cpu_params) {
      d.cpu_params = *d.options.cpu_params;
      return;
    }
    int cores = int(std::max(1u, std::thread::hardware_concurrency()));
    auto& dev = d.devices.front();
    int threads = dev.executor ? dev.executor->num_threads() : cores;
    // The threads that run kernels at once: the CPU devices' own, or the scheduler's (every
    // core) where they have none.
    int busy = 0;
    for (auto& other : d.devices)
      if (other.type == device_type::cpu)
        busy += other.executor ? other.executor->num_threads() : cores;
    d.cpu_params = measure_cpu_params(threads, std::min(busy, cores));
  });
  return d.cpu_params;
}

const gpu_throughput& resolve_gpu_throughput(local_device& dev) {
  std::call_once(*dev.gpu_measured, [&dev] { dev.gpu_speed = dev.gpu->measure(); });
  return dev.gpu_speed;
}

const device_params& runtime::cpu_params() const {
  return resolve_cpu_params(*impl_);
}

int runtime::device_threads() const {
  auto& dev = impl_->devices.front();
  return dev.executor ? dev.executor->num_threads() : 0;
}

const runtime_options& runtime::options() const {
  return impl_->options;
}

} // namespace runnel
