#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>

#include "runnel/ops/cpu/cpu_device.hpp"

int main(int argc, char** argv) {
  runnel::reexec_with_better_blas_core(argv); // as the apps do: OpenBLAS's own kernels
  int result = Catch::Session().run(argc, argv);
  // The shared test runtime is never destroyed (tests/eval.hpp): its actor threads are still
  // running when static destructors would run, and one of them touching a destroyed static
  // crashed a passed test at exit (once in 2,660 runs). Leave without static destruction.
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(result);
}
