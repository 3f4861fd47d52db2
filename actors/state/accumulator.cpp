// Gradient accumulators (ops/kernel/accumulator.hpp). The sum and the waiting takes are guarded by the
// accumulator's lock: an apply runs in the caller's thread, a take either completes at once or
// waits as a request that a later apply completes, so a waiting take holds no thread.
// Completions run after the lock is released. An actor per accumulator owns the take deadlines.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <numeric>
#include <optional>
#include <set>
#include <unordered_map>

#include "runnel/actors/exec/internal.hpp"
#include "runnel/ops/kernel/accumulator.hpp"

namespace runnel {

using acc_expire_atom = caf::atom_constant<caf::atom("accexpire")>;
using accumulator_timer = caf::typed_actor<caf::reacts_to<acc_expire_atom, int64_t>>;

namespace {

struct take_request {
  int64_t id = 0;
  int64_t num_required = 1;
  accumulator_resource::take_done_fn done;
  int64_t chief_epoch = 0; ///< the set_global_step calls before it: which chief's take it is
};

template <class T> void add_into(T* dst, const T* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] += src[i];
}
template <class T> void scale(T* p, int64_t n, double f) {
  for (int64_t i = 0; i < n; ++i)
    p[i] = T(double(p[i]) * f);
}

void add_elements(tensor& dst, const tensor& src) {
  if (dst.type() == dtype::f64)
    add_into(dst.data<double>(), src.data<double>(), dst.num_elements());
  else
    add_into(dst.data<float>(), src.data<float>(), dst.num_elements());
}
void scale_elements(tensor& t, double f) {
  if (t.type() == dtype::f64)
    scale(t.data<double>(), t.num_elements(), f);
  else
    scale(t.data<float>(), t.num_elements(), f);
}

class accumulator_state : public std::enable_shared_from_this<accumulator_state> {
public:
  accumulator_state(std::string name, accumulator_spec spec)
      : name_(std::move(name)), spec_(std::move(spec)) {}
  std::function<void(int64_t id, int64_t ms)> schedule_expiry;

  status apply(int64_t local_step, int64_t replica, std::vector<tensor> grad) {
    status result;
    locked([&] { result = apply_locked(local_step, replica, std::move(grad)); });
    return result;
  }
  void take(int64_t n, accumulator_resource::take_done_fn done) {
    locked([&] {
      if (closed_)
        return complete(done, cancelled(describe() + " is closed"), {});
      if (n < 1)
        return complete(done,
                        invalid_argument("take from " + describe() + " needs num_required >= 1, "
                                         "got " + std::to_string(n)),
                        {});
      take_request r{next_id_++, n, std::move(done), chief_epoch_};
      if (spec_.timeout_ms >= 0)
        schedule_expiry(r.id, spec_.timeout_ms);
      takes_.push_back(std::move(r));
      process();
    });
  }
  void put_back(std::vector<tensor> taken, int64_t count) {
    locked([&] {
      if (global_step_ > 0)
        --global_step_;
      // Undo the mean: the taken value becomes a sum of `count` gradients again.
      if (spec_.reduction == "MEAN" && count > 0) {
        size_t values = spec_.sparse ? 1 : 0;
        scale_elements(taken[values], double(count));
      }
      if (spec_.sparse)
        add_sparse(taken[0], taken[1]);
      else {
        if (count_ > 0)
          add_elements(taken[0], sum_);
        sum_ = std::move(taken[0]);
      }
      count_ += count;
      contributors_.insert(taken_from_.begin(), taken_from_.end());
      process();
    });
  }
  void set_global_step(int64_t step) {
    locked([&] {
      // Gradients computed at the new step or later stay (a worker may have sent its first
      // gradient before the chief's init ran); older ones go.
      if (count_ > 0 && oldest_in_sum_ < step)
        reset_sum();
      global_step_ = step;
      closed_ = false;
      ++chief_epoch_;
      // The gradients held since the last chief's step failed are judged against this step.
      auto held = std::move(held_);
      held_.clear();
      awaiting_chief_ = false;
      for (auto& h : held)
        if (status st = apply_locked(h.local_step, h.replica, std::move(h.grad)); !st.ok())
          std::fprintf(stderr, "runnel: %s: a gradient held for the new chief: %s\n",
                       describe().c_str(), st.to_string().c_str());
    });
  }
  void close() {
    locked([&] {
      closed_ = true;
      auto waiting = std::move(takes_);
      takes_.clear();
      for (auto& t : waiting)
        complete(t.done, cancelled(describe() + " was closed while a take waited"), {});
    });
  }
  void expire(int64_t id) {
    locked([&] {
      for (auto it = takes_.begin(); it != takes_.end(); ++it)
        if (it->id == id) {
          auto r = std::move(*it);
          takes_.erase(it);
          complete(r.done, unavailable(missing_message(r.num_required)), {});
          // The chief's step failed: its loop stops and a chief that starts again sets the step
          // anew, maybe an older one (restored from a checkpoint). Until then no gradient can be
          // judged stale: one computed at the restored step, read by a worker that starts
          // meanwhile, would be dropped and that worker would wait for a token forever.
          // (A take of a chief that died before a new one set the step changes nothing.)
          if (spec_.total_replicas > 0 && r.chief_epoch == chief_epoch_)
            awaiting_chief_ = true;
          return;
        }
    });
  }
  accumulator_resource::stats get_stats() {
    std::lock_guard lock(mu_);
    return {global_step_, count_, dropped_, applied_, refused_};
  }
  const std::string& name() const { return name_; }
  const accumulator_spec& spec() const { return spec_; }

private:
  template <class F> void locked(F&& body) { run_locked(mu_, ready_, std::forward<F>(body)); }
  void complete(accumulator_resource::take_done_fn& done, status st, std::vector<tensor> out) {
    ready_.push_back([d = std::move(done), st = std::move(st), o = std::move(out)]() mutable {
      d(std::move(st), std::move(o));
    });
  }
  std::string describe() const {
    return std::string(spec_.sparse ? "sparse accumulator '" : "accumulator '") + name_ + "'";
  }

