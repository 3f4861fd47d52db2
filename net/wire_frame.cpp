#include "runnel/net/wire_frame.hpp"

#include <cstring>

#include <capnp/serialize.h>
#include <kj/exception.h>

#include "net/cluster.capnp.h"
#include "runnel/net/endpoint_impl.hpp"
#include "runnel/net/tensor_codec.hpp"

namespace runnel::net {

namespace {
constexpr char magic[6] = {'R', 'U', 'N', 'N', 'E', 'L'};
} // namespace

result<preamble> parse_preamble(const uint8_t* head) {
  if (std::memcmp(head, magic, 6) != 0 || head[6] < '0' || head[6] > '9' || head[7] < '0' ||
      head[7] > '9')
    return invalid_argument("not a Runnel peer (bad preamble magic)");
  int version = (head[6] - '0') * 10 + (head[7] - '0');
  if (version != wire_version)
    return failed_precondition("the peer speaks Runnel wire version " + std::to_string(version) +
                               "; this node speaks version " + std::to_string(wire_version) +
                               " (run the same Runnel release on every node)");
  if (head[8] < uint8_t(conn_kind::rpc) || head[8] > uint8_t(conn_kind::data_shm))
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
  std::memcpy(out.data(), magic, 6);
  out[6] = char('0' + wire_version / 10);
  out[7] = char('0' + wire_version % 10);
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

namespace {

void write_frame_fields(wire::TensorFrame::Builder h, const frame_header& f) {
  h.setStepId(f.step);
  h.setKey(f.key);
  h.setSenderIncarnation(f.sender_incarnation);
  h.setDtype(to_wire(f.type));
  write_shape(h.initShape(), f.shape);
  if (f.type == dtype::string && f.string_value.valid())
    write_tensor(h.initStringTensor(), f.string_value);
  h.setWireBf16(f.bf16);
  h.setPayloadBytes(f.payload_bytes);
  h.setInShm(f.in_shm);
  h.setShmPos(f.shm_pos);
}

/// The words of `msg` with their length in front.
std::string framed(capnp::MessageBuilder& msg) {
  auto flat = capnp::messageToFlatArray(msg);
  auto bytes = flat.asBytes();
  uint32_t n = uint32_t(bytes.size());
  std::string out(reinterpret_cast<const char*>(&n), 4);
  out.append(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
  return out;
}

/// Reads and checks one tensor's description into `f`; returns what is wrong ("" if nothing).
std::string read_frame_fields(wire::TensorFrame::Reader h, frame_limits limits, frame_header& f) {
  f.step = h.getStepId();
  f.key = std::string(h.getKey().cStr(), h.getKey().size());
  f.sender_incarnation = h.getSenderIncarnation();
  f.payload_bytes = h.getPayloadBytes();
  f.bf16 = h.getWireBf16();
  f.in_shm = h.getInShm();
  f.shm_pos = h.getShmPos();
  auto type = from_wire(h.getDtype());
  auto sh = read_shape(h.getShape());
  if (!type || !sh)
    return (!type ? type.error() : sh.error()).message();
  f.type = *type;
  f.shape = *sh;
  if (*type == dtype::string) {
    auto t = read_tensor(h.getStringTensor());
    if (!t)
      return t.error().message();
    if (f.payload_bytes != 0 || f.bf16 || f.in_shm)
      return "a string tensor with a payload";
    f.string_value = std::move(t).value();
    return "";
  }
  if (!sh->is_fully_defined())
    return "shape " + sh->to_string() + " is not fully defined";
  if (f.bf16 && *type != dtype::f32)
    return "bf16 on the wire for a " + std::string(name(*type)) + " tensor";
  // At most 2^40 elements (read_shape checked) of at most 16 bytes: no overflow.
  uint64_t elements = uint64_t(sh->num_elements());
  uint64_t want = f.bf16 ? elements * 2 : elements * size_of(*type);
  if (f.payload_bytes != want || f.payload_bytes > limits.max_payload_bytes)
    return "payload of " + std::to_string(f.payload_bytes) + " bytes for a " +
           std::string(name(*type)) + " tensor of shape " + sh->to_string() + " (" +
           std::to_string(want) + " expected, limit " + std::to_string(limits.max_payload_bytes) +
           ")";
  return "";
}

/// Runs `read` on the flat message at `words`, turning a malformed message into an error.
template <class Root, class Read>
status read_message(const void* words, size_t bytes, const char* what, Read read) {
  if (bytes == 0 || bytes % 8 != 0)
    return invalid_argument(std::string(what) + " of " + std::to_string(bytes) +
                            " bytes (a positive multiple of 8 expected)");
  capnp::ReaderOptions opts;
  opts.traversalLimitInWords = bytes / 8 * 4 + 64;
  opts.nestingLimit = 16;
  std::string problem;
  KJ_IF_MAYBE(e, kj::runCatchingExceptions([&]() {
                kj::ArrayPtr<const capnp::word> w(static_cast<const capnp::word*>(words),
                                                  bytes / 8);
                capnp::FlatArrayMessageReader msg(w, opts);
                problem = read(msg.getRoot<Root>());
              })) {
    problem = std::string(e->getDescription().cStr());
  }
  if (!problem.empty())
    return invalid_argument(problem);
  return {};
}

} // namespace

std::string encode_frame_header(const frame_header& f) {
  capnp::MallocMessageBuilder msg;
  write_frame_fields(msg.initRoot<wire::TensorFrame>(), f);
  return framed(msg);
}

result<frame_header> decode_frame_header(const void* words, size_t bytes, frame_limits limits) {
  frame_header f;
  auto s = read_message<wire::TensorFrame>(
      words, bytes, "frame header",
      [&](wire::TensorFrame::Reader h) { return read_frame_fields(h, limits, f); });
  if (!s.ok())
    return s;
  return f;
}

// ---- step messages ---------------------------------------------------------------------------

namespace {

void write_tensors(capnp::List<wire::TensorFrame>::Builder list, const named_tensors& ts,
                   std::vector<tensor>& payloads) {
  for (size_t i = 0; i < ts.size(); ++i) {
    auto& [key, t] = ts[i];
    frame_header f;
    f.key = key;
    f.type = t.type();
    f.shape = t.shape();
    if (t.type() == dtype::string) {
      f.string_value = t;
    } else {
      f.payload_bytes = t.bytes();
      if (f.payload_bytes > 0)
        payloads.push_back(t);
    }
    write_frame_fields(list[uint(i)], f);
  }
}

void write_texts(capnp::List<capnp::Text>::Builder list, const std::vector<std::string>& texts) {
  for (size_t i = 0; i < texts.size(); ++i)
    list.set(uint(i), texts[i]);
}

std::string read_tensors(capnp::List<wire::TensorFrame>::Reader list, frame_limits limits,
                         step_header& out) {
  uint64_t total = 0;
  for (auto h : list) {
    frame_header f;
    if (auto problem = read_frame_fields(h, limits, f); !problem.empty())
      return "tensor '" + f.key + "': " + problem;
    if (f.bf16 || f.in_shm)
      return "tensor '" + f.key + "': neither bf16 nor shared memory is used in step calls";
    total += f.payload_bytes;
    if (total > limits.max_payload_bytes)
      return "the tensors' payloads exceed " + std::to_string(limits.max_payload_bytes) + " bytes";
    out.message.tensors.emplace_back(f.key, f.string_value);
    out.tensors.push_back(std::move(f));
  }
  return "";
}

} // namespace

encoded_step encode_step_message(const step_message& m) {
  capnp::MallocMessageBuilder msg;
  auto b = msg.initRoot<wire::StepMessage>();
  b.setCallId(m.call_id);
  encoded_step out;
  switch (m.kind) {
    case step_call::run_graph: {
      auto c = b.initRunGraph();
      c.setHandle(m.handle);
      c.setStepId(m.step_id);
      c.setTrace(m.trace);
      write_tensors(c.initFeeds(uint(m.tensors.size())), m.tensors, out.payloads);
      write_texts(c.initFetches(uint(m.fetches.size())), m.fetches);
      break;
    }
    case step_call::master_run: {
      auto c = b.initRun();
      c.setHandle(m.handle);
      c.setTrace(m.trace);
      write_tensors(c.initFeeds(uint(m.tensors.size())), m.tensors, out.payloads);
      write_texts(c.initFetches(uint(m.fetches.size())), m.fetches);
      write_texts(c.initTargets(uint(m.targets.size())), m.targets);
      break;
    }
    case step_call::run_graph_reply:
    case step_call::master_run_reply: {
      auto r = m.kind == step_call::run_graph_reply ? b.initRunGraphReply() : b.initRunReply();
      detail::write_status(r.initError(), m.error);
      write_tensors(r.initTensors(uint(m.tensors.size())), m.tensors, out.payloads);
      if (!m.record.nodes.empty() || m.record.received_ns != 0)
        detail::write_trace(r.initTrace(), m.record);
      break;
    }
    case step_call::cleanup_step:
      b.setCleanupStep(m.step_id);
      break;
    case step_call::heartbeat:
      b.setHeartbeat();
      break;
    case step_call::heartbeat_reply:
      b.setHeartbeatReply();
      break;
    case step_call::refused:
      detail::write_status(b.initRefused(), m.error);
      break;
  }
  out.head = framed(msg);
  return out;
}

result<step_header> decode_step_header(const void* words, size_t bytes, frame_limits limits) {
  step_header out;
  auto& m = out.message;
  auto s = read_message<wire::StepMessage>(
      words, bytes, "step message header", [&](wire::StepMessage::Reader r) -> std::string {
        m.call_id = r.getCallId();
        switch (r.which()) {
          case wire::StepMessage::RUN_GRAPH: {
            auto c = r.getRunGraph();
            m.kind = step_call::run_graph;
            m.handle = detail::to_std(c.getHandle());
            m.step_id = c.getStepId();
            m.trace = c.getTrace();
            m.fetches = detail::read_texts(c.getFetches());
            return read_tensors(c.getFeeds(), limits, out);
          }
          case wire::StepMessage::RUN: {
            auto c = r.getRun();
            m.kind = step_call::master_run;
            m.handle = detail::to_std(c.getHandle());
            m.trace = c.getTrace();
            m.fetches = detail::read_texts(c.getFetches());
            m.targets = detail::read_texts(c.getTargets());
            return read_tensors(c.getFeeds(), limits, out);
          }
          case wire::StepMessage::RUN_GRAPH_REPLY:
          case wire::StepMessage::RUN_REPLY: {
            bool graph = r.which() == wire::StepMessage::RUN_GRAPH_REPLY;
            auto c = graph ? r.getRunGraphReply() : r.getRunReply();
            m.kind = graph ? step_call::run_graph_reply : step_call::master_run_reply;
            m.error = detail::read_status(c.getError());
            if (c.hasTrace())
              m.record = detail::read_trace(c.getTrace());
            return read_tensors(c.getTensors(), limits, out);
          }
          case wire::StepMessage::CLEANUP_STEP:
            m.kind = step_call::cleanup_step;
            m.step_id = r.getCleanupStep();
            return "";
          case wire::StepMessage::HEARTBEAT:
            m.kind = step_call::heartbeat;
            return "";
          case wire::StepMessage::HEARTBEAT_REPLY:
            m.kind = step_call::heartbeat_reply;
            return "";
          case wire::StepMessage::REFUSED:
            m.kind = step_call::refused;
            m.error = detail::read_status(r.getRefused());
            return "";
        }
        return "unknown step message kind " + std::to_string(int(r.which()));
      });
  if (!s.ok())
    return s;
  return out;
}

} // namespace runnel::net
