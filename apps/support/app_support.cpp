#include "runnel/apps/support/app_support.hpp"

#include <unistd.h>

#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "runnel/ops/cpu/cpu_device.hpp"

namespace runnel::apps {

result<idx_data> read_idx(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb"); // reads plain files too
  if (!f)
    return not_found("cannot open " + path + ": " + std::strerror(errno));
  auto read = [&](void* dst, size_t n) { return gzread(f, dst, unsigned(n)) == int(n); };
  uint8_t header[4];
  if (!read(header, 4)) {
    gzclose(f);
    return data_loss(path + ": too short for an idx header");
  }
  if (header[0] != 0 || header[1] != 0 || header[2] != 0x08) {
    gzclose(f);
    return data_loss(path + ": not an idx file of unsigned bytes (magic " +
                     std::to_string(header[2]) + ")");
  }
  idx_data d;
  int64_t count = 1;
  for (int i = 0; i < header[3]; ++i) {
    uint8_t b[4];
    if (!read(b, 4)) {
      gzclose(f);
      return data_loss(path + ": truncated in the dimensions");
    }
    int64_t dim = (int64_t(b[0]) << 24) | (b[1] << 16) | (b[2] << 8) | b[3];
    d.dims.push_back(dim);
    count *= dim;
  }
  if (count > (int64_t(1) << 32)) {
    gzclose(f);
    return data_loss(path + ": implausible dimensions");
  }
  d.bytes.resize(size_t(count));
  int got = gzread(f, d.bytes.data(), unsigned(count));
  gzclose(f);
  if (got != int(count))
    return data_loss(path + ": truncated: expected " + std::to_string(count) +
                     " bytes of data, found " + std::to_string(std::max(got, 0)));
  return d;
}

result<image_set> load_image_set(const std::string& images_path, const std::string& labels_path,
                                 int64_t limit) {
  RUNNEL_ASSIGN_OR_RETURN(auto images, read_idx(images_path));
  RUNNEL_ASSIGN_OR_RETURN(auto labels, read_idx(labels_path));
  if (images.dims.size() != 3 || labels.dims.size() != 1 || images.dims[0] != labels.dims[0])
    return invalid_argument(images_path + " and " + labels_path +
                            " do not hold matching images [n,rows,cols] and labels [n]");
  int64_t n = images.dims[0], pixels = images.dims[1] * images.dims[2];
  if (limit > 0)
    n = std::min(n, limit);
  image_set s{tensor(dtype::f32, shape{n, pixels}), tensor(dtype::i32, shape{n})};
  float* x = s.images.data<float>();
  for (int64_t i = 0; i < n * pixels; ++i)
    x[i] = float(images.bytes[size_t(i)]) / 255.f;
  for (int64_t i = 0; i < n; ++i)
    s.labels.data<int32_t>()[i] = labels.bytes[size_t(i)];
  return s;
}

tensor gather_rows(const tensor& t, const std::vector<int64_t>& order, int64_t begin, int64_t end) {
  std::vector<int64_t> dims = t.shape().dims();
  int64_t row = t.dim(0) == 0 ? 0 : t.num_elements() / t.dim(0);
  dims[0] = end - begin;
  tensor out(t.type(), shape(dims));
  size_t bytes = size_t(row) * size_of(t.type());
  auto* src = static_cast<const char*>(t.raw_data());
  auto* dst = static_cast<char*>(out.raw_data());
  for (int64_t i = begin; i < end; ++i)
    std::memcpy(dst + size_t(i - begin) * bytes, src + size_t(order[size_t(i)]) * bytes, bytes);
  return out;
}

flags::flags(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) {
      positional_.push_back(a);
      continue;
    }
    auto eq = a.find('=');
    if (eq != std::string::npos) {
      values_[a.substr(2, eq - 2)] = a.substr(eq + 1);
    } else if (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) {
      values_[a.substr(2)] = argv[++i];
    } else {
      values_[a.substr(2)] = "";
    }
  }
}

std::string flags::get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

