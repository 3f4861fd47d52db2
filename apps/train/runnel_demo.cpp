// The main job, for now: build model graphs with the embedded API, evaluate them in a local
// session whose nodes are actors, save and reload the graph, and report throughput.
//
//   runnel_demo [--steps N] [--out DIR]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>

#include "runnel/actors/exec/session.hpp"
#include "runnel/net/graph_def.hpp"
#include "runnel/ops/graph/builder.hpp"

using namespace runnel;

namespace {

struct options {
  int steps = 200;
  std::string out = "runnel-demo";
};

void usage(std::FILE* to) {
  std::fprintf(to,
               "usage: runnel_demo [--steps N] [--out DIR]\n"
               "  Builds an XOR network with known weights and a 784-512-10 MLP, evaluates them\n"
               "  in a local session, saves the MLP graph to DIR/mlp.graph, reloads it and\n"
               "  checks that the reloaded graph computes the same numbers.\n"
               "  --steps N   forward passes of the MLP to time (default 200)\n"
               "  --out DIR   where to write the graph (default ./runnel-demo)\n");
}

result<options> parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> result<std::string> {
      if (i + 1 >= argc)
        return invalid_argument(a + " needs a value");
      return std::string(argv[++i]);
    };
    if (a == "--help" || a == "-h") {
      usage(stdout);
      std::exit(0);
    } else if (a == "--steps") {
      RUNNEL_ASSIGN_OR_RETURN(auto v, value());
      o.steps = std::atoi(v.c_str());
      if (o.steps <= 0)
        return invalid_argument("--steps must be a positive integer, got '" + v + "'");
    } else if (a == "--out") {
      RUNNEL_ASSIGN_OR_RETURN(o.out, value());
    } else {
      return invalid_argument("unknown argument '" + a + "'");
    }
  }
  return o;
}

/// A 2-2-1 network whose hand-set weights compute XOR: a model whose answers are known.
status xor_network(runtime& rt) {
  graph g;
  // Variables live in the runtime, shared by every graph that names them: keep these apart.
  auto scope = g.name_scope("xor");
  auto x = placeholder(g, dtype::f32, shape{-1, 2}, "x");
  auto w1 = variable(g, constant(g, {{20.f, -20.f}, {20.f, -20.f}}), "hidden/w");
  auto b1 = variable(g, constant(g, {-10.f, 30.f}), "hidden/b");
  auto w2 = variable(g, constant(g, {{20.f}, {20.f}}), "out/w");
  auto b2 = variable(g, constant(g, {-30.f}), "out/b");
  auto h = sigmoid(bias_add(matmul(x, w1), b1), "hidden");
  auto y = sigmoid(bias_add(matmul(h, w2), b2), "xor");
  session s(rt, g);
  RUNNEL_RETURN_IF_ERROR(s.run({global_variables_initializer(g)}));
  auto in = tensor::from_values<float>({4, 2}, {0, 0, 0, 1, 1, 0, 1, 1});
  RUNNEL_ASSIGN_OR_RETURN(auto out, s.run({{x, in}}, {y}));
  std::printf("xor network (2-2-1, sigmoid):\n");
  const float expected[4] = {0, 1, 1, 0};
  for (int i = 0; i < 4; ++i) {
    float p = out[0].data<float>()[i];
    std::printf("  xor(%g, %g) = %.4f\n", in.data<float>()[2 * i], in.data<float>()[2 * i + 1], p);
    if (std::abs(p - expected[i]) > 0.01f)
      return internal_error("xor network gave " + std::to_string(p) + " for row " +
                            std::to_string(i));
  }
  return {};
}

struct mlp {
  graph g;
  output x, probs, predictions;
  operation init;
};

void build_mlp(mlp& m) {
  graph& g = m.g;
  g.set_seed(2024);
  m.x = placeholder(g, dtype::f32, shape{-1, 784}, "x");
  output h;
  {
    auto s = g.name_scope("hidden");
    auto w = variable(g, truncated_normal(g, {784, 512}, 0.05), "w");
    auto b = variable(g, zeros(g, dtype::f32, {512}), "b");
    h = relu(bias_add(matmul(m.x, w), b));
  }
  {
    auto s = g.name_scope("logits");
    auto w = variable(g, truncated_normal(g, {512, 10}, 0.05), "w");
    auto b = variable(g, zeros(g, dtype::f32, {10}), "b");
    m.probs = softmax(bias_add(matmul(h, w), b), "probs");
  }
  m.predictions = argmax(m.probs, 1, dtype::i64, "predictions");
  m.init = global_variables_initializer(g);
}

int run(const options& opt) {
  runtime rt;
  std::printf("runtime: %zu device(s): %s\n", rt.devices().size(), rt.devices()[0].c_str());
  throw_if_error(xor_network(rt));

  mlp m;
  build_mlp(m);
  std::printf("\nmlp 784-512-10 (relu, softmax), batch 100: %d nodes\n", m.g.num_nodes());
  session s(rt, m.g);
  throw_if_error(s.run({m.init}));

  const int batch = 100;
  tensor input(dtype::f32, shape{batch, 784});
  auto p = input.flat<float>();
  for (size_t i = 0; i < p.size(); ++i)
    p[i] = float((i * 7919) % 256) / 255.f;
  auto first = s.run({{m.x, input}}, {m.probs, m.predictions}).value();
  auto start = std::chrono::steady_clock::now();
  auto last_print = start;
  for (int step = 1; step <= opt.steps; ++step) {
    throw_if_error(s.run({{m.x, input}}, {m.predictions}).error());
    auto now = std::chrono::steady_clock::now();
    if (now - last_print > std::chrono::milliseconds(200) || step == opt.steps) {
      double secs = std::chrono::duration<double>(now - start).count();
      double eta = secs / step * (opt.steps - step);
      std::printf("\r  step %d/%d  %.0f examples/s  %.2f ms/step  eta %.1fs   ", step, opt.steps,
                  step * batch / secs, secs / step * 1e3, eta);
      std::fflush(stdout);
      last_print = now;
    }
  }
  std::printf("\n  first example: p = %s, predicted class %lld\n\n",
              first[0].slice(0, 1).values_to_string(10).c_str(),
              static_cast<long long>(first[1].data<int64_t>()[0]));

  std::filesystem::create_directories(opt.out);
  std::string path = opt.out + "/mlp.graph";
  throw_if_error(save_graph(m.g, path));
  auto loaded = load_graph(path).value();
  runtime rt2;
  session s2(rt2, loaded);
  throw_if_error(s2.run(named_feed_list{}, {}, {m.init.name()}).error());
  auto again =
      s2.run(named_feed_list{{m.x.name(), input}}, {m.probs.name(), m.predictions.name()}).value();
  bool same = equal(again[0], first[0]) && equal(again[1], first[1]);
  std::printf("  saved %s (%ju bytes); reloaded graph gives %s results\n", path.c_str(),
              static_cast<uintmax_t>(std::filesystem::file_size(path)),
              same ? "identical" : "DIFFERENT");
  if (!same)
    return 1;
  std::printf("demo: ok\n");
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  auto opt = parse(argc, argv);
  if (!opt) {
    std::fprintf(stderr, "runnel_demo: %s\n", opt.error().message().c_str());
    usage(stderr);
    return 2;
  }
  try {
    return run(*opt);
  } catch (const runnel::error& e) {
    std::fprintf(stderr, "runnel_demo: %s\n", e.what());
    return 1;
  }
}
