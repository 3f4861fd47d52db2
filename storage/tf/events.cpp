#include "runnel/storage/tf/events.hpp"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <google/protobuf/arena.h>
#include <google/protobuf/stubs/logging.h>

#include "runnel/storage/record_file.hpp"
#include "runnel/storage/tf/tf_graph.hpp"
#include "runnel/storage/tf/tf_types.hpp"

namespace runnel {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

} // namespace

struct summary_writer::impl {
  std::string path;
  record_writer out;
  double flush_seconds;
  std::chrono::steady_clock::time_point last_flush = std::chrono::steady_clock::now();

  status write(tensorflow::Event& e) {
    if (e.wall_time() == 0)
      e.set_wall_time(now_seconds());
    std::string bytes;
    e.SerializeToString(&bytes);
    RUNNEL_RETURN_IF_ERROR(out.write(bytes));
    auto t = std::chrono::steady_clock::now();
    if (std::chrono::duration<double>(t - last_flush).count() >= flush_seconds) {
      last_flush = t;
      return out.flush();
    }
    return {};
  }
};

summary_writer::summary_writer(std::unique_ptr<impl> i) : impl_(std::move(i)) {}
summary_writer::summary_writer(summary_writer&&) noexcept = default;
summary_writer& summary_writer::operator=(summary_writer&&) noexcept = default;
summary_writer::~summary_writer() {
  if (impl_)
    (void)impl_->out.close();
}

result<summary_writer> summary_writer::open(const std::string& logdir, double flush_seconds) {
  std::error_code ec;
  std::filesystem::create_directories(logdir, ec);
  if (ec)
    return unavailable("cannot create the log folder " + logdir + ": " + ec.message());
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  // Several writers in one second (or one process) get distinct names, as TensorFlow's do with
  // their suffixes.
  static std::atomic<int> serial{0};
  std::string path = logdir + "/events.out.tfevents." + std::to_string(int64_t(now_seconds())) +
                     "." + host;
  if (int n = serial++; n > 0 || std::filesystem::exists(path))
    path += "." + std::to_string(::getpid()) + "." + std::to_string(n);
  auto w = record_writer::open(path);
  if (!w)
    return w.error();
  auto d = std::make_unique<impl>(impl{path, std::move(w).value(), flush_seconds});
  tensorflow::Event first;
  first.set_file_version("brain.Event:2");
  RUNNEL_RETURN_IF_ERROR(d->write(first));
  RUNNEL_RETURN_IF_ERROR(d->out.flush());
  return summary_writer(std::move(d));
}

const std::string& summary_writer::path() const { return impl_->path; }

status summary_writer::add_summary(std::string_view serialized, int64_t step) {
  tensorflow::Event e;
  e.set_step(step);
  if (!e.mutable_summary()->ParseFromArray(serialized.data(), int(serialized.size())))
    return invalid_argument("add_summary: the " + std::to_string(serialized.size()) +
                            " bytes are not a serialized Summary (the output of a summary op)");
  return impl_->write(e);
}

status summary_writer::add_scalar(std::string_view tag, double value, int64_t step) {
  tensorflow::Event e;
  e.set_step(step);
  auto* v = e.mutable_summary()->add_value();
  v->set_tag(std::string(tag));
  v->set_simple_value(float(value));
  return impl_->write(e);
}

status summary_writer::add_graph(const graph& g) {
  tensorflow::Event e;
  e.set_graph_def(export_tf_graph_def(g));
  RUNNEL_RETURN_IF_ERROR(impl_->write(e));
  return impl_->out.flush();
}

status summary_writer::flush() { return impl_->out.flush(); }

status summary_writer::close() { return impl_->out.close(); }

// ---- reading ----

struct event_reader::impl {
  std::string path;
  record_reader in;
  std::string record;
};

event_reader::event_reader(std::unique_ptr<impl> i) : impl_(std::move(i)) {}
event_reader::event_reader(event_reader&&) noexcept = default;
event_reader& event_reader::operator=(event_reader&&) noexcept = default;
event_reader::~event_reader() = default;

result<event_reader> event_reader::open(const std::string& path) {
  auto r = record_reader::open(path);
  if (!r)
    return r.error();
  return event_reader(std::make_unique<impl>(impl{path, std::move(r).value(), {}}));
}

