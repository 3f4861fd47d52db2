// Variable kernels. VariableV2 reads the variable's current buffer; Assign, AssignAdd and
// AssignSub are asynchronous: they hand an update to the variable's executor (its resource
// actor), which applies updates one at a time.
#include "runnel/ops/cpu/kernels.hpp"
#include "runnel/ops/kernel/variable.hpp"

namespace runnel {
namespace {

class variable_kernel : public kernel {
public:
  variable_kernel(std::shared_ptr<variable> v, bool value_needed)
      : var_(std::move(v)), value_needed_(value_needed) {}
  status compute(kernel_context& ctx) override {
    if (!value_needed_)
      return {}; // consumers read the variable themselves when they run
    RUNNEL_ASSIGN_OR_RETURN(tensor value, var_->read());
    ctx.set_output(0, std::move(value));
    return {};
  }
  std::shared_ptr<variable> variable_resource() const override { return var_; }

private:
  std::shared_ptr<variable> var_;
  bool value_needed_;
};

enum class assign_kind { assign, add, sub };

class assign_kernel : public kernel {
public:
  assign_kernel(std::shared_ptr<variable> v, assign_kind kind, bool validate_shape)
      : var_(std::move(v)), kind_(kind), validate_shape_(validate_shape) {}

  bool is_async() const override { return true; }
  status compute(kernel_context&) override {
    return internal_error("Assign kernels are asynchronous");
  }

  void compute_async(kernel_context& ctx, std::function<void(status)> done) override {
    tensor value = ctx.input(1);
    auto* out = &ctx.output(0);
    auto fn = [this, value](variable::state& s) -> status {
      if (value.type() != var_->type())
        return invalid_argument("value has dtype " + std::string(name(value.type())) +
                                " but variable " + var_->name() + " is " +
                                std::string(name(var_->type())));
      if (kind_ == assign_kind::assign) {
        if (validate_shape_ && !var_->declared_shape().is_compatible_with(value.shape()))
          return invalid_argument("cannot assign a value of shape " + value.shape().to_string() +
                                  " to variable " + var_->name() + " of shape " +
                                  var_->declared_shape().to_string());
        // Shares the value's buffer (later in-place updates copy first), unless its owner may
        // still change it (a fed NumPy array) or wants it back soon (a payload lent from a
        // shared-memory ring: kept, it would hold up every later payload of the ring).
        s.value = value.keep_a_copy() ? value.copy() : value;
        s.initialized = true;
        return {};
      }
      if (!s.initialized)
        return failed_precondition("attempting to use uninitialized value " + var_->name());
      if (!(s.value.shape() == value.shape()))
        return invalid_argument("cannot update variable " + var_->name() + " of shape " +
                                s.value.shape().to_string() + " with a value of shape " +
                                value.shape().to_string());
      make_writable(s);
      return dispatch_number(value.type(), [&]<class T>() -> status {
        T* dst = s.value.data<T>();
        const T* src = value.data<T>();
        int64_t n = value.num_elements();
        if (kind_ == assign_kind::add)
          for (int64_t i = 0; i < n; ++i)
            dst[i] += src[i];
        else
          for (int64_t i = 0; i < n; ++i)
            dst[i] -= src[i];
        return {};
      });
    };
    var_->update(std::move(fn), output_new_value(out, std::move(done)));
  }

private:
  std::shared_ptr<variable> var_;
  assign_kind kind_;
  bool validate_shape_;
};

result<std::unique_ptr<kernel>> make_assign(const kernel_construction& c, assign_kind kind) {
  RUNNEL_ASSIGN_OR_RETURN(auto v, input_variable(c, 0));
  bool validate = kind == assign_kind::assign ? c.attr<bool>("validate_shape") : true;
  return std::unique_ptr<kernel>(std::make_unique<assign_kernel>(std::move(v), kind, validate));
}

} // namespace

RUNNEL_KERNEL_FAMILY(state) {
  reg.add("VariableV2", device_type::cpu, {},
          [](const kernel_construction& c) -> result<std::unique_ptr<kernel>> {
            RUNNEL_ASSIGN_OR_RETURN(auto v, node_variable(c, c.node));
            bool needed = !c.output_value_needed.empty() && c.output_value_needed[0];
            return std::unique_ptr<kernel>(std::make_unique<variable_kernel>(std::move(v), needed));
          });
  reg.add("Assign", device_type::cpu, {},
          [](const kernel_construction& c) { return make_assign(c, assign_kind::assign); });
  reg.add("AssignAdd", device_type::cpu, {},
          [](const kernel_construction& c) { return make_assign(c, assign_kind::add); });
  reg.add("AssignSub", device_type::cpu, {},
          [](const kernel_construction& c) { return make_assign(c, assign_kind::sub); });
}

} // namespace runnel
