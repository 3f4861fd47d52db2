#include "runnel/ops/kernel/variable.hpp"

#include "runnel/ops/core/float_env.hpp"

namespace runnel {

result<tensor> variable::read() const {
  std::lock_guard lock(mu_);
  if (!state_.initialized)
    return failed_precondition("attempting to use uninitialized value " + name_ +
                               " (run its initializer, e.g. global_variables_initializer(), or "
                               "restore it from a checkpoint first)");
  return state_.value;
}

result<tensor> variable::read_host() const {
  RUNNEL_ASSIGN_OR_RETURN(tensor value, read());
  if (value.host_readable())
    return value;
  if (!device_reader_)
    return failed_precondition("variable " + name_ + " is in " + value.memory_name() +
                               " and its device gave no way to read it back");
  return device_reader_(value);
}

bool variable::initialized() const {
  std::lock_guard lock(mu_);
  return state_.initialized;
}

std::pair<status, tensor> variable::apply(const update_fn& fn) {
  std::lock_guard lock(mu_);
  // Updates are kernels' work run later, on the variable's actor: flushed as kernels are.
  scoped_flush_denormals flush;
  status s = fn(state_);
  return {s, s.ok() ? state_.value : tensor()};
}

variable::done_fn output_new_value(tensor* out, std::function<void(status)> done) {
  return [out, done = std::move(done)](status st, tensor v) {
    if (st.ok())
      *out = std::move(v);
    done(std::move(st));
  };
}

void make_writable(variable::state& s) {
  // The variable's own reference is one; any other means a reader holds the buffer.
  if (!s.value.is_unique())
    s.value = s.value.copy();
}

} // namespace runnel