namespace {

std::string number(double v) { return fmt::format("{:.6g}", v); }

void entry_of(const tensorflow::Summary::Value& v, summary_entry& e) {
  e.tag = v.tag();
  e.description.clear();
  e.float32 = false;
  e.what = summary_entry::kind::other;
  const std::string& plugin = v.metadata().plugin_data().plugin_name();
  switch (v.value_case()) {
    case tensorflow::Summary::Value::kSimpleValue:
      e.what = summary_entry::kind::scalar;
      e.value = v.simple_value();
      e.float32 = true;
      break;
    case tensorflow::Summary::Value::kHisto:
      e.what = summary_entry::kind::histogram;
      e.description = "histogram of " + number(v.histo().num()) + " values in [" +
                      number(v.histo().min()) + ", " + number(v.histo().max()) + "]";
      break;
    case tensorflow::Summary::Value::kImage:
      e.what = summary_entry::kind::image;
      e.description = "image " + std::to_string(v.image().width()) + "x" +
                      std::to_string(v.image().height()) + "x" +
                      std::to_string(v.image().colorspace()) + ", " +
                      std::to_string(v.image().encoded_image_string().size()) + " bytes";
      break;
    case tensorflow::Summary::Value::kAudio:
      e.what = summary_entry::kind::audio;
      e.description = "audio";
      break;
    case tensorflow::Summary::Value::kTensor: {
      auto t = tf::from_proto(v.tensor());
      // TensorFlow 2 writes scalars as rank-0 tensors for the "scalars" plugin.
      if (t && t->type() != dtype::string && t->num_elements() == 1 &&
          (plugin == "scalars" || plugin.empty())) {
        e.what = summary_entry::kind::scalar;
        e.value = element_as_double(*t, 0);
        e.float32 = t->type() == dtype::f32;
      } else if (t && t->type() == dtype::string) {
        e.what = plugin == "text" ? summary_entry::kind::text : summary_entry::kind::tensor;
        e.description = (plugin.empty() ? "strings " : plugin + " ") + t->to_string(3);
      } else {
        e.what = summary_entry::kind::tensor;
        e.description = t ? (plugin.empty() ? "" : plugin + " ") + t->to_string(3)
                          : "tensor (" + t.error().message() + ")";
      }
      break;
    }
    default:
      e.description = "no value";
  }
}

} // namespace

result<bool> event_reader::next_record(std::string& record, uint64_t& offset) {
  offset = impl_->in.offset();
  return impl_->in.next(record);
}

bool event_reader::mapped() const { return impl_->in.mapped(); }

result<bool> event_reader::next_span(uint64_t& data_offset, uint64_t& length) {
  return impl_->in.next_span(data_offset, length);
}

result<std::string_view> event_reader::view(uint64_t data_offset, uint64_t length) const {
  return impl_->in.checked_view(data_offset, length);
}

result<bool> event_reader::next(event& out) {
  auto& d = *impl_;
  uint64_t at = 0;
  auto more = next_record(d.record, at);
  if (!more || !*more)
    return more;
  if (auto s = decode_event(d.record, out); !s.ok())
    return data_loss(d.path + ": the record at byte offset " + std::to_string(at) + ": " +
                     s.message());
  return true;
}

namespace {

// A fast path for the commonest event, a summary of simple_value scalars: decoded straight from
// the wire format (field numbers of event.proto and summary.proto), with protobuf's parser kept
// for everything else. Event files hold millions of these; the generic parse costs several
// times more.
bool read_varint(const uint8_t*& p, const uint8_t* end, uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64 && p < end; shift += 7) {
    uint8_t b = *p++;
    v |= uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80))
      return true;
  }
  return false;
}

bool decode_scalar_value(const uint8_t* p, const uint8_t* end, summary_entry& e) {
  bool have_value = false;
  e.tag.clear();
  while (p < end) {
    uint64_t key, len;
    if (!read_varint(p, end, key))
      return false;
    if (key == (1 << 3 | 2)) { // tag
      if (!read_varint(p, end, len) || len > uint64_t(end - p))
        return false;
      e.tag.assign(reinterpret_cast<const char*>(p), size_t(len));
      p += len;
    } else if (key == (2 << 3 | 5)) { // simple_value
      if (end - p < 4)
        return false;
      float f;
      std::memcpy(&f, p, 4);
      p += 4;
      e.value = f;
      have_value = true;
    } else if (key == (7 << 3 | 2)) { // node_name: not shown
      if (!read_varint(p, end, len) || len > uint64_t(end - p))
        return false;
      p += len;
    } else {
      return false; // metadata, histograms, images, tensors: the generic parser
    }
  }
  if (!have_value)
    return false;
  e.what = summary_entry::kind::scalar;
  e.float32 = true;
  e.description.clear();
  return true;
}

