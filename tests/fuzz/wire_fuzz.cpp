// What a node reads from strangers before trusting them: the connection preamble and token,
// data-plane frame headers (with string tensors inside), and step-message headers. The first
// byte picks which (bit 0: preamble; bit 1: step message; neither: frame header).
#include <cstring>
#include <vector>

#include "runnel/net/wire_frame.hpp"

using namespace runnel;
using namespace runnel::net;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1)
    return 0;
  uint8_t mode = data[0];
  ++data;
  --size;
  if (mode & 1) {
    if (size < preamble_bytes)
      return 0;
    auto p = parse_preamble(data);
    if (p && size - preamble_bytes >= p->token_bytes)
      (void)tokens_equal(data + preamble_bytes, p->token_bytes, "s3cret-token");
    return 0;
  }
  // As the endpoint hands them over: 8-byte aligned, a whole number of words.
  size_t words = size / 8;
  if (words == 0)
    return 0;
  std::vector<uint64_t> aligned(words);
  std::memcpy(aligned.data(), data, words * 8);
  if (mode & 2) {
    auto m =
        decode_step_header(aligned.data(), words * 8, {.max_payload_bytes = uint64_t(1) << 30});
    if (!m)
      return 0;
    if (m->message.tensors.size() != m->tensors.size())
      __builtin_trap(); // every named tensor has its description
    uint64_t total = 0;
    for (auto& d : m->tensors) {
      total += d.payload_bytes;
      if (d.bf16 || (d.type == dtype::string && (d.payload_bytes != 0 || !d.string_value.valid())))
        __builtin_trap(); // strings travel whole, nothing as bf16
    }
    if (total > (uint64_t(1) << 30))
      __builtin_trap(); // the payloads' sum is within the limit
    return 0;
  }
  auto h = decode_frame_header(aligned.data(), words * 8,
                               {.max_payload_bytes = uint64_t(1) << 30});
  if (h && h->type != dtype::string && h->payload_bytes <= (1u << 20)) {
    // What the endpoint does next: allocate the announced tensor (small ones only here).
    tensor t(h->type, h->shape);
    if (t.bytes() < h->payload_bytes && !h->bf16)
      __builtin_trap(); // the payload would overrun the tensor
  }
  return 0;
}
