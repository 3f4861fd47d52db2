#pragma once
// Files written by other software (../shared/testdata, or $RUNNEL_TESTDATA).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace runnel::testing {

/// The path of `rel` under the shared test data; the test fails plainly when it is absent.
inline std::string testdata(const std::string& rel) {
  namespace fs = std::filesystem;
  const char* env = std::getenv("RUNNEL_TESTDATA");
  fs::path root = env ? fs::path(env) : fs::path(RUNNEL_SOURCE_DIR) / ".." / "shared" / "testdata";
  auto p = root / rel;
  INFO("test data " << p.string()
                    << " is missing: set RUNNEL_TESTDATA to the shared testdata folder");
  REQUIRE(fs::exists(p));
  return p.string();
}

} // namespace runnel::testing
