// A TensorFlow checkpoint's `.index` file: the LevelDB table (footer, block handles, trailers
// and checksums, snappy blocks, prefix-compressed keys) and the BundleHeaderProto and
// BundleEntryProto it holds, as `runnel ckpt inspect` reads them.
#include "runnel/storage/tf/tf_checkpoint.hpp"

using namespace runnel;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)parse_tf_checkpoint_index(bytes, "fuzz.index");
  return 0;
}