bool decode_scalar_event(std::string_view record, event& out) {
  auto* p = reinterpret_cast<const uint8_t*>(record.data());
  auto* end = p + record.size();
  double wall_time = 0;
  uint64_t step = 0;
  size_t n = 0;
  bool summary = false;
  while (p < end) {
    uint64_t key, len;
    if (!read_varint(p, end, key))
      return false;
    if (key == (1 << 3 | 1)) { // wall_time
      if (end - p < 8)
        return false;
      std::memcpy(&wall_time, p, 8);
      p += 8;
    } else if (key == (2 << 3 | 0)) { // step
      if (!read_varint(p, end, step))
        return false;
    } else if (key == (5 << 3 | 2) && !summary) { // summary
      summary = true;
      if (!read_varint(p, end, len) || len > uint64_t(end - p))
        return false;
      const uint8_t* q = p;
      const uint8_t* stop = p + len;
      p = stop;
      while (q < stop) {
        uint64_t vkey, vlen;
        if (!read_varint(q, stop, vkey) || vkey != (1 << 3 | 2) || !read_varint(q, stop, vlen) ||
            vlen > uint64_t(stop - q))
          return false;
        if (out.values.size() <= n)
          out.values.resize(n + 1);
        if (!decode_scalar_value(q, q + vlen, out.values[n]))
          return false;
        ++n;
        q += vlen;
      }
    } else {
      return false;
    }
  }
  if (!summary)
    return false;
  out.wall_time = wall_time;
  out.step = int64_t(step);
  out.file_version.clear();
  out.graph_nodes.reset();
  out.other.clear();
  out.values.resize(n);
  return true;
}

} // namespace

status decode_event(std::string_view record, event& out) {
  if (decode_scalar_event(record, out))
    return {};
  // An arena per thread, reset every few thousand events: an Event's summary (a oneof member)
  // is freed and allocated again by every parse otherwise.
  thread_local google::protobuf::Arena arena;
  thread_local int parsed = 0;
  if (++parsed % 4096 == 0)
    arena.Reset();
  auto& e = *google::protobuf::Arena::CreateMessage<tensorflow::Event>(&arena);
  google::protobuf::LogSilencer quiet; // a tag that is not UTF-8 is logged by protobuf otherwise
  if (!e.ParseFromArray(record.data(), int(record.size())))
    return data_loss("not an Event");
  out.wall_time = e.wall_time();
  out.step = e.step();
  out.file_version.clear();
  out.graph_nodes.reset();
  out.other.clear();
  size_t n = 0;
  switch (e.what_case()) {
    case tensorflow::Event::kFileVersion:
      out.file_version = e.file_version();
      break;
    case tensorflow::Event::kGraphDef: {
      tensorflow::GraphDef gd;
      if (!gd.ParseFromString(e.graph_def()))
        return data_loss("its graph is not a GraphDef");
      out.graph_nodes = gd.node_size();
      break;
    }
    case tensorflow::Event::kSummary:
      // Entries are overwritten in place, keeping their strings' memory.
      n = size_t(e.summary().value_size());
      if (out.values.size() < n)
        out.values.resize(n);
      for (size_t i = 0; i < n; ++i)
        entry_of(e.summary().value(int(i)), out.values[i]);
      break;
    case tensorflow::Event::kSessionLog:
      out.other = "session_log";
      break;
    case tensorflow::Event::kLogMessage:
      out.other = "log_message: " + e.log_message().message();
      break;
    case tensorflow::Event::kTaggedRunMetadata:
      out.other = "run_metadata " + e.tagged_run_metadata().tag();
      break;
    case tensorflow::Event::kMetaGraphDef:
      out.other = "meta_graph_def";
      break;
    case tensorflow::Event::WHAT_NOT_SET:
      out.other = "empty";
      break;
  }
  out.values.resize(n);
  return {};
}

} // namespace runnel