  std::string missing_message(int64_t required) const {
    std::string msg = "sync step " + std::to_string(global_step_) + ": " + describe() + " got " +
                      std::to_string(count_) + " of the " + std::to_string(required) +
                      " gradients it needs within " + std::to_string(spec_.timeout_ms) + " ms";
    if (spec_.total_replicas > 0) {
      std::string missing;
      int64_t n = 0;
      for (int64_t r = 0; r < spec_.total_replicas; ++r)
        if (!contributors_.count(r)) {
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
          ++n;
        }
      msg += "; nothing from replica" + std::string(n == 1 ? " " : "s ") + missing + " (of " +
             std::to_string(spec_.total_replicas) + ")";
      if (required > spec_.total_replicas - n)
        msg += ": fewer than replicas_to_aggregate (" + std::to_string(required) +
               ") workers are alive. Restart the missing worker task" + (n == 1 ? "" : "s") +
               "; the step can go on once they send gradients";
    }
    return msg;
  }

  status check(const std::vector<tensor>& g) const {
    if (!spec_.sparse) {
      if (g.size() != 1)
        return internal_error("a dense gradient is one tensor");
      if (g[0].type() != spec_.type)
        return invalid_argument("gradient for " + describe() + " is " +
                                std::string(runnel::name(g[0].type())) + ", expected " +
                                std::string(runnel::name(spec_.type)));
      if (!spec_.value_shape.is_compatible_with(g[0].shape()))
        return invalid_argument("gradient for " + describe() + " has shape " +
                                g[0].shape().to_string() + ", expected " +
                                spec_.value_shape.to_string());
      if (count_ > 0 && sum_.shape() != g[0].shape())
        return invalid_argument("gradient for " + describe() + " has shape " +
                                g[0].shape().to_string() + " but the gradients accumulated so far "
                                "have shape " + sum_.shape().to_string());
      return {};
    }
    if (g.size() != 3)
      return internal_error("a sparse gradient is indices, values and a dense shape");
    const tensor &idx = g[0], &vals = g[1];
    if (idx.type() != dtype::i64 || idx.rank() != 1)
      return invalid_argument("indices for " + describe() + " must be an int64 vector, got " +
                              idx.to_string());
    if (vals.type() != spec_.type)
      return invalid_argument("values for " + describe() + " are " +
                              std::string(runnel::name(vals.type())) + ", expected " +
                              std::string(runnel::name(spec_.type)));
    if (vals.rank() < 1 || vals.dim(0) != idx.dim(0))
      return invalid_argument("values for " + describe() + " have shape " +
                              vals.shape().to_string() + " but there are " +
                              std::to_string(idx.dim(0)) + " indices");
    std::vector<int64_t> row(vals.shape().dims().begin() + 1, vals.shape().dims().end());
    if (row_shape_ && *row_shape_ != shape(row))
      return invalid_argument("rows for " + describe() + " have shape " + shape(row).to_string() +
                              ", the accumulated ones " + row_shape_->to_string());
    if (spec_.value_shape.has_known_rank() && spec_.value_shape.rank() >= 1) {
      int64_t rows = spec_.value_shape.dim(0);
      const int64_t* ix = idx.data<int64_t>();
      for (int64_t i = 0; i < idx.dim(0); ++i)
        if (ix[i] < 0 || (rows >= 0 && ix[i] >= rows))
          return invalid_argument("index " + std::to_string(ix[i]) + " (position " +
                                  std::to_string(i) + ") for " + describe() +
                                  " is outside [0, " + std::to_string(rows) + ")");
    }
    return {};
  }

