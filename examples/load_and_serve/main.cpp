// Loads what train_and_save wrote, restores the latest checkpoint and answers queries: each pair
// of numbers "a,b" on the command line gets the model's prediction.
//   load_and_serve DIR 0.5,0.25 -1,1 ...
#include <runnel/runnel.hpp>

#include <cstdio>
#include <cstdlib>

using namespace runnel;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: load_and_serve DIR a,b [a,b ...]\n");
    return 2;
  }
  std::string dir = argv[1];
  auto g = load_graph(dir + "/model.graph");
  if (!g) {
    std::fprintf(stderr, "load_and_serve: %s\n", g.error().to_string().c_str());
    return 1;
  }
  std::vector<float> xs;
  for (int i = 2; i < argc; ++i) {
    char* end = nullptr;
    float a = std::strtof(argv[i], &end);
    if (*end != ',') {
      std::fprintf(stderr, "load_and_serve: '%s' is not a,b\n", argv[i]);
      return 2;
    }
    float b = std::strtof(end + 1, &end);
    xs.insert(xs.end(), {a, b});
  }
  runtime rt;
  session s(rt, *g);
  saver sv(*g);
  auto latest = saver::latest_checkpoint(dir);
  if (!latest) {
    std::fprintf(stderr, "load_and_serve: %s\n", latest.error().to_string().c_str());
    return 1;
  }
  if (auto st = sv.restore(s, *latest); !st.ok()) {
    std::fprintf(stderr, "load_and_serve: %s\n", st.to_string().c_str());
    return 1;
  }
  int64_t n = int64_t(xs.size() / 2);
  auto out = s.run({{"x", tensor::from_values<float>({n, 2}, xs)}}, {"prediction"});
  if (!out) {
    std::fprintf(stderr, "load_and_serve: %s\n", out.error().to_string().c_str());
    return 1;
  }
  for (int64_t i = 0; i < n; ++i)
    std::printf("%g,%g -> %.3f\n", xs[size_t(2 * i)], xs[size_t(2 * i + 1)],
                (*out)[0].data<float>()[i]);
  return 0;
}
