#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "ops/cpu/cpu_device.hpp"

int main(int argc, char** argv) {
  runnel::reexec_with_better_blas_core(argv); // as the apps do: OpenBLAS's own kernels
  return Catch::Session().run(argc, argv);
}
