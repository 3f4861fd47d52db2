// What each stage of an opened dataset does: every stage's stream is wrapped in a measured
// stream that counts the elements it hands on and the time of its own work, and the counters of
// one opened dataset gather in a registry that element_stream::stats() reads.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>

#include "runnel/actors/data/stages.hpp"

namespace runnel {

struct stage_counters {
  std::string name;
  int depth = 0; ///< stages between this one and the source
  std::atomic<int64_t> elements{0}, calls{0}, self_ns{0};
  std::atomic<int64_t> fill_ppm_sum{0}, fill_samples{0}; // buffering stages
  std::atomic<int64_t> autotuned{-1};
};

struct stage_registry {
  mutable std::mutex mu;
  /// In the order the stages were first opened; the nodes only identify a stage opened again.
  std::vector<std::pair<const dataset_node*, std::shared_ptr<stage_counters>>> stages;

  /// A stage opened again (repeat opens its input each epoch) goes on counting where it was.
  std::shared_ptr<stage_counters> counters_for(const dataset_node* node, std::string name) {
    std::lock_guard lock(mu);
    for (auto& [n, c] : stages)
      if (n == node)
        return c;
    auto c = std::make_shared<stage_counters>();
    c->name = std::move(name);
    // Stages are listed source first: by how far each is from the source (repeat opens its
    // input later than the stages after it are opened). Nodes may be gone when stats are read.
    for (auto* u = dynamic_cast<const unary_node*>(node); u;
         u = dynamic_cast<const unary_node*>(u->input()))
      ++c->depth;
    stages.emplace_back(node, c);
    return c;
  }
  std::vector<stage_stats> snapshot() const {
    std::lock_guard lock(mu);
    auto ordered = stages;
    std::stable_sort(ordered.begin(), ordered.end(),
                     [](auto& a, auto& b) { return a.second->depth < b.second->depth; });
    std::vector<stage_stats> out;
    for (auto& [node, c] : ordered) {
      stage_stats s;
      s.stage = c->name;
      s.elements = c->elements.load();
      s.calls = c->calls.load();
      s.seconds = double(c->self_ns.load()) * 1e-9;
      int64_t samples = c->fill_samples.load();
      if (samples > 0)
        s.buffer_fill = double(c->fill_ppm_sum.load()) * 1e-6 / double(samples);
      s.autotuned = c->autotuned.load();
      out.push_back(std::move(s));
    }
    return out;
  }
};

namespace {

/// The stage being pulled on this thread: a stage's own time leaves out the stages it pulls
/// from on the same thread.
struct pull_frame {
  int64_t nested_ns = 0;
};
thread_local pull_frame* current_pull = nullptr;

class measured_stream : public element_stream {
public:
  measured_stream(stream_ptr in, std::shared_ptr<stage_counters> counters,
                  std::shared_ptr<stage_registry> registry)
      : in_(std::move(in)), counters_(std::move(counters)), registry_(std::move(registry)) {}
  status next_chunk(std::vector<element>& out, size_t max) override {
    return *measured(out, [&] { return std::optional<status>(in_->next_chunk(out, max)); });
  }
  std::optional<status> try_next_chunk(std::vector<element>& out, size_t max) override {
    return measured(out, [&] { return in_->try_next_chunk(out, max); });
  }
  std::vector<stage_stats> stats() const override { return registry_->snapshot(); }
  std::pair<int64_t, int64_t> buffer_fill() const override { return in_->buffer_fill(); }
  int64_t autotuned() const override { return in_->autotuned(); }

private:
  /// Runs `pull` (which appends to `out`) and counts it, unless it had nothing ready.
  template <class Pull> std::optional<status> measured(std::vector<element>& out, Pull pull) {
    pull_frame frame;
    pull_frame* outer = current_pull;
    current_pull = &frame;
    size_t before = out.size();
    auto t0 = std::chrono::steady_clock::now();
    std::optional<status> st = pull();
    int64_t ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    current_pull = outer;
    if (outer)
      outer->nested_ns += ns;
    if (!st)
      return st;
    auto& c = *counters_;
    c.autotuned.store(in_->autotuned(), std::memory_order_relaxed);
    c.self_ns.fetch_add(ns - frame.nested_ns, std::memory_order_relaxed);
    c.calls.fetch_add(1, std::memory_order_relaxed);
    int64_t taken = int64_t(out.size() - before);
    c.elements.fetch_add(taken, std::memory_order_relaxed);
    // The fill a consumer found: what the buffer held before this call took from it.
    auto [held, room] = in_->buffer_fill();
    if (room > 0) {
      c.fill_ppm_sum.fetch_add(std::min(room, held + taken) * 1'000'000 / room,
                               std::memory_order_relaxed);
      c.fill_samples.fetch_add(1, std::memory_order_relaxed);
    }
    return st;
  }

  stream_ptr in_;
  std::shared_ptr<stage_counters> counters_;
  std::shared_ptr<stage_registry> registry_;
};

} // namespace

result<stream_ptr> dataset_node::open(open_context& ctx) const {
  if (!ctx.stages)
    ctx.stages = std::make_shared<stage_registry>();
  auto registry = ctx.stages;
  RUNNEL_ASSIGN_OR_RETURN(auto stream, open_stream(ctx));
  auto counters = registry->counters_for(this, describe());
  return stream_ptr(
      std::make_unique<measured_stream>(std::move(stream), std::move(counters), registry));
}

std::vector<stage_stats> snapshot_stages(const stage_registry& r) {
  return r.snapshot();
}

std::string format_stage_stats(const std::vector<stage_stats>& stages) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "  %10s %9s %12s %11s %5s  %s\n", "elements", "own time",
                "own rate/s", "latency", "fill", "stage");
  out += line;
  for (auto& s : stages) {
    char fill[16] = "-";
    if (s.buffer_fill >= 0)
      std::snprintf(fill, sizeof fill, "%.0f%%", 100 * s.buffer_fill);
    std::snprintf(line, sizeof line, "  %10lld %8.3fs %12.4g %9.1fus %5s  ",
                  static_cast<long long>(s.elements), s.seconds, s.rate(), s.latency() * 1e6, fill);
    out += line + s.stage;
    if (s.autotuned >= 0)
      out += " [autotune chose " + std::to_string(s.autotuned) + "]";
    out += "\n";
  }
  return out;
}

} // namespace runnel
