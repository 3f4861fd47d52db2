#include "runnel/ops/layers/emulation.hpp"

namespace runnel {

std::vector<output> emulated_compute(const std::vector<output>& inputs, double seconds,
                                     const std::vector<shape>& output_shapes, std::string_view name,
                                     double scale) {
  if (inputs.empty())
    throw error(
        invalid_argument("emulated_compute '" + std::string(name) + "' needs at least one input"));
  std::vector<endpoint> in;
  for (auto& x : inputs)
    in.push_back(x.ep());
  return inputs[0].owner().build("EmulatedCompute", name.empty() ? "EmulatedCompute" : name, in,
                                 {{"N", int64_t(inputs.size())},
                                  {"M", int64_t(output_shapes.size())},
                                  {"seconds", seconds},
                                  {"output_shapes", output_shapes},
                                  {"scale", scale}});
}

} // namespace runnel
