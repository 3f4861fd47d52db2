#pragma once
// Emulated compute: a node that holds its device for a stated time and produces float32 tensors of
// stated shapes, each element scale × (the sum of the inputs' first elements). A cluster of many
// workers then runs on a small machine with a real model's timing and bytes.
//
//   auto outs = emulated_compute({x, w.value}, 0.004, {shape{1}}, "conv1/forward");

#include <string_view>
#include <vector>

#include "runnel/ops/graph/graph.hpp"

namespace runnel {

/// An EmulatedCompute node over `inputs` (float32, at least one) with one output per shape.
std::vector<output> emulated_compute(const std::vector<output>& inputs, double seconds,
                                     const std::vector<shape>& output_shapes,
                                     std::string_view name = {}, double scale = 1e-3);

} // namespace runnel
