// float16 and bfloat16 on the CPU. Ops with a native 16-bit kernel (the binary element-wise ops,
// MatMul in bfloat16 through oneDNN) register it themselves; every other compute op gets a
// wrapper here: its 16-bit inputs are widened to float32, the float32 kernel runs, and its
// 16-bit outputs are rounded back to nearest even. The arithmetic is float32's (as TensorFlow's
// CPU kernels do for half), so the 16-bit result is the float32 one, rounded.
#include <immintrin.h>
#include <cpuid.h>

#include <algorithm>
#include <cstring>

#include "runnel/ops/cpu/kernels.hpp"
#include "runnel/ops/core/math_functors.hpp"
#include "runnel/ops/graph/op_def.hpp"

namespace runnel {
namespace {

constexpr int64_t convert_grain = int64_t(1) << 16;

template <class F> void for_chunks(cpu_device* cpu, int64_t n, F&& f) {
  if (cpu && n > convert_grain)
    cpu->parallel_for(n, convert_grain, f);
  else
    f(0, n);
}

// float16 conversions with F16C (every x86-64 CPU since 2012) when the CPU has it; the portable
// functions of ops/core/math_functors.hpp otherwise and for the tail.
// (cpuid, not __builtin_cpu_supports("f16c"): clang 14 does not know that feature name.)
bool cpu_has_f16c() {
  unsigned a, b, c, d;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) && (c & bit_AVX);
}
const bool have_f16c = cpu_has_f16c();

__attribute__((target("f16c,avx"))) void half_to_float_f16c(const uint16_t* in, float* out,
                                                            int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  for (; i < n; ++i)
    out[i] = half_bits_to_float(in[i]);
}

__attribute__((target("f16c,avx"))) void float_to_half_f16c(const float* in, uint16_t* out,
                                                            int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i)
    out[i] = float_to_half_bits(in[i]);
}

// bfloat16 rounding with AVX-512 BF16 (vcvtneps2bf16: nearest even, NaN kept quiet) when the
// CPU has it; otherwise a branch-free loop the compiler vectorises.
const bool have_avx512_bf16 = __builtin_cpu_supports("avx512bf16");

__attribute__((target("avx512f,avx512bf16,avx512vl"))) void float_to_bf16_avx512(const float* in,
                                                                                uint16_t* out,
                                                                                int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_loadu_ps(in + i))));
  for (; i < n; ++i)
    out[i] = float_to_bf16_bits(in[i]);
}

void float_to_bf16_portable(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t x;
    std::memcpy(&x, in + i, 4);
    uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    uint32_t quiet_nan = (x >> 16) | 0x40u;
    out[i] = uint16_t((x & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
  }
}

void bf16_to_float(const uint16_t* in, float* out, int64_t n) {
  auto* o = reinterpret_cast<uint32_t*>(out);
  for (int64_t i = 0; i < n; ++i)
    o[i] = uint32_t(in[i]) << 16;
}

/// Kernels of ops with no 16-bit kernel of their own.
class widened_kernel : public kernel {
public:
  widened_kernel(dtype low, std::unique_ptr<node> wide_node, std::unique_ptr<kernel> inner,
                 std::vector<bool> narrow)
      : low_(low), node_(std::move(wide_node)), inner_(std::move(inner)),
        narrow_(std::move(narrow)) {}

  status compute(kernel_context& ctx) override {
    cpu_device* cpu = ctx.has_cpu() ? &ctx.cpu() : nullptr;
    std::vector<tensor> wide(ctx.inputs().begin(), ctx.inputs().end());
    for (auto& t : wide)
      if (t.type() == low_)
        t = widen_to_f32(t, cpu);
    kernel_context inner(wide, int(ctx.outputs().size()), cpu);
    inner.set_step_id(ctx.step_id());
    inner.set_step_container(ctx.step_container());
    inner.set_frame_iter(ctx.frame_iter());
    RUNNEL_RETURN_IF_ERROR(inner_->compute(inner));
    for (size_t i = 0; i < inner.outputs().size(); ++i) {
      tensor& out = inner.outputs()[i];
      if (i < narrow_.size() && narrow_[i] && out.type() == dtype::f32)
        ctx.set_output(int(i), narrow_from_f32(out, low_, cpu));
      else
        ctx.set_output(int(i), std::move(out));
    }
    return {};
  }

private:
  dtype low_;
  std::unique_ptr<node> node_; // the float32 twin the inner kernel was built from
  std::unique_ptr<kernel> inner_;
  std::vector<bool> narrow_;
};

/// Whether the op's definition lets `type_attr` be `low` for a pure computation (no state, no
/// ref inputs: variables keep float32 master weights).
bool can_widen(const op_def* def, const std::string& type_attr, dtype low) {
  if (!def || def->stateful)
    return false;
  for (auto& in : def->inputs)
    if (in.is_ref)
      return false;
  auto* a = def->find_attr_def(type_attr);
  return a && std::find(a->allowed.begin(), a->allowed.end(), low) != a->allowed.end();
}

kernel_factory widen(kernel_factory wide, dtype low) {
  return [wide = std::move(wide), low](const kernel_construction& c)
             -> result<std::unique_ptr<kernel>> {
    auto twin = std::make_unique<node>(c.node);
    std::vector<std::string> changed;
    for (auto& [attr_name, value] : twin->attrs)
      if (auto* t = std::get_if<dtype>(&value); t && *t == low) {
        *t = dtype::f32;
        changed.push_back(attr_name);
      }
    for (auto& t : twin->output_types)
      if (t == low)
        t = dtype::f32;
    std::vector<bool> narrow;
    if (c.node.def)
      for (auto& out : c.node.def->outputs) {
        bool n = !out.type_attr.empty() &&
                 std::find(changed.begin(), changed.end(), out.type_attr) != changed.end();
        for (int64_t j = 0; j < out.count(c.node.attrs); ++j)
          narrow.push_back(n);
      }
    kernel_construction wc{*twin, c.graph, c.device, c.cpu, c.resources, c.output_value_needed};
    RUNNEL_ASSIGN_OR_RETURN(auto inner, wide(wc));
    if (inner->is_async())
      return unimplemented("node '" + c.node.name + "' (op " + c.node.op + "): no " +
                           std::string(name(low)) + " kernel (its float32 kernel is asynchronous)");
    return std::unique_ptr<kernel>(
        std::make_unique<widened_kernel>(low, std::move(twin), std::move(inner), std::move(narrow)));
  };
}

} // namespace