result<int64_t> flags::get_int(const std::string& name, int64_t fallback) const {
  auto it = values_.find(name);
  if (it == values_.end())
    return fallback;
  char* end = nullptr;
  long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end)
    return invalid_argument("--" + name + " needs an integer, got '" + it->second + "'");
  return int64_t(v);
}

result<double> flags::get_double(const std::string& name, double fallback) const {
  auto it = values_.find(name);
  if (it == values_.end())
    return fallback;
  char* end = nullptr;
  double v = std::strtod(it->second.c_str(), &end);
  if (it->second.empty() || *end)
    return invalid_argument("--" + name + " needs a number, got '" + it->second + "'");
  return v;
}

status flags::check(const std::vector<std::string>& known) const {
  for (auto& [k, v] : values_)
    if (std::find(known.begin(), known.end(), k) == known.end())
      return invalid_argument("unknown flag --" + k + " (see --help)");
  if (!positional_.empty())
    return invalid_argument("unexpected argument '" + positional_[0] + "' (see --help)");
  return {};
}

int app_main(const char* app, int argc, char** argv, const char* usage,
             const std::vector<std::string>& known_flags, int (*run)(const flags&)) {
  reexec_with_better_blas_core(argv);
  flags f(argc, argv);
  if (f.has("help")) {
    std::fputs(usage, stdout);
    std::fputs("  --verbose                informational lines on stderr (the GPUs found, ...)\n",
               stdout);
    return 0;
  }
  if (f.has("verbose"))
    set_verbose_logging(true);
  std::vector<std::string> known = known_flags;
  known.push_back("verbose");
  status s = f.check(known);
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n%s", app, s.message().c_str(), usage);
    return 2;
  }
  try {
    return run(f);
  } catch (const runnel::error& e) {
    std::fprintf(stderr, "\n%s: %s\n", app, e.what());
    return 1;
  } catch (const std::exception& e) { // a file system error, memory: said, not an abort
    std::fprintf(stderr, "\n%s: %s\n", app, e.what());
    return 1;
  }
}

progress_line::progress_line(int64_t total_steps, int epochs, std::string unit)
    : start_(std::chrono::steady_clock::now()), last_(start_), total_steps_(total_steps),
      epochs_(epochs), unit_(std::move(unit)), terminal_(::isatty(STDERR_FILENO) == 1) {
  if (const char* every = std::getenv("RUNNEL_PROGRESS_EVERY"))
    log_every_s_ = std::max(0.0, std::atof(every));
}

void progress_line::start_epoch(int64_t step, int64_t examples) {
  start_step_ = step;
  start_examples_ = examples;
  start_ = std::chrono::steady_clock::now();
  start_wait_ = input_wait_ ? input_wait_() : 0;
  epoch_ = -1; // the next update's epoch
}

void progress_line::set_input_wait(std::function<double()> wait_seconds) {
  input_wait_ = std::move(wait_seconds);
  start_wait_ = input_wait_ ? input_wait_() : 0;
}

void progress_line::update(int epoch, int64_t step, double loss, double accuracy,
                           int64_t examples) {
  auto now = std::chrono::steady_clock::now();
  if (start_step_ < 0 || (epoch_ >= 0 && epoch != epoch_)) { // no start_epoch: count from here
    start_step_ = step;
    start_examples_ = examples;
    start_ = now;
    start_wait_ = input_wait_ ? input_wait_() : 0;
  }
  epoch_ = epoch;
  latest_ = {epoch, step, loss, accuracy, examples, now};
  have_latest_ = true;
  // A log file (stderr not a terminal) gets one line per epoch, from finish(), not a stream of
  // carriage returns; with RUNNEL_PROGRESS_EVERY, also a whole line that often.
  if (!terminal_) {
    if (log_every_s_ > 0 && now - last_ >= std::chrono::duration<double>(log_every_s_)) {
      last_ = now;
      draw("");
      std::fprintf(stderr, "\n");
      dirty_ = false;
    }
    return;
  }
  if (now - last_ < std::chrono::milliseconds(200) && step != total_steps_) {
    pending_ = true;
    return;
  }
  last_ = now;
  draw("\r");
}