  status apply_locked(int64_t local_step, int64_t replica, std::vector<tensor> g) {
    if (closed_)
      return out_of_range("training ended: " + describe() +
                          " is closed (the chief's session closed)");
    if (awaiting_chief_) {
      RUNNEL_RETURN_IF_ERROR(check(g));
      held_.push_back({local_step, replica, std::move(g)});
      return {};
    }
    if (local_step < global_step_) {
      ++dropped_;
      return {};
    }
    // One gradient per replica and step (sync_replicas.hpp): a second one (a frame resent after
    // a reconnect, a restarted worker sending again for the step it died in) is refused.
    if (replica >= 0 && contributors_.count(replica)) {
      ++refused_;
      return {};
    }
    RUNNEL_RETURN_IF_ERROR(check(g));
    if (spec_.sparse) {
      add_sparse(g[0], g[1]);
      dense_shape_ = g[2];
    } else if (count_ == 0) {
      sum_ = g[0].copy();
    } else {
      add_elements(sum_, g[0]);
    }
    oldest_in_sum_ = count_ == 0 ? local_step : std::min(oldest_in_sum_, local_step);
    ++count_;
    ++applied_;
    if (replica >= 0)
      contributors_.insert(replica);
    process();
    return {};
  }

  /// Adds rows (duplicates merged) into the sparse sum.
  void add_sparse(const tensor& idx, const tensor& vals) {
    int64_t n = idx.dim(0);
    int64_t width = n > 0 ? vals.num_elements() / n : 0;
    if (!row_shape_)
      row_shape_ = shape(std::vector<int64_t>(vals.shape().dims().begin() + 1,
                                              vals.shape().dims().end()));
    width = row_shape_->num_elements();
    size_t esize = size_of(spec_.type);
    const int64_t* ix = idx.data<int64_t>();
    const char* src = static_cast<const char*>(vals.raw_data());
    for (int64_t i = 0; i < n; ++i) {
      auto [it, fresh] = rows_.try_emplace(ix[i], rows_.size());
      size_t off = it->second * size_t(width) * esize;
      if (fresh) {
        row_data_.resize(row_data_.size() + size_t(width) * esize);
        std::memcpy(row_data_.data() + off, src + size_t(i * width) * esize,
                    size_t(width) * esize);
      } else if (spec_.type == dtype::f64) {
        add_into(reinterpret_cast<double*>(row_data_.data() + off),
                 reinterpret_cast<const double*>(src) + i * width, width);
      } else {
        add_into(reinterpret_cast<float*>(row_data_.data() + off),
                 reinterpret_cast<const float*>(src) + i * width, width);
      }
    }
  }

  std::vector<tensor> take_sum() {
    std::vector<tensor> out;
    double f = spec_.reduction == "MEAN" ? 1.0 / double(count_) : 1.0;
    if (!spec_.sparse) {
      scale_elements(sum_, f);
      out.push_back(std::move(sum_));
      sum_ = tensor();
    } else {
      std::vector<std::pair<int64_t, size_t>> order(rows_.begin(), rows_.end());
      std::sort(order.begin(), order.end());
      int64_t width = row_shape_ ? row_shape_->num_elements() : 0;
      size_t esize = size_of(spec_.type);
      tensor idx(dtype::i64, shape{int64_t(order.size())});
      std::vector<int64_t> dims{int64_t(order.size())};
      if (row_shape_)
        dims.insert(dims.end(), row_shape_->dims().begin(), row_shape_->dims().end());
      tensor vals(spec_.type, shape(dims));
      char* dst = static_cast<char*>(vals.raw_data());
      for (size_t i = 0; i < order.size(); ++i) {
        idx.data<int64_t>()[i] = order[i].first;
        std::memcpy(dst + i * size_t(width) * esize,
                    row_data_.data() + order[i].second * size_t(width) * esize,
                    size_t(width) * esize);
      }
      scale_elements(vals, f);
      tensor dense_shape = dense_shape_;
      if (dense_shape.num_elements() == 0 && spec_.value_shape.is_fully_defined()) {
        dense_shape = tensor(dtype::i64, shape{spec_.value_shape.rank()});
        for (int64_t d = 0; d < spec_.value_shape.rank(); ++d)
          dense_shape.data<int64_t>()[d] = spec_.value_shape.dim(d);
      }
      out = {std::move(idx), std::move(vals), std::move(dense_shape)};
    }
    reset_sum();
    return out;
  }
  void reset_sum() {
    sum_ = tensor();
    rows_.clear();
    row_data_.clear();
    count_ = 0;
    contributors_.clear();
  }