tensor widen_to_f32(const tensor& t, cpu_device* cpu) {
  tensor out(dtype::f32, t.shape());
  float* o = out.data<float>();
  if (t.type() == dtype::bf16) {
    const uint16_t* in = reinterpret_cast<const uint16_t*>(t.raw_data());
    for_chunks(cpu, t.num_elements(),
               [&](int64_t b, int64_t e) { bf16_to_float(in + b, o + b, e - b); });
  } else {
    const uint16_t* in = reinterpret_cast<const uint16_t*>(t.raw_data());
    for_chunks(cpu, t.num_elements(), [&](int64_t b, int64_t e) {
      if (have_f16c)
        return half_to_float_f16c(in + b, o + b, e - b);
      for (int64_t i = b; i < e; ++i)
        o[i] = half_bits_to_float(in[i]);
    });
  }
  return out;
}

tensor narrow_from_f32(const tensor& t, dtype to, cpu_device* cpu) {
  tensor out(to, t.shape());
  const float* in = t.data<float>();
  uint16_t* o = reinterpret_cast<uint16_t*>(out.raw_data());
  if (to == dtype::bf16)
    for_chunks(cpu, t.num_elements(), [&](int64_t b, int64_t e) {
      if (have_avx512_bf16)
        float_to_bf16_avx512(in + b, o + b, e - b);
      else
        float_to_bf16_portable(in + b, o + b, e - b);
    });
  else
    for_chunks(cpu, t.num_elements(), [&](int64_t b, int64_t e) {
      if (have_f16c)
        return float_to_half_f16c(in + b, o + b, e - b);
      for (int64_t i = b; i < e; ++i)
        o[i] = float_to_half_bits(in[i]);
    });
  return out;
}

/// float16 and bfloat16 kernels for every compute op that has a float32 kernel and no 16-bit one:
/// inputs widened to float32, the float32 kernel, outputs rounded back.
RUNNEL_KERNEL_WRAPPERS(reduced_precision) {
  const op_registry& ops = builtin_ops();
  auto all = reg.registrations();
  for (dtype low : {dtype::f16, dtype::bf16}) {
    for (auto& r : all) {
      if (r.device != device_type::cpu || r.types.empty() ||
          std::find(r.types.begin(), r.types.end(), dtype::f32) == r.types.end())
        continue;
      bool native = std::any_of(all.begin(), all.end(), [&](auto& o) {
        return o.op == r.op && o.device == r.device && o.type_attr == r.type_attr &&
               std::find(o.types.begin(), o.types.end(), low) != o.types.end();
      });
      if (native || !can_widen(ops.find(r.op), r.type_attr, low))
        continue;
      reg.add(r.op, device_type::cpu, {low}, widen(r.factory, low), r.type_attr);
    }
  }
}

} // namespace runnel