double progress_line::epoch_seconds() const {
  return latest_.when > start_ ? std::chrono::duration<double>(latest_.when - start_).count() : 0;
}

double progress_line::epoch_rate() const {
  double secs = epoch_seconds();
  return secs > 0 ? double(latest_.examples - start_examples_) / secs : 0;
}

std::string format_seconds(double seconds) {
  char buf[32];
  if (seconds < 1)
    std::snprintf(buf, sizeof buf, "%.0f ms", seconds * 1e3);
  else if (seconds < 100)
    std::snprintf(buf, sizeof buf, "%.1f s", seconds);
  else
    std::snprintf(buf, sizeof buf, "%.0f s", seconds);
  return buf;
}

void progress_line::draw(const char* prefix) {
  auto& p = latest_;
  double secs = std::chrono::duration<double>(p.when - start_).count();
  double rate = secs > 0 ? double(p.examples - start_examples_) / secs : 0;
  double step_rate = secs > 0 ? double(p.step - start_step_) / secs : 0;
  double eta = step_rate > 0 ? double(total_steps_ - p.step) / step_rate : 0;
  char acc[32] = "";
  if (p.accuracy >= 0) // a negative accuracy: the model has none to show
    std::snprintf(acc, sizeof acc, "  acc %.4f", p.accuracy);
  char input[32] = "";
  double waited = input_wait_ ? input_wait_() : -1;
  if (waited >= 0 && secs > 0)
    std::snprintf(input, sizeof input, "  input %.0f%%",
                  std::clamp(100 * (waited - start_wait_) / secs, 0.0, 100.0));
  std::fprintf(stderr, "%s  epoch %d/%d  step %lld/%lld  loss %.4f%s  %.0f %s/s%s  eta %.0fs   ",
               prefix, p.epoch, epochs_, static_cast<long long>(p.step),
               static_cast<long long>(total_steps_), p.loss, acc, rate, unit_.c_str(), input, eta);
  std::fflush(stderr);
  dirty_ = true;
  pending_ = false;
}

void progress_line::finish() {
  // The epoch's last state, even when the update that carried it was not drawn.
  if (have_latest_ && (pending_ || !terminal_))
    draw(terminal_ ? "\r" : "");
  if (dirty_)
    std::fprintf(stderr, "\n");
  dirty_ = false;
  have_latest_ = false; // latest_ stays: epoch_seconds() and epoch_rate() still read it
}

status write_curve_csv(const std::string& path, const std::vector<curve_point>& points) {
  std::ofstream out(path);
  if (!out)
    return unavailable("cannot write " + path);
  out << "epoch,step,train_loss,train_accuracy,test_accuracy\n";
  for (auto& p : points) {
    out << p.epoch << ',' << p.step << ',' << p.train_loss << ',' << p.train_accuracy << ',';
    if (p.test_accuracy >= 0)
      out << p.test_accuracy;
    out << '\n';
  }
  return out ? status{} : unavailable("writing " + path + " failed");
}

/// A round tick step (1, 2 or 5 times a power of ten) giving about `ticks` intervals over span.
double nice_step(double span, int ticks) {
  if (span <= 0)
    return 1;
  double raw = span / ticks, mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag)
      return m * mag;
  return 10 * mag;
}

