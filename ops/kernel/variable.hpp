#pragma once
// Variables: named, typed state that outlives steps, executor instances and sessions.
//
//   std::shared_ptr<class variable> v = resources.find_or_create_variable("w", dtype::f32, {784, 10});
//   result<tensor> current = v->read();        // shares the buffer (copy-on-write)
//   v->update([](variable::state& s) { ...; return ok_status(); },
//             [](status st, tensor value) { ... });   // serialised with other updates
//
// Reads take the current buffer under a short lock. Updates are serialised by an executor the
// runtime provides (the variable's resource actor), so concurrent steps and workers never race:
// an update writes in place only when no reader holds the buffer, and otherwise copies first.

#include <functional>
#include <mutex>
#include <string>

#include "runnel/ops/core/tensor.hpp"

namespace runnel {

class variable {
public:
  /// What an update function may change. The lock is held while it runs.
  struct state {
    tensor value;
    bool initialized = false;
  };
  using update_fn = std::function<status(state&)>;
  using done_fn = std::function<void(status, tensor)>;

  variable(std::string name, dtype type, shape s)
      : name_(std::move(name)), type_(type), shape_(std::move(s)) {}
  virtual ~variable() = default;

  const std::string& name() const { return name_; }
  dtype type() const { return type_; }
  /// The declared shape (may be partially unknown; the value's shape is authoritative).
  const shape& declared_shape() const { return shape_; }

  /// The current value, or failed_precondition naming the variable when uninitialised.
  result<tensor> read() const;
  /// The current value in host memory: a variable that lives on a GPU is copied back (after the
  /// GPU work that produced it). For readers on a CPU.
  result<tensor> read_host() const;
  bool initialized() const;
  /// How this variable's device-memory values reach the host (set by a GPU device's resources).
  void set_device_reader(std::function<result<tensor>(const tensor&)> reader) {
    device_reader_ = std::move(reader);
  }

  /// Runs `fn` after every earlier update, then `done(status, new value)`. The runtime decides
  /// where `fn` runs (the variable's actor); `done` may be called from any thread.
  virtual void update(update_fn fn, done_fn done) = 0;

  /// Runs `fn` under this variable's lock on the calling thread. For optimizer slot variables
  /// (accumulators, moments) updated inside their variable's own update: the variable's
  /// actor already serialises those updates, and slots are locked after their variable.
  status modify(const update_fn& fn) { return apply(fn).first; }

protected:
  /// Runs `fn` under the lock; for executors.
  std::pair<status, tensor> apply(const update_fn& fn);

private:
  std::string name_;
  dtype type_;
  shape shape_;
  mutable std::mutex mu_;
  state state_;
  std::function<result<tensor>(const tensor&)> device_reader_;
};

/// Makes `s.value` safe to write in place: copies it when a reader still shares the buffer.
void make_writable(variable::state& s);

/// The completion of an update kernel whose output is the variable's new value (Assign, the
/// Apply and Scatter families): sets `*out` on success, then calls `done`.
variable::done_fn output_new_value(tensor* out, std::function<void(status)> done);

} // namespace runnel
