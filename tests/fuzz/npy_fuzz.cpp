// NumPy .npy files, as `runnel run --feed` reads them; a parsed array is written again.
#include "runnel/storage/npy.hpp"

using namespace runnel;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto t = parse_npy(bytes, "fuzz input");
  if (t.ok())
    (void)serialize_npy(*t);
  return 0;
}