status write_curve_svg(const std::string& path, const std::string& title,
                       const std::vector<curve_point>& points) {
  const double w = 640, h = 400, left = 60, right = 60, top = 40, bottom = 50;
  double pw = w - left - right, ph = h - top - bottom;
  int64_t max_step = 1;
  double max_loss = 1e-9;
  for (auto& p : points) {
    max_step = std::max(max_step, p.step);
    max_loss = std::max(max_loss, p.train_loss);
  }
  auto x = [&](int64_t s) { return left + pw * double(s) / double(max_step); };
  auto y_loss = [&](double l) { return top + ph * (1 - l / max_loss); };
  auto y_acc = [&](double a) { return top + ph * (1 - a); };
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << h
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << w / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" << title
      << "</text>\n"
      << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << pw << "\" height=\"" << ph
      << "\" fill=\"none\" stroke=\"#888\"/>\n";
  // Loss axis (left): round ticks up to a round maximum; accuracy (right): 0 to 1 by 0.2.
  double loss_step = nice_step(max_loss, 4);
  max_loss = std::ceil(max_loss / loss_step - 1e-9) * loss_step;
  for (double v = 0; v <= max_loss + loss_step / 2; v += loss_step) {
    double yy = y_loss(v);
    svg << "<text x=\"" << left - 6 << "\" y=\"" << yy + 4
        << "\" text-anchor=\"end\" fill=\"#c0392b\">" << v << "</text>\n"
        << "<line x1=\"" << left << "\" x2=\"" << left + pw << "\" y1=\"" << yy << "\" y2=\"" << yy
        << "\" stroke=\"#eee\"/>\n";
  }
  for (int i = 0; i <= 5; ++i)
    svg << "<text x=\"" << left + pw + 6 << "\" y=\"" << y_acc(i / 5.0) + 4
        << "\" fill=\"#2471a3\">" << i / 5.0 << "</text>\n";
  // Step axis: round, labelled ticks.
  double step_tick = nice_step(double(max_step), 5);
  for (double st = 0; st <= double(max_step) + 1e-9; st += step_tick) {
    double xx = x(int64_t(st));
    svg << "<line x1=\"" << xx << "\" x2=\"" << xx << "\" y1=\"" << top + ph << "\" y2=\""
        << top + ph + 5 << "\" stroke=\"#888\"/>\n"
        << "<text x=\"" << xx << "\" y=\"" << top + ph + 18 << "\" text-anchor=\"middle\">"
        << int64_t(st) << "</text>\n";
  }
  auto polyline = [&](auto value, const char* color, bool test) {
    svg << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\" points=\"";
    for (auto& p : points)
      if (!test || p.test_accuracy >= 0)
        svg << x(p.step) << ',' << value(p) << ' ';
    svg << "\"/>\n";
    if (test)
      for (auto& p : points)
        if (p.test_accuracy >= 0)
          svg << "<circle cx=\"" << x(p.step) << "\" cy=\"" << value(p) << "\" r=\"3\" fill=\""
              << color << "\"/>\n";
  };
  polyline([&](const curve_point& p) { return y_loss(p.train_loss); }, "#c0392b", false);
  polyline([&](const curve_point& p) { return y_acc(p.train_accuracy); }, "#2471a3", false);
  polyline([&](const curve_point& p) { return y_acc(p.test_accuracy); }, "#27ae60", true);
  svg << "<text x=\"" << w / 2 << "\" y=\"" << h - 12 << "\" text-anchor=\"middle\">step</text>\n"
      << "<text x=\"" << left << "\" y=\"" << h - 12 << "\" fill=\"#c0392b\">train loss</text>\n"
      << "<text x=\"" << left + pw - 170 << "\" y=\"" << h - 12
      << "\" fill=\"#2471a3\">train acc</text>\n"
      << "<text x=\"" << left + pw - 90 << "\" y=\"" << h - 12
      << "\" fill=\"#27ae60\">test acc</text>\n</svg>\n";
  std::ofstream out(path);
  if (!out)
    return unavailable("cannot write " + path);
  out << svg.str();
  return out ? status{} : unavailable("writing " + path + " failed");
}

result<std::string> read_token(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return not_found("cannot read auth token file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string token = ss.str();
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r'))
    token.pop_back();
  if (token.empty())
    return invalid_argument("auth token file '" + path + "' is empty");
  return token;
}

namespace {
std::atomic<int> stop_signal{0};
void on_stop_signal(int sig) {
  stop_signal = sig;
}
} // namespace

void serve_until_signal(int task) {
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  std::fprintf(stderr, "ps task %d: serving the parameters; stop with Ctrl-C\n", task);
  while (stop_signal.load() == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

} // namespace runnel::apps
