// Trains y = 3a - 2b + 1 (plus noise) with a linear model and Adam, then saves the graph (Runnel's
// format and a TensorFlow .pbtxt) and a checkpoint into DIR.
//   train_and_save DIR
#include <runnel/runnel.hpp>

#include <cstdio>
#include <filesystem>
#include <random>

using namespace runnel;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: train_and_save DIR\n");
    return 2;
  }
  std::string dir = argv[1];
  std::filesystem::create_directories(dir);
  try {
    graph g;
    auto x = placeholder(g, dtype::f32, shape{-1, 2}, "x");
    auto y = placeholder(g, dtype::f32, shape{-1, 1}, "y");
    auto w = variable(g, zeros(g, dtype::f32, {2, 1}), "w");
    auto b = variable(g, zeros(g, dtype::f32, {1}), "b");
    auto prediction = identity(bias_add(matmul(x, w.value), b.value), "prediction");
    auto loss = mean(square(sub(prediction, y)));
    adam_optimizer opt(0.05);
    auto train = opt.minimize(loss);
    auto init = global_variables_initializer(g);

    runtime rt;
    session s(rt, g);
    throw_if_error(s.run({init}));
    std::mt19937 rng(1);
    std::normal_distribution<float> noise(0, 0.01f);
    std::uniform_real_distribution<float> u(-1, 1);
    double first = -1, last = 0;
    for (int step = 0; step < 500; ++step) {
      std::vector<float> xs, ys;
      for (int i = 0; i < 32; ++i) {
        float a = u(rng), c = u(rng);
        xs.insert(xs.end(), {a, c});
        ys.push_back(3 * a - 2 * c + 1 + noise(rng));
      }
      auto out = s.run({{x, tensor::from_values<float>({32, 2}, xs)},
                        {y, tensor::from_values<float>({32, 1}, ys)}},
                       {loss}, {train});
      last = *out.value()[0].data<float>();
      if (first < 0)
        first = last;
    }
    std::printf("loss %.4f -> %.6f\n", first, last);
    saver sv(g);
    auto ckpt = sv.save(s, dir + "/model", 500).value();
    throw_if_error(save_graph(g, dir + "/model.graph"));
    throw_if_error(save_tf_graph(g, dir + "/model.pbtxt"));
    std::printf("saved %s, %s/model.graph and %s/model.pbtxt\n", ckpt.c_str(), dir.c_str(),
                dir.c_str());
    return last < 0.01 * first ? 0 : 1;
  } catch (const error& e) {
    std::fprintf(stderr, "train_and_save: %s\n", e.what());
    return 1;
  }
}
