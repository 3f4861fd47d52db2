#pragma once
// gpu_context's CUDA graphs (gpu_context::launch_as_graph, graph_launch.cpp): per family of
// launches, the executable graphs captured for the pointer sets seen most recently. CUDA code
// only; included by gpu_context.cpp and graph_launch.cpp alone.
#include "runnel/ops/cuda/gpu_context.hpp"
#include <cuda_runtime_api.h>
#include <deque>
#include <string>
#include <unordered_map>

namespace runnel {

struct gpu_context::graph_cache {
  struct graph {
    std::string pointers; ///< the device addresses captured, as bytes
    cudaGraphExec_t exec = nullptr;
  };
  struct family {
    std::deque<graph> graphs;          ///< most recently used first
    std::deque<std::string> seen_once; ///< pointer sets launched directly once: captured if
                                       ///< seen again
    int misses_in_a_row = 0;
    bool given_up = false;
  };
  /// Graphs kept per family: with steady buffers a node brings few pointer sets (one per output
  /// set it has, three at most).
  static constexpr size_t kept = 4;
  /// Captures in a row without a replay after which a family is launched directly.
  static constexpr int misses_allowed = 8;

  std::unordered_map<std::string, family> families;
  std::unordered_map<std::string, steady_buffers> steady; ///< per node
  tensor scratch;                                         ///< steady_scratch's
  cudaStream_t capture = nullptr; ///< private: no other thread enqueues on it during a capture
  bool enabled = true;            ///< RUNNEL_CUDA_GRAPHS=off, or a capture failed

  /// Destroys every graph; the compute stream must be idle.
  void clear();
};

} // namespace runnel
