// `runnel events cat`: TensorBoard event files (written by Runnel or TensorFlow) as text or JSON.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "runnel/apps/cli/cli_common.hpp"
#include "runnel/storage/tf/events.hpp"

namespace runnel::cli {

const char* events_usage =
    "usage: runnel events cat FILE|LOGDIR... [--json] [--tag TAG]\n"
    "Prints the events of TensorBoard event files (a LOGDIR: every events.out.tfevents.* file in\n"
    "it, by name). Text: one line per value (`step 1954  loss = 1.6406`), the file version and\n"
    "graphs, then a summary of the tags. With --json: one object per scalar value,\n"
    "  {\"step\": 1954, \"wall_time\": 1700000000.5, \"tag\": \"loss\", \"value\": 1.6406}\n"
    "--tag keeps the values of one tag.\n";

namespace {

const char* kind_name(summary_entry::kind k) {
  switch (k) {
    case summary_entry::kind::scalar:
      return "scalar";
    case summary_entry::kind::histogram:
      return "histogram";
    case summary_entry::kind::image:
      return "image";
    case summary_entry::kind::text:
      return "text";
    case summary_entry::kind::tensor:
      return "tensor";
    case summary_entry::kind::audio:
      return "audio";
    case summary_entry::kind::other:
      break;
  }
  return "other";
}

result<std::vector<std::string>> expand(const std::string& arg) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(arg, ec))
    return std::vector<std::string>{arg};
  std::vector<std::string> files;
  for (auto& e : fs::directory_iterator(arg, ec))
    if (e.path().filename().string().starts_with("events.out.tfevents."))
      files.push_back(e.path().string());
  if (ec)
    return unavailable("cannot list " + arg + ": " + ec.message());
  if (files.empty())
    return not_found(arg + " holds no events.out.tfevents.* files");
  std::sort(files.begin(), files.end());
  return files;
}

