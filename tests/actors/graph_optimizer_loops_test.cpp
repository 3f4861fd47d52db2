// The graph optimizer on graphs with loops and conditionals: a loop's body is rewritten in its
// frame (fused, merged, folded) and computes what the unoptimized loop does, gradients included;
// a shape folded inside a branch runs in that branch only; a branch's pivot stays.
#include <catch2/catch.hpp>

#include <random>

#include "../eval.hpp"
#include "runnel/ops/cpu/builtin_kernels.hpp"
#include "runnel/ops/grad/gradients.hpp"
#include "runnel/ops/graph/frames.hpp"
#include "runnel/ops/layers/control_flow.hpp"
#include "runnel/ops/optimize/graph_optimizer.hpp"

using namespace runnel;
using namespace runnel::testing;

namespace {

std::vector<tensor> run_with(const graph_optimizer_options& opts, const feed_list& feeds,
                             const std::vector<output>& fetches) {
  session s(test_runtime(), fetches.at(0).owner(), {.optimizer = opts});
  auto r = s.run(feeds, fetches);
  INFO((r.ok() ? std::string("ok") : r.error().to_string()));
  REQUIRE(r.ok());
  return std::move(r).value();
}

optimized_graph optimized(const graph& g, const std::vector<output>& fetches,
                          const std::vector<endpoint>& feeds) {
  std::vector<char> needed(size_t(g.num_nodes()), 1);
  graph_signature sig{.feeds = feeds, .fetches = {}, .targets = {}};
  for (auto& f : fetches)
    sig.fetches.push_back(f.ep());
  graph_optimizer_context ctx{.kernels = &builtin_kernels()};
  auto og = optimize_graph(g, needed, sig, {}, ctx);
  INFO((og.ok() ? std::string("ok") : og.error().to_string()));
  REQUIRE(og.ok());
  return std::move(og).value();
}

/// How many nodes of `op` the graph has inside loops (frame > 0) and at the top level.
std::pair<int, int> count_in_loops(const graph& g, const std::string& op) {
  std::vector<int> all(size_t(g.num_nodes()));
  for (int v = 0; v < g.num_nodes(); ++v)
    all[size_t(v)] = v;
  auto frames = find_loop_frames(g, all);
  int inside = 0, outside = 0;
  for (int v = 0; v < g.num_nodes(); ++v)
    if (g.at(v).op == op)
      (frames.frame_of[size_t(v)] > 0 ? inside : outside) += 1;
  return {inside, outside};
}

} // namespace

TEST_CASE("a while loop's body is optimized in its frame and computes what it did, gradients "
          "too",
          "[actors][optimizer][control_flow]") {
  graph g;
  auto x = placeholder(g, dtype::f32, shape{3, 4}, "x");
  auto n = placeholder(g, dtype::i32, shape{}, "n");
  auto r =
      while_loop([&](const std::vector<output>& v) { return less(v[0], n); },
                 [&](const std::vector<output>& v) {
                   output h = v[1];
                   // Twice the same product (merged), a chain of element-wise ops (fused)
                   // and h's shape read (the Shape folded, in the frame).
                   auto a = h * constant(g, 0.5f), b = h * constant(g, 0.5f);
                   auto y = tanh(a + b + constant(g, 0.25f)) * constant(g, 0.9f) + x;
                   auto size = cast(sum(shape_of(h)), dtype::f32);
                   return std::vector<output>{v[0] + constant(g, 1), y + size * constant(g, 0.01f)};
                 },
                 {constant(g, 0), x});
  auto loss = sum(r[1] * r[1]);
  auto dx = gradients({loss}, {x})[0];

  auto og = optimized(g, {r[1], dx}, {x.ep(), n.ep()});
  CHECK(count_in_loops(*og.g, "_FusedElementwise").first >= 1);
  CHECK(count_in_loops(*og.g, "Shape").first == 0);
  CHECK(count_in_loops(*og.g, "Enter").first == count_in_loops(g, "Enter").first);
  // The folded shape waits on what it describes: a Const inside the loop with a control input.
  bool anchored = false;
  std::vector<int> all(size_t(og.g->num_nodes()));
  for (int v = 0; v < og.g->num_nodes(); ++v)
    all[size_t(v)] = v;
  auto frames = find_loop_frames(*og.g, all);
  for (int v = 0; v < og.g->num_nodes(); ++v)
    anchored |= og.g->at(v).op == "Const" && frames.frame_of[size_t(v)] > 0 &&
                og.g->at(v).output_types[0] == dtype::i32 &&
                og.g->at(v).output_shapes[0] == shape{2} && !og.g->at(v).control_inputs.empty();
  CHECK(anchored);

  std::mt19937 rng(3);
  for (int iterations : {0, 1, 6}) {
    feed_list feeds{{x, uniform_tensor(rng, {3, 4})}, {n, tensor::scalar<int32_t>(iterations)}};
    auto off = run_with(graph_optimizer_options::none(), feeds, {r[1], dx});
    auto on = run_with({}, feeds, {r[1], dx});
    INFO("iterations " << iterations);
    check_close(on[0], off[0], 1e-5);
    check_close(on[1], off[1], 1e-4);
  }
}

TEST_CASE("a shape folded inside a branch runs in that branch only, and pivots stay",
          "[actors][optimizer][control_flow]") {
  graph g;
  auto x = placeholder(g, dtype::f32, shape{2, 3}, "x");
  auto p = placeholder(g, dtype::boolean, shape{}, "p");
  // Each branch gives a shape its optimizer folds to a constant: folded without waiting on the
  // branch's value it would reach the Merge from the branch not taken as well. The constants
  // read in each branch wait on its pivot.
  auto r = cond(
      p,
      [&]() -> std::vector<output> {
        return {shape_of(tanh(x)), shape_of(x), constant(g, 1.f)};
      },
      [&]() -> std::vector<output> {
        return {shape_of(transpose(tanh(x), {1, 0})), shape_of(x) + constant(g, 1),
                constant(g, 2.f)};
      });
  auto og = optimized(g, r, {x.ep(), p.ep()});
  CHECK(og.g->num_nodes() < g.num_nodes());
  tensor xv(dtype::f32, shape{2, 3});
  for (int trial = 0; trial < 20; ++trial)
    for (bool taken : {true, false}) {
      auto on = run_with({}, {{x, xv}, {p, tensor::scalar<bool>(taken)}}, r);
      INFO("branch " << taken << ", trial " << trial);
      check_equal(on[0], taken ? tensor::vector<int32_t>({2, 3}) : tensor::vector<int32_t>({3, 2}));
      check_equal(on[1], taken ? tensor::vector<int32_t>({2, 3}) : tensor::vector<int32_t>({3, 4}));
      CHECK(on[2].data<float>()[0] == (taken ? 1.f : 2.f));
    }
}
