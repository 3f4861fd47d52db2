// A TensorFlow SavedModel's saved_model.pb (binary or text): the MetaGraph picked by its tags,
// its saver's RestoreV2 keys, the init op's collection, its signatures and any ParseExample
// nodes rewritten, as `runnel run DIR` reads them. The variables directory is not looked at.
#include "runnel/storage/tf/saved_model.hpp"

using namespace runnel;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)parse_tf_saved_model(bytes, "fuzz/saved_model.pb", "", {"serve"});
  return 0;
}