/// A JSON string literal: tags are plain ASCII almost always, written as they are; anything else
/// goes through the JSON library (escapes, invalid UTF-8 replaced).
void append_json_string(fmt::memory_buffer& out, const std::string& s) {
  bool plain = std::all_of(s.begin(), s.end(), [](char c) {
    return uint8_t(c) >= 0x20 && uint8_t(c) < 0x80 && c != '"' && c != '\\';
  });
  if (plain) {
    out.push_back('"');
    out.append(s);
    out.push_back('"');
  } else {
    out.append(nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
}

void put(fmt::memory_buffer& out, std::string_view s) { out.append(s); }

/// The shortest text that reads back as the value (as a float32 when it was stored as one).
void append_number(fmt::memory_buffer& out, const summary_entry& v) {
  if (v.float32)
    fmt::format_to(fmt::appender(out), "{}", float(v.value));
  else
    fmt::format_to(fmt::appender(out), "{}", v.value);
}

/// One block of records, decoded and formatted on a thread of its own.
struct block {
  std::vector<std::string> records;                   // copied out (compressed files), or
  std::vector<std::pair<uint64_t, uint64_t>> spans;   // where they lie in the mapped file
  std::vector<uint64_t> offsets;
  fmt::memory_buffer out;
  std::map<std::string, std::pair<std::string, int64_t>> tags; // tag -> kind, count
  int64_t events = 0, graphs = 0;
  status error; ///< the first record that is not an Event (output stops before it)
};

void format_block(block& b, const event_reader& reader, bool json, const std::string& only,
                  const std::string& file) {
  event e;
  auto& buf = b.out;
  size_t count = b.spans.empty() ? b.records.size() : b.spans.size();
  for (size_t r = 0; r < count; ++r) {
    std::string_view record;
    if (b.spans.empty()) {
      record = b.records[r];
    } else {
      auto v = reader.view(b.spans[r].first, b.spans[r].second);
      if (!v) {
        b.error = v.error();
        return;
      }
      record = *v;
    }
    if (auto s = decode_event(record, e); !s.ok()) {
      b.error = data_loss(file + ": the record at byte offset " + std::to_string(b.offsets[r]) +
                          ": " + s.message());
      return;
    }
    ++b.events;
    if (!e.file_version.empty() && !json)
      fmt::format_to(fmt::appender(buf), "  file_version {}\n", e.file_version);
    if (e.graph_nodes) {
      ++b.graphs;
      if (!json)
        fmt::format_to(fmt::appender(buf), "  step {}  graph ({} nodes)\n", e.step,
                       *e.graph_nodes);
    }
    if (!e.other.empty() && !json)
      fmt::format_to(fmt::appender(buf), "  step {}  {}\n", e.step, e.other);
    for (auto& v : e.values) {
      if (!only.empty() && v.tag != only)
        continue;
      auto& t = b.tags[v.tag];
      t.first = kind_name(v.what);
      ++t.second;
      if (json) {
        if (v.what != summary_entry::kind::scalar)
          continue;
        // Hand-written rather than through a JSON object: millions of lines per file.
        fmt::format_to(fmt::appender(buf), "{{\"step\":{},\"wall_time\":{},\"tag\":", e.step,
                       e.wall_time);
        append_json_string(buf, v.tag);
        put(buf, ",\"value\":");
        if (std::isfinite(v.value))
          append_number(buf, v);
        else // JSON has no NaN or infinity
          put(buf, std::isnan(v.value) ? "\"NaN\"" : v.value > 0 ? "\"Infinity\"" : "\"-Infinity\"");
        put(buf, "}\n");
      } else if (v.what == summary_entry::kind::scalar) {
        fmt::format_to(fmt::appender(buf), "  step {}  {} = ", e.step, v.tag);
        append_number(buf, v);
        buf.push_back('\n');
      } else {
        fmt::format_to(fmt::appender(buf), "  step {}  {}: {}\n", e.step, v.tag, v.description);
      }
    }
  }
}

/// Two threads that run submitted jobs (kept for the whole command: creating a thread per block
/// costs page faults and TLB shootdowns that showed in profiles).
class worker_pool {
public:
  explicit worker_pool(int n) {
    for (int i = 0; i < n; ++i)
      threads_.emplace_back([this] {
        for (;;) {
          std::function<void()> job;
          {
            std::unique_lock lock(m_);
            cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
            if (jobs_.empty())
              return;
            job = std::move(jobs_.front());
            jobs_.pop_front();
          }
          job();
        }
      });
  }
  ~worker_pool() {
    {
      std::lock_guard lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_)
      t.join();
  }
  std::future<void> submit(std::function<void()> f) {
    auto task = std::make_shared<std::packaged_task<void()>>(std::move(f));
    auto done = task->get_future();
    {
      std::lock_guard lock(m_);
      jobs_.emplace_back([task] { (*task)(); });
    }
    cv_.notify_one();
    return done;
  }

private:
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

/// Prints one file. Finding the records stays on this thread; blocks of records are checked,
/// decoded and formatted on two others and written in order. Finished blocks are reused, so
/// their buffers keep their memory.
status cat_file(const std::string& file, bool json, const std::string& only) {
  auto r = event_reader::open(file);
  if (!r)
    return r.error();
  constexpr size_t block_records = 16384, in_flight = 4;
  std::deque<std::pair<std::unique_ptr<block>, std::future<void>>> pending;
  std::vector<std::unique_ptr<block>> spare;
  worker_pool workers(2);
  std::map<std::string, std::pair<std::string, int64_t>> tags;
  int64_t events = 0, graphs = 0;
  status failure;
  auto finish_front = [&] {
    auto& [b, done] = pending.front();
    done.get();
    if (failure.ok()) {
      std::fwrite(b->out.data(), 1, b->out.size(), stdout);
      events += b->events;
      graphs += b->graphs;
      for (auto& [tag, kc] : b->tags) {
        tags[tag].first = kc.first;
        tags[tag].second += kc.second;
      }
      failure = b->error;
    }
    b->out.clear();
    b->tags.clear();
    b->events = b->graphs = 0;
    b->error = {};
    spare.push_back(std::move(b));
    pending.pop_front();
  };
  if (!json)
    std::printf("%s\n", file.c_str());
  bool more = true;
  while (more && failure.ok()) {
    std::unique_ptr<block> b;
    if (spare.empty()) {
      b = std::make_unique<block>();
    } else {
      b = std::move(spare.back());
      spare.pop_back();
    }
    size_t n = 0;
    if (r->mapped()) {
      // Only where the records are; the workers check and decode them in place.
      b->spans.resize(block_records);
      b->offsets.resize(block_records);
      for (; n < block_records; ++n) {
        auto got = r->next_span(b->spans[n].first, b->spans[n].second);
        if (!got || !*got) {
          if (!got)
            b->error = got.error();
          more = false;
          break;
        }
        b->offsets[n] = b->spans[n].first - 12; // the record starts with its 12-byte header
      }
      b->spans.resize(n);
    } else {
      b->records.resize(block_records);
      b->offsets.resize(block_records);
      for (; n < block_records; ++n) {
        auto got = r->next_record(b->records[n], b->offsets[n]);
        if (!got || !*got) {
          if (!got)
            b->error = got.error(); // reported after the records before it are printed
          more = false;
          break;
        }
      }
      b->records.resize(n);
    }
    block* raw = b.get();
    const event_reader& reader = *r;
    auto done = workers.submit([raw, &reader, json, &only, &file] {
      status read_error = raw->error;
      raw->error = {};
      format_block(*raw, reader, json, only, file);
      if (raw->error.ok())
        raw->error = read_error;
    });
    pending.emplace_back(std::move(b), std::move(done));
    if (pending.size() >= in_flight)
      finish_front();
  }
  while (!pending.empty())
    finish_front();
  std::fflush(stdout);
  if (!failure.ok())
    return failure;
  if (!json) {
    std::string line = "  " + std::to_string(events) + " events, graph: " +
                       (graphs ? "yes" : "no") + ", tags:";
    for (auto& [tag, kc] : tags)
      line += " " + tag + " (" + kc.first + ", " + std::to_string(kc.second) + ")";
    std::printf("%s\n", line.c_str());
  }
  return {};
}

} // namespace

int events_cat(const std::vector<std::string>& args) {
  if (wants_help(args)) {
    std::fputs(events_usage, stdout);
    return 0;
  }
  std::vector<std::string> inputs;
  bool json = false;
  std::string only;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--json")
      json = true;
    else if (args[i] == "--tag" && i + 1 < args.size())
      only = args[++i];
    else if (!args[i].empty() && args[i][0] != '-')
      inputs.push_back(args[i]);
    else
      return usage_error("events cat: unexpected argument '" + args[i] + "'", events_usage);
  }
  if (inputs.empty())
    return usage_error("events cat needs a FILE or LOGDIR", events_usage);
  int bad = 0;
  for (auto& input : inputs) {
    auto files = expand(input);
    if (!files) {
      ++bad;
      std::fprintf(stderr, "runnel: %s\n", files.error().to_string().c_str());
      continue;
    }
    for (auto& file : *files)
      if (auto s = cat_file(file, json, only); !s.ok()) {
        ++bad;
        std::fprintf(stderr, "runnel: %s\n", s.to_string().c_str());
      }
  }
  return bad ? 1 : 0;
}

} // namespace runnel::cli
