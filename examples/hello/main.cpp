// Fits y = 2x - 1 with a one-weight linear model and gradient descent.
#include <runnel/runnel.hpp>

#include <cstdio>

using namespace runnel;

int main() {
  graph g;
  auto x = placeholder(g, dtype::f32, shape{-1, 1}, "x");
  auto y = placeholder(g, dtype::f32, shape{-1, 1}, "y");
  auto w = variable(g, zeros(g, dtype::f32, {1, 1}), "w");
  auto b = variable(g, zeros(g, dtype::f32, {1}), "b");
  auto prediction = bias_add(matmul(x, w.value), b.value);
  auto loss = mean(square(prediction - y));
  auto train = gradient_descent_optimizer(0.1).minimize(loss);

  runtime rt; // the actor system and a CPU device
  session s(rt, g);
  throw_if_error(s.run({global_variables_initializer(g)}));
  auto xs = tensor::from_values<float>({4, 1}, {0, 1, 2, 3});
  auto ys = tensor::from_values<float>({4, 1}, {-1, 1, 3, 5});
  for (int step = 1; step <= 200; ++step) {
    auto out = s.run({{x, xs}, {y, ys}}, {loss}, {train});
    if (!out) { // errors name the node and op at fault
      std::fprintf(stderr, "%s\n", out.error().to_string().c_str());
      return 1;
    }
    if (step % 50 == 0)
      std::printf("step %d: loss %.5f\n", step, out.value()[0].data<float>()[0]);
  }
  auto wb = s.run({}, {w.value, b.value}).value();
  std::printf("w = %.3f, b = %.3f\n", wb[0].data<float>()[0], wb[1].data<float>()[0]);
}
