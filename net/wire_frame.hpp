#pragma once
// The bytes a node reads from strangers before it trusts them, decoded by pure functions (the
// endpoint uses them, and so do the fuzzers in tests/fuzz):
//
//   connection preamble (16 bytes, then the token): "RUNNEL" and the wire version as two ASCII
//     digits ("RUNNEL02"), kind (1 RPC, 2 data, 3 step calls), three zero bytes, token length
//     (uint32 little-endian, at most 4096), token bytes;
//   data-plane frame: header length (uint32 LE, a multiple of 8), a Cap'n Proto TensorFrame
//     header (net/cluster.capnp), then `payload_bytes` of raw tensor data;
//   step message: header length (uint32 LE, a multiple of 8), a Cap'n Proto StepMessage, then
//     the payloads of its tensors in order (each described by a TensorFrame in the header).
//
//   auto p = net::parse_preamble(head);         // error: not a Runnel peer, or another version
//   auto h = net::decode_frame_header(words, n, limits);  // error names what is wrong
//   auto m = net::decode_step_header(words, n, limits);   // the message, its payloads to read

#include <cstddef>
#include <cstdint>
#include <string>

#include "runnel/net/endpoint.hpp"
#include "runnel/ops/core/tensor.hpp"

namespace runnel::net {

constexpr size_t preamble_bytes = 16;
constexpr uint32_t max_token_bytes = 4096;
/// The wire version this build speaks (the preamble's two digits). 2: step calls (conn_kind::step)
/// and this version check; 1: before them.
constexpr int wire_version = 2;
/// data_shm: a data connection whose sender offers a shared-memory ring (net/shm_ring.hpp): 16
/// more bytes follow the token, and the answer `ok` is followed by one more byte, 1 if the
/// receiver mapped it.
enum class conn_kind : uint8_t { rpc = 1, data = 2, step = 3, data_shm = 4 };

/// What the server answers a preamble with (one byte; bad_version is followed by one more, the
/// server's wire version).
enum class handshake_answer : uint8_t {
  ok = 0,
  bad_token = 1,
  bad_preamble = 2,
  busy = 3,
  bad_version = 4
};

struct preamble {
  conn_kind kind = conn_kind::rpc;
  uint32_t token_bytes = 0;
};

/// The 16 bytes at `head`; an error when they are not a Runnel preamble, and a
/// `failed_precondition` naming both versions when they are one of another wire version.
result<preamble> parse_preamble(const uint8_t* head);
/// The preamble and token a client sends.
std::string make_preamble(conn_kind kind, const std::string& token);
/// Compares a presented token with the expected one in time that depends only on their lengths.
bool tokens_equal(const uint8_t* presented, size_t presented_bytes, const std::string& expected);

struct frame_header {
  int64_t step = 0;
  std::string key;
  uint64_t sender_incarnation = 0;
  dtype type = dtype::invalid;
  runnel::shape shape;
  /// Raw bytes that follow the header (0 for string tensors, which travel in the header).
  uint64_t payload_bytes = 0;
  /// The payload is float32 sent as bfloat16.
  bool bf16 = false;
  /// A string tensor's value (other dtypes: invalid; the payload follows).
  tensor string_value;
  /// The payload is in the sender's shared-memory ring at this running position, not on the
  /// socket (data_shm connections only).
  bool in_shm = false;
  uint64_t shm_pos = 0;
};

struct frame_limits {
  uint64_t max_payload_bytes = uint64_t(16) << 30;
};

/// A frame's header as it goes on the wire, with its 4-byte length in front: for `h.type`
/// string, `h.string_value` travels in it; otherwise `h.payload_bytes` of payload must follow.
/// (The fields are written as given, checked or not: tests and fuzz seeds build bad ones too.)
std::string encode_frame_header(const frame_header& h);

/// Decodes a frame header of `bytes` bytes at `words` (8-byte aligned, `bytes` a multiple of 8).
/// Checks everything the payload read relies on: the dtype, a fully defined shape of at most
/// 2^40 elements, and a payload size that is exactly the shape's (and within the limit).
result<frame_header> decode_frame_header(const void* words, size_t bytes, frame_limits limits);

/// What travels on a step-call connection (net/cluster.capnp, StepMessage).
enum class step_call : uint8_t {
  run_graph,
  run_graph_reply,
  cleanup_step,
  heartbeat,
  heartbeat_reply,
  refused,
  master_run,
  master_run_reply
};

struct step_message {
  uint64_t call_id = 0;
  step_call kind = step_call::heartbeat;
  std::string handle;               ///< run_graph, master_run
  int64_t step_id = 0;              ///< run_graph, cleanup_step
  named_tensors tensors;            ///< the calls' feeds; the replies' fetched tensors
  std::vector<std::string> fetches; ///< run_graph, master_run
  std::vector<std::string> targets; ///< master_run
  bool trace = false;               ///< run_graph, master_run
  status error;                     ///< the replies, refused
  call_trace record;                ///< the reply to a traced call
};

/// A step message as it goes on the wire: its header (length in front), then the payloads of the
/// non-string tensors in order, unchanged (written from their buffers, not copied).
struct encoded_step {
  std::string head;
  std::vector<tensor> payloads;
};
encoded_step encode_step_message(const step_message& m);

/// A decoded step-message header: the message with its tensors named but not yet read (string
/// tensors whole), and what each tensor's payload is (frame_header: `key` the tensor's name).
struct step_header {
  step_message message;
  std::vector<frame_header> tensors;
};
/// Decodes a step message's header (as decode_frame_header: 8-byte aligned words); every
/// tensor's description is checked as a data-plane frame's is.
result<step_header> decode_step_header(const void* words, size_t bytes, frame_limits limits);

} // namespace runnel::net
