// One record of a TensorBoard event file, as `runnel events cat` decodes it (the fast path for
// scalar events and protobuf for the rest). The record framing is the record_reader target's.
#include "runnel/storage/tf/events.hpp"

using namespace runnel;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  event e;
  (void)decode_event(bytes, e);
  return 0;
}
