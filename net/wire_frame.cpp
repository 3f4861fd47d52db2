#include "runnel/net/wire_frame.hpp"

#include <cstring>

#include <capnp/serialize.h>
#include <kj/exception.h>

#include "net/cluster.capnp.h"
#include "runnel/net/tensor_codec.hpp"

namespace runnel::net {

namespace {
constexpr char magic[8] = {'R', 'U', 'N', 'N', 'E', 'L', '0', '1'};
}

result<preamble> parse_preamble(const uint8_t* head) {
  if (std::memcmp(head, magic, 8) != 0)
    return invalid_argument("not a Runnel peer (bad preamble magic)");
  if (head[8] != uint8_t(conn_kind::rpc) && head[8] != uint8_t(conn_kind::data))
    return invalid_argument("unknown connection kind " + std::to_string(head[8]));
  if (head[9] != 0 || head[10] != 0 || head[11] != 0)
    return invalid_argument("reserved preamble bytes are not zero");
  uint32_t n;
  std::memcpy(&n, head + 12, 4);
  if (n > max_token_bytes)
    return invalid_argument("token of " + std::to_string(n) + " bytes (at most " +
                            std::to_string(max_token_bytes) + ")");
  return preamble{conn_kind(head[8]), n};
}

std::string make_preamble(conn_kind kind, const std::string& token) {
  std::string out(preamble_bytes, '\0');
  std::memcpy(out.data(), magic, 8);
  out[8] = char(kind);
  uint32_t n = uint32_t(token.size());
  std::memcpy(out.data() + 12, &n, 4);
  return out + token;
}

bool tokens_equal(const uint8_t* presented, size_t presented_bytes, const std::string& expected) {
  // Every byte of the presented token is compared (against the expected one, cycled), so the
  // time says nothing about where the first difference is.
  uint8_t diff = presented_bytes == expected.size() ? 0 : 1;
  size_t m = expected.size();
  for (size_t i = 0; i < presented_bytes; ++i) {
    uint8_t want = m ? uint8_t(expected[i % m]) : 0;
    diff |= uint8_t(presented[i] ^ want);
  }
  // Keep the compiler from turning the loop into an early exit.
  volatile uint8_t v = diff;
  return v == 0;
}

std::string encode_frame_header(const frame_header& f) {
  capnp::MallocMessageBuilder msg;
  auto h = msg.initRoot<wire::TensorFrame>();
  h.setStepId(f.step);
  h.setKey(f.key);
  h.setSenderIncarnation(f.sender_incarnation);
  h.setDtype(to_wire(f.type));
  write_shape(h.initShape(), f.shape);
  if (f.type == dtype::string && f.string_value.valid())
    write_tensor(h.initStringTensor(), f.string_value);
  h.setWireBf16(f.bf16);
  h.setPayloadBytes(f.payload_bytes);
  auto flat = capnp::messageToFlatArray(msg);
  auto bytes = flat.asBytes();
  uint32_t n = uint32_t(bytes.size());
  std::string out(reinterpret_cast<const char*>(&n), 4);
  out.append(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
  return out;
}

result<frame_header> decode_frame_header(const void* words, size_t bytes, frame_limits limits) {
  if (bytes == 0 || bytes % 8 != 0)
    return invalid_argument("frame header of " + std::to_string(bytes) +
                            " bytes (a positive multiple of 8 expected)");
  capnp::ReaderOptions opts;
  opts.traversalLimitInWords = bytes / 8 * 4 + 64;
  opts.nestingLimit = 16;
  frame_header f;
  std::string problem;
  KJ_IF_MAYBE(e, kj::runCatchingExceptions([&]() {
                kj::ArrayPtr<const capnp::word> w(static_cast<const capnp::word*>(words),
                                                  bytes / 8);
                capnp::FlatArrayMessageReader msg(w, opts);
                auto h = msg.getRoot<wire::TensorFrame>();
                f.step = h.getStepId();
                f.key = std::string(h.getKey().cStr(), h.getKey().size());
                f.sender_incarnation = h.getSenderIncarnation();
                f.payload_bytes = h.getPayloadBytes();
                f.bf16 = h.getWireBf16();
                auto type = from_wire(h.getDtype());
                auto sh = read_shape(h.getShape());
                if (!type || !sh) {
                  problem = (!type ? type.error() : sh.error()).message();
                  return;
                }
                f.type = *type;
                f.shape = *sh;
                if (*type == dtype::string) {
                  auto t = read_tensor(h.getStringTensor());
                  if (!t)
                    problem = t.error().message();
                  else if (f.payload_bytes != 0 || f.bf16)
                    problem = "a string tensor with a payload";
                  else
                    f.string_value = std::move(t).value();
                  return;
                }
                if (!sh->is_fully_defined()) {
                  problem = "shape " + sh->to_string() + " is not fully defined";
                  return;
                }
                if (f.bf16 && *type != dtype::f32) {
                  problem = "bf16 on the wire for a " + std::string(name(*type)) + " tensor";
                  return;
                }
                // At most 2^40 elements (read_shape checked) of at most 16 bytes: no overflow.
                uint64_t elements = uint64_t(sh->num_elements());
                uint64_t want = f.bf16 ? elements * 2 : elements * size_of(*type);
                if (f.payload_bytes != want || f.payload_bytes > limits.max_payload_bytes)
                  problem = "payload of " + std::to_string(f.payload_bytes) + " bytes for a " +
                            std::string(name(*type)) + " tensor of shape " + sh->to_string() +
                            " (" + std::to_string(want) + " expected, limit " +
                            std::to_string(limits.max_payload_bytes) + ")";
              })) {
    problem = std::string(e->getDescription().cStr());
  }
  if (!problem.empty())
    return invalid_argument(problem);
  return f;
}

} // namespace runnel::net
