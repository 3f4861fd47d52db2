// The graph optimizer (ops/optimize/): each pass alone, and all together, against the graph run
// with every pass off, on random inputs, outputs and gradients; and what each pass rewrites. On
// graphs with loops and conditionals: a loop's body rewritten in its frame computes what the
// unoptimized loop does, gradients included; a shape folded inside a branch runs in that branch
// only; a branch's pivot stays.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <random>

#include "../eval.hpp"
#include "runnel/ops/cpu/builtin_kernels.hpp"
#include "runnel/ops/grad/gradients.hpp"
#include "runnel/ops/graph/frames.hpp"
#include "runnel/ops/kernel/kernel.hpp"
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

/// Every pass's options alone, then all of them.
std::vector<std::pair<std::string, graph_optimizer_options>> each_pass() {
  std::vector<std::pair<std::string, graph_optimizer_options>> out;
  auto none = graph_optimizer_options::none();
  auto with = [&](auto set) {
    auto o = none;
    set(o);
    return o;
  };
  out.emplace_back("prune", with([](auto& o) { o.prune_identities = true; }));
  out.emplace_back("folding", with([](auto& o) { o.constant_folding = true; }));
  out.emplace_back("cse", with([](auto& o) { o.cse = true; }));
  out.emplace_back("remapping", with([](auto& o) { o.remapping = true; }));
  out.emplace_back("fusion", with([](auto& o) { o.elementwise_fusion = true; }));
  out.emplace_back("all", graph_optimizer_options{});
  return out;
}

/// The nodes the optimizer makes of `fetches`' graph (all passes, CPU placement).
optimized_graph optimized(const graph& g, const std::vector<output>& fetches,
                          const std::vector<endpoint>& feeds, std::vector<std::string>& log) {
  std::vector<char> needed(size_t(g.num_nodes()), 1);
  graph_signature sig{.feeds = feeds, .fetches = {}, .targets = {}};
  for (auto& f : fetches)
    sig.fetches.push_back(f.ep());
  graph_optimizer_context ctx{.kernels = &builtin_kernels(), .log = &log};
  auto og = optimize_graph(g, needed, sig, {}, ctx);
  INFO((og.ok() ? std::string("ok") : og.error().to_string()));
  REQUIRE(og.ok());
  return std::move(og).value();
}

int count_op(const graph& g, const std::string& op) {
  int n = 0;
  for (auto& nd : g.nodes())
    n += nd.op == op ? 1 : 0;
  return n;
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

TEST_CASE("each graph optimization pass, and all of them, keep outputs and gradients",
          "[actors][optimizer]") {
  std::mt19937 rng(7);
  graph g;
  auto x = placeholder(g, dtype::f32, shape{-1, 6}, "x");
  auto img = placeholder(g, dtype::f32, shape{2, 5, 5, 3}, "img");
  auto w1 = placeholder(g, dtype::f32, shape{6, 8}, "w1");
  auto b1 = placeholder(g, dtype::f32, shape{8}, "b1");
  auto w2 = placeholder(g, dtype::f32, shape{8, 4}, "w2");
  auto f = placeholder(g, dtype::f32, shape{3, 3, 3, 4}, "f");
  // Constants the folding computes once; pass-throughs; a duplicate; the remapper's chains.
  auto scale =
      mul(constant(g, tensor::scalar<float>(0.5f)), constant(g, tensor::scalar<float>(3.f)));
  auto b2 = add(constant(g, uniform_tensor(rng, {4})), constant(g, uniform_tensor(rng, {4})), "b2");
  auto xi = identity(cast(reshape(x, {-1, 6}), dtype::f32));
  auto h = relu(bias_add(matmul(xi, w1), b1), "h");
  auto h_again = relu(bias_add(matmul(xi, w1), b1), "h_again");
  auto z = tanh(add(matmul(add(h, h_again), w2), b2), "z");
  auto chain = sub(sigmoid(mul(z, scale)), square(z), "chain");
  auto c =
      relu6(bias_add(conv2d(img, f, {1, 1}, "SAME"), constant(g, uniform_tensor(rng, {4}))), "c");
  auto loss = add(sum(mul(chain, chain)), sum(c), "loss");
  auto grads = gradients({loss}, {x, w1, b1, w2, f, img});
  std::vector<output> fetches{h, z, chain, c, loss};
  fetches.insert(fetches.end(), grads.begin(), grads.end());
  feed_list feeds{{x, uniform_tensor(rng, {5, 6})},  {img, uniform_tensor(rng, {2, 5, 5, 3})},
                  {w1, uniform_tensor(rng, {6, 8})}, {b1, uniform_tensor(rng, {8})},
                  {w2, uniform_tensor(rng, {8, 4})}, {f, uniform_tensor(rng, {3, 3, 3, 4})}};
  auto want = run_with(graph_optimizer_options::none(), feeds, fetches);
  for (auto& [name, opts] : each_pass()) {
    INFO("passes: " << name);
    auto got = run_with(opts, feeds, fetches);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("fetch " << fetches[i].name());
      check_close(got[i], want[i], 1e-5, 1e-5);
    }
  }
  // What the passes did to it.
  std::vector<std::string> log;
  std::vector<endpoint> fed;
  for (auto& [o, t] : feeds)
    fed.push_back(o.ep());
  auto og = optimized(g, fetches, fed, log);
  std::string all;
  for (auto& line : log)
    all += line + "\n";
  INFO(all);
  CHECK(all.find("prune: removed") != std::string::npos);
  CHECK(all.find("folding: folded") != std::string::npos);
  CHECK(all.find("cse: merged") != std::string::npos);
  CHECK(all.find("remapping: fused") != std::string::npos);
  CHECK(all.find("fusion: fused") != std::string::npos);
  CHECK(count_op(*og.g, "_FusedConv2D") == 1);
  CHECK(count_op(*og.g, "_FusedElementwise") >= 1);
  CHECK(count_op(*og.g, "Identity") == 0);
  CHECK(og.g->at(*og.g->find("b2")).op == "Const");
  CHECK(og.g->num_nodes() < g.num_nodes());
}

