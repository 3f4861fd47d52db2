// Peer for bench `mlp_step`: the same MLP training step in libtorch (784-512-10, ReLU, softmax
// cross-entropy, plain SGD, batch 100, float32). Prints "ms_per_step <best of 5 rounds>".
//   mlp_libtorch [threads] [steps]
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  int steps = argc > 2 ? std::atoi(argv[2]) : 200;
  torch::set_num_threads(threads);
  torch::manual_seed(1);
  torch::nn::Sequential model(torch::nn::Linear(784, 512), torch::nn::ReLU(),
                              torch::nn::Linear(512, 10));
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.01));
  auto x = torch::rand({100, 784});
  auto y = torch::randint(0, 10, {100}, torch::kLong);
  auto step = [&] {
    opt.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(model->forward(x), y);
    loss.backward();
    opt.step();
  };
  for (int i = 0; i < 20; ++i)
    step();
  double best = 1e9;
  for (int round = 0; round < 5; ++round) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i)
      step();
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                    .count() /
                steps;
    best = std::min(best, ms);
  }
  std::printf("ms_per_step %.4f\n", best);
  return 0;
}