  void process() {
    while (!takes_.empty() && count_ >= takes_.front().num_required) {
      auto r = std::move(takes_.front());
      takes_.pop_front();
      taken_from_ = contributors_;
      auto out = take_sum();
      ++global_step_;
      complete(r.done, {}, std::move(out));
    }
  }

  std::mutex mu_;
  std::vector<std::function<void()>> ready_;
  std::string name_;
  accumulator_spec spec_;
  bool closed_ = false;
  int64_t global_step_ = 0, count_ = 0, dropped_ = 0, applied_ = 0, refused_ = 0, next_id_ = 1;
  int64_t oldest_in_sum_ = 0; ///< the oldest local step among the gradients in the sum
  tensor sum_;
  std::unordered_map<int64_t, size_t> rows_; ///< sparse: row index -> slot in row_data_
  std::vector<char> row_data_;
  std::optional<shape> row_shape_;
  tensor dense_shape_;
  std::set<int64_t> contributors_;
  std::set<int64_t> taken_from_; ///< the contributors of the last take, for a put_back
  std::deque<take_request> takes_;
  /// A chief's step failed (a take timed out): gradients are held as they came until the next
  /// set_global_step judges them (sync_replicas.hpp, "a chief that starts again").
  bool awaiting_chief_ = false;
  int64_t chief_epoch_ = 0;
  struct held_gradient {
    int64_t local_step, replica;
    std::vector<tensor> grad;
  };
  std::vector<held_gradient> held_;
};

accumulator_timer::behavior_type timer_behavior(accumulator_timer::pointer,
                                                std::weak_ptr<accumulator_state> s) {
  return {[s](acc_expire_atom, int64_t id) {
    if (auto st = s.lock())
      st->expire(id);
  }};
}

class actor_accumulator : public accumulator_resource {
public:
  actor_accumulator(caf::actor_system& sys, std::string name, accumulator_spec spec)
      : state_(std::make_shared<accumulator_state>(std::move(name), std::move(spec))) {
    timer_ = sys.spawn(timer_behavior, std::weak_ptr<accumulator_state>(state_));
    state_->schedule_expiry = [t = timer_](int64_t id, int64_t ms) {
      caf::delayed_anon_send(t, std::chrono::milliseconds(ms), acc_expire_atom::value, id);
    };
  }
  ~actor_accumulator() override { caf::anon_send_exit(timer_, caf::exit_reason::user_shutdown); }

  const std::string& name() const override { return state_->name(); }
  const accumulator_spec& spec() const override { return state_->spec(); }
  status apply(int64_t local_step, int64_t replica, std::vector<tensor> gradient) override {
    return state_->apply(local_step, replica, std::move(gradient));
  }
  void take(int64_t num_required, take_done_fn done) override {
    state_->take(num_required, std::move(done));
  }
  void put_back(std::vector<tensor> taken, int64_t count) override {
    state_->put_back(std::move(taken), count);
  }
  void set_global_step(int64_t step) override { state_->set_global_step(step); }
  void close() override { state_->close(); }
  stats get_stats() const override { return state_->get_stats(); }

private:
  std::shared_ptr<accumulator_state> state_;
  accumulator_timer timer_;
};

} // namespace

static std::shared_ptr<accumulator_resource> make_actor_accumulator(caf::actor_system& sys,
                                                             std::string name,
                                                             accumulator_spec spec) {
  return std::make_shared<actor_accumulator>(sys, std::move(name), std::move(spec));
}

// Registered with the executor (actors/exec/providers.hpp); the symbol below is what
// actors/CMakeLists.txt makes every program link.
extern "C" const int runnel_actor_accumulator_linked = 1;
namespace {
[[maybe_unused]] const bool registered = (providers().accumulator = make_actor_accumulator, true);
} // namespace

} // namespace runnel
