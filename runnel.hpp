#pragma once
// Runnel's public API in one include, the one users' code needs:
//
//   #include <runnel/runnel.hpp>
//
//   runnel::runtime rt;
//   runnel::graph g;
//   auto x = runnel::placeholder(g, runnel::dtype::f32, {-1, 4}, "x");
//   ...
//   runnel::session s(rt, g);
//
// It stays valid when the folders behind it move (the headers it gathers can also be included
// one by one; docs/architecture.md shows where each lives).

// Tensors, graphs, the builder API, layers, gradients, optimizers (ops/ops.hpp gathers them).
#include "runnel/ops/ops.hpp"
#include "runnel/ops/core/unary_ops.hpp"
#include "runnel/ops/train/towers.hpp"

// Running graphs: the runtime, sessions, datasets and queues' helpers, saving and restoring.
#include "runnel/actors/cluster/cluster.hpp"
#include "runnel/actors/data/batching.hpp"
#include "runnel/actors/data/coordinator.hpp"
#include "runnel/actors/data/dataset.hpp"
#include "runnel/actors/exec/runtime.hpp"
#include "runnel/actors/exec/session.hpp"
#include "runnel/actors/state/freeze.hpp"
#include "runnel/actors/state/saved_model.hpp"
#include "runnel/actors/state/saver.hpp"

// Files: graphs, records, Examples, checkpoints, NumPy arrays, TensorFlow's and Keras's formats.
#include "runnel/net/graph_def.hpp"
#include "runnel/storage/checkpoint.hpp"
#include "runnel/storage/example.hpp"
#include "runnel/storage/keras/keras_import.hpp"
#include "runnel/storage/npy.hpp"
#include "runnel/storage/record_file.hpp"
#include "runnel/storage/tf/events.hpp"
#include "runnel/storage/tf/tf_graph.hpp"
