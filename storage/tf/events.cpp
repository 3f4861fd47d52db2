#include "storage/tf/events.hpp"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>

#include "storage/record_file.hpp"
#include "storage/tf/tf_graph.hpp"
#include "storage/tf/tf_types.hpp"

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

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

summary_entry entry_of(const tensorflow::Summary::Value& v) {
  summary_entry e;
  e.tag = v.tag();
  const std::string& plugin = v.metadata().plugin_data().plugin_name();
  switch (v.value_case()) {
    case tensorflow::Summary::Value::kSimpleValue:
      e.what = summary_entry::kind::scalar;
      e.value = v.simple_value();
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
  return e;
}

} // namespace

result<bool> event_reader::next(event& out) {
  auto& d = *impl_;
  uint64_t at = d.in.offset();
  auto more = d.in.next(d.record);
  if (!more)
    return more.error();
  if (!*more)
    return false;
  tensorflow::Event e;
  if (!e.ParseFromString(d.record))
    return data_loss(d.path + ": the record at byte offset " + std::to_string(at) +
                     " is not an Event");
  out = event{};
  out.wall_time = e.wall_time();
  out.step = e.step();
  switch (e.what_case()) {
    case tensorflow::Event::kFileVersion:
      out.file_version = e.file_version();
      break;
    case tensorflow::Event::kGraphDef: {
      tensorflow::GraphDef gd;
      if (!gd.ParseFromString(e.graph_def()))
        return data_loss(d.path + ": the graph in the event at byte offset " +
                         std::to_string(at) + " is not a GraphDef");
      out.graph_nodes = gd.node_size();
      break;
    }
    case tensorflow::Event::kSummary:
      for (auto& v : e.summary().value())
        out.values.push_back(entry_of(v));
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
  return true;
}

} // namespace runnel
