// gpu_context::launch_as_graph: a node's many small launches (BlockLSTM's two per time step)
// captured once as a CUDA graph and replayed, so the host enqueues one launch where it enqueued
// seventy. The graphs are keyed by everything the launches depend on (the caller's family string
// for sizes and options, and every device pointer), so a replay does exactly what a direct
// launch would; the cache is used with the launch mutex held, as every kernel launch is.
#include "runnel/ops/cuda/graph_cache.hpp"
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace runnel {

namespace {

std::atomic<int64_t> captured{0}, replayed{0}, direct{0};

bool graphs_switched_off() {
  const char* v = std::getenv("RUNNEL_CUDA_GRAPHS");
  return v && (std::strcmp(v, "off") == 0 || std::strcmp(v, "0") == 0);
}

} // namespace

void gpu_context::graph_cache::clear() {
  for (auto& [name, f] : families)
    for (auto& g : f.graphs)
      cudaGraphExecDestroy(g.exec);
  families.clear();
}

gpu_context::graph_cache& gpu_context::graphs() {
  if (!graphs_) {
    graphs_ = std::make_unique<graph_cache>();
    graphs_->enabled =
        !graphs_switched_off() &&
        cudaStreamCreateWithFlags(&graphs_->capture, cudaStreamNonBlocking) == cudaSuccess;
  }
  return *graphs_;
}

gpu_context::steady_buffers& gpu_context::steady_buffers_of(const std::string& node) {
  return graphs().steady[node];
}

result<std::vector<tensor>>
gpu_context::steady_inputs(steady_buffers& b, std::span<const tensor> in, const std::string& node) {
  std::vector<tensor> out(in.begin(), in.end());
  if (!graphs().enabled) // launched one by one: addresses do not matter
    return out;
  bool first = b.seen.empty();
  b.seen.resize(in.size());
  b.copies.resize(in.size());
  for (size_t k = 0; k < in.size(); ++k) {
    const tensor& t = in[k];
    if (!t.valid() || t.memory() != memory_space::device || t.bytes() == 0)
      continue;
    tensor& copy = b.copies[k];
    if (first)
      b.seen[k] = t.raw_data();
    // Once moved, always copied: an input that moves now and then must not make a new pointer
    // set (and a new graph) each time.
    if (!copy.valid() && t.raw_data() == b.seen[k])
      continue;
    if (!copy.valid() || copy.type() != t.type() || !(copy.shape() == t.shape())) {
      RUNNEL_ASSIGN_OR_RETURN(copy, allocate(t.type(), t.shape(), node));
    }
    RUNNEL_RETURN_IF_ERROR(copy_device_bytes(copy.raw_data(), t.raw_data(), t.bytes()));
    out[k] = copy;
  }
  return out;
}

result<std::vector<tensor>>
gpu_context::steady_outputs(steady_buffers& b, std::span<const std::pair<dtype, shape>> wanted,
                            const std::string& node) {
  auto fits = [&](const std::vector<tensor>& set) {
    if (set.size() != wanted.size())
      return false;
    for (size_t k = 0; k < set.size(); ++k)
      if (set[k].type() != wanted[k].first || !(set[k].shape() == wanted[k].second) ||
          !set[k].is_unique())
        return false;
    return true;
  };
  for (const auto& set : b.output_sets)
    if (fits(set))
      return set;
  if (b.output_sets.size() == 3)
    b.output_sets.erase(b.output_sets.begin());
  std::vector<tensor> fresh;
  for (const auto& [t, s] : wanted) {
    RUNNEL_ASSIGN_OR_RETURN(tensor one, allocate(t, s, node));
    fresh.push_back(std::move(one));
  }
  b.output_sets.push_back(fresh);
  return fresh;
}

result<void*> gpu_context::steady_scratch(size_t bytes, const std::string& node) {
  tensor& scratch = graphs().scratch;
  if (!scratch.valid() || scratch.bytes() < bytes) {
    scratch = tensor(); // the old one back to the allocator first: kernels enqueued on the
                        // compute stream before finish with it before a later one starts
    RUNNEL_ASSIGN_OR_RETURN(scratch, allocate(dtype::u8, shape{int64_t(bytes)}, node));
  }
  return scratch.raw_data();
}

gpu_context::graph_counts gpu_context::graph_launches() {
  return {captured.load(), replayed.load(), direct.load()};
}

status gpu_context::launch_as_graph(const std::string& family,
                                    const std::vector<const void*>& pointers,
                                    const std::function<status(cudaStream_t)>& enqueue) {
  graph_cache& cache = graphs();
  graph_cache::family* f = cache.enabled ? &cache.families[family] : nullptr;
  if (!f || f->given_up) {
    ++direct;
    return enqueue(compute_);
  }
  std::string key(reinterpret_cast<const char*>(pointers.data()),
                  pointers.size() * sizeof(const void*));
  for (auto it = f->graphs.begin(); it != f->graphs.end(); ++it) {
    if (it->pointers != key)
      continue;
    cudaGraphExec_t exec = it->exec;
    if (it != f->graphs.begin()) // most recently used first
      std::rotate(f->graphs.begin(), it, std::next(it));
    f->misses_in_a_row = 0;
    ++replayed;
    return cuda_status(cudaGraphLaunch(exec, compute_), "replaying " + family + "'s CUDA graph");
  }
  if (++f->misses_in_a_row > graph_cache::misses_allowed)
    f->given_up = true;
  // A pointer set seen for the first time is launched directly: only one that comes again is
  // worth a capture.
  auto once = std::find(f->seen_once.begin(), f->seen_once.end(), key);
  if (f->given_up || once == f->seen_once.end()) {
    if (!f->given_up) {
      f->seen_once.push_front(std::move(key));
      if (f->seen_once.size() > graph_cache::kept)
        f->seen_once.pop_back();
    }
    ++direct;
    return enqueue(compute_);
  }
  f->seen_once.erase(once);
  // Capture on the private stream, cuBLAS pointed at it (setting a stream resets cuBLAS's
  // workspace to its own pool: ours is set again, there and back).
  auto point_cublas = [&](cudaStream_t s) {
    cublasStatus_t e = runnel::cublas().set_stream(cublas_, s);
    if (e == CUBLAS_STATUS_SUCCESS && cublas_workspace_.valid())
      e = runnel::cublas().set_workspace(cublas_, cublas_workspace_.raw_data(),
                                         cublas_workspace_.bytes());
    return cublas_status(e, "pointing cuBLAS at a stream");
  };
  RUNNEL_RETURN_IF_ERROR(point_cublas(cache.capture));
  status st = cuda_status(cudaStreamBeginCapture(cache.capture, cudaStreamCaptureModeThreadLocal),
                          "capturing " + family + " as a CUDA graph");
  cudaGraph_t graph = nullptr;
  if (st.ok()) {
    st = enqueue(cache.capture);
    cudaError_t ended = cudaStreamEndCapture(cache.capture, &graph);
    if (st.ok())
      st = cuda_status(ended, "capturing " + family + " as a CUDA graph");
  }
  RUNNEL_RETURN_IF_ERROR(point_cublas(compute_));
  cudaGraphExec_t exec = nullptr;
  if (st.ok())
    st = cuda_status(cudaGraphInstantiate(&exec, graph, 0), "instantiating " + family + "'s graph");
  if (graph)
    cudaGraphDestroy(graph);
  if (!st.ok()) {
    // Nothing was launched. Launch directly from now on, and say why once.
    cudaGetLastError(); // a failed capture's error is not sticky
    std::fprintf(stderr, "runnel: GPU %d launches kernels one by one: %s\n", device_,
                 st.to_string().c_str());
    cache.enabled = false;
    ++direct;
    return enqueue(compute_);
  }
  if (f->graphs.size() == graph_cache::kept) {
    // The oldest graph may still be running (a replay enqueued earlier): wait for it.
    RUNNEL_RETURN_IF_ERROR(
        cuda_status(cudaStreamSynchronize(compute_), "GPU " + std::to_string(device_)));
    cudaGraphExecDestroy(f->graphs.back().exec);
    f->graphs.pop_back();
  }
  f->graphs.push_front({std::move(key), exec});
  ++captured;
  return cuda_status(cudaGraphLaunch(exec, compute_), "launching " + family + "'s CUDA graph");
}

} // namespace runnel
