#pragma once
// Everything needed to build and train models with Runnel's graph API, in one include:
//
//   #include <runnel/ops/ops.hpp>
//   #include <runnel/actors/exec/session.hpp>   // to run them
//
// (Each header can also be included on its own; see docs/architecture.md for the layout.)
#include "runnel/ops/core/status.hpp"
#include "runnel/ops/core/tensor.hpp"
#include "runnel/ops/graph/builder.hpp"
#include "runnel/ops/graph/graph.hpp"
#include "runnel/ops/grad/gradients.hpp"
#include "runnel/ops/layers/control_flow.hpp"
#include "runnel/ops/layers/data_flow.hpp"
#include "runnel/ops/layers/embedding.hpp"
#include "runnel/ops/layers/lstm_block.hpp"
#include "runnel/ops/layers/nn_layers.hpp"
#include "runnel/ops/layers/rnn.hpp"
#include "runnel/ops/layers/attention.hpp"
#include "runnel/ops/layers/sampled_losses.hpp"
#include "runnel/ops/layers/summary.hpp"
#include "runnel/ops/layers/tensor_array.hpp"
#include "runnel/ops/train/mixed_precision.hpp"
#include "runnel/ops/train/optimizers.hpp"
#include "runnel/ops/train/sync_replicas.hpp"