TEST_CASE("the optimizer keeps fed, fetched and stateful nodes", "[actors][optimizer]") {
  graph g;
  auto a = constant(g, tensor::scalar<float>(2.f), "a");
  auto b = mul(a, constant(g, tensor::scalar<float>(5.f)), "b");
  auto c = add(b, constant(g, tensor::scalar<float>(1.f)), "c");
  auto r1 = random_uniform(g, {3}, dtype::f32, 1, "r");
  auto d = add(r1, b, "d");
  // Folded: fetching a folded node gives its value; feeding a constant overrides it.
  CHECK(run_with({}, {}, {c})[0].data<float>()[0] == 11.f);
  CHECK(run_with({}, {{b, tensor::scalar<float>(1.f)}}, {c})[0].data<float>()[0] == 2.f);
  CHECK(run_with({}, {{a, tensor::scalar<float>(3.f)}}, {b, c})[1].data<float>()[0] == 16.f);
  // A random op is stateful: not folded, so each step draws anew.
  session s(test_runtime(), g);
  auto s1 = s.run({}, {d});
  auto s2 = s.run({}, {d});
  REQUIRE(s1);
  REQUIRE(s2);
  CHECK_FALSE(equal((*s1)[0], (*s2)[0]));
  std::vector<std::string> log;
  auto og = optimized(g, {c, d}, {}, log);
  REQUIRE(og.g->find("c"));
  CHECK(og.g->at(*og.g->find("c")).op == "Const");
  CHECK(count_op(*og.g, "RandomUniform") == 1);
}

TEST_CASE("a FusedBatchNorm at inference folds into the convolution before it",
          "[actors][optimizer]") {
  std::mt19937 rng(3);
  graph g;
  auto img = placeholder(g, dtype::f32, shape{-1, 6, 6, 2}, "img");
  auto conv = conv2d(img, constant(g, uniform_tensor(rng, {3, 3, 2, 5})), {1, 1}, "SAME");
  auto positive = [&](int n) {
    auto t = uniform_tensor(rng, {n});
    for (auto& v : t.flat<float>())
      v = std::abs(v) + 0.1f;
    return constant(g, t);
  };
  auto bn = g.build("FusedBatchNorm", "bn",
                    {conv.ep(), positive(5).ep(), constant(g, uniform_tensor(rng, {5})).ep(),
                     constant(g, uniform_tensor(rng, {5})).ep(), positive(5).ep()},
                    {{"is_training", false}, {"epsilon", 1e-3}});
  auto y = relu(bn[0], "y");
  feed_list feeds{{img, uniform_tensor(rng, {3, 6, 6, 2})}};
  auto want = run_with(graph_optimizer_options::none(), feeds, {y});
  check_close(run_with({}, feeds, {y})[0], want[0], 1e-5, 1e-5);
  std::vector<std::string> log;
  auto og = optimized(g, {y}, {img.ep()}, log);
  CHECK(count_op(*og.g, "FusedBatchNorm") == 0);
  CHECK(count_op(*og.g, "_FusedConv2D") == 1);
  CHECK(og.g->at(*og.g->find("y")).op == "_FusedConv2D");
}

TEST_CASE("RUNNEL_GRAPH_OPTIMIZER switches passes off, and a bad word is an error naming it",
          "[actors][optimizer]") {
  scoped_env env("RUNNEL_GRAPH_OPTIMIZER", "off");
  CHECK_FALSE(graph_optimizer_options::from_environment({})->any());
  ::setenv("RUNNEL_GRAPH_OPTIMIZER", "no-cse,no-fusion", 1);
  auto o = graph_optimizer_options::from_environment({});
  REQUIRE(o);
  CHECK_FALSE(o->cse);
  CHECK_FALSE(o->elementwise_fusion);
  CHECK(o->constant_folding);
  ::setenv("RUNNEL_GRAPH_OPTIMIZER", "no-magic", 1);
  auto bad = graph_optimizer_options::from_environment({});
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message().find("'no-magic'") != std::string::npos);
}

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

  std::vector<std::string> log;
  auto og = optimized(g, {r[1], dx}, {x.ep(), n.ep()}, log);
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
  std::vector<std::string> log;
  auto og = optimized(g, r, {x.ep(), p.ep()}, log);
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
