// `runnel ckpt`: inspect, verify and convert checkpoints, in HDF5 (Runnel's, Keras weights) or
// TensorFlow's V2 format (a prefix with .index and .data-* files).
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "runnel/apps/cli/cli_common.hpp"
#include "runnel/storage/checkpoint.hpp"
#include "runnel/storage/tf/tf_checkpoint.hpp"

namespace runnel::cli {

const char* ckpt_usage =
    "usage: runnel ckpt inspect FILE|PREFIX|DIR [--values] [--json]\n"
    "       runnel ckpt verify DIR\n"
    "       runnel ckpt convert FROM TO\n"
    "Checkpoints are HDF5 files (written by Runnel, or any HDF5 weights file) or TensorFlow's V2\n"
    "checkpoints, named by their prefix (model.ckpt-1000 for model.ckpt-1000.index and\n"
    "model.ckpt-1000.data-00000-of-00001) or by the .index file.\n"
    "inspect lists the variables: name, dtype and shape, and the global step (HDF5: the file's\n"
    "attribute; TensorFlow: its `global_step` tensor). With --values, also min, max, mean,\n"
    "standard deviation and the first values of each. DIR: the latest checkpoint its `checkpoint`\n"
    "state file names. Tensors of types Runnel cannot read are listed as such. --json: one\n"
    "object with the variables' names, dtypes and shapes.\n"
    "verify: the state file DIR/checkpoint must name a latest checkpoint, and it and every other\n"
    "checkpoint it lists must exist and read whole, checksums included (HDF5 files each in a\n"
    "child process: a crash inside libhdf5 on a damaged file is a failure, not a crash of this\n"
    "command). Exit 0: all good; 1: the problems are listed.\n"
    "convert writes every variable of FROM to TO, bit for bit: TO ending in .h5 is HDF5, any\n"
    "other name a TensorFlow prefix (TO.index and TO.data-00000-of-00001, which TensorFlow's\n"
    "tf.train.Saver restores).\n";

namespace {

/// HDF5: the file's attribute; TensorFlow: a scalar integer tensor named global_step.
result<std::optional<int64_t>> global_step_of(const std::string& path) {
  if (!is_tf_checkpoint(path))
    return read_checkpoint_global_step(path);
  RUNNEL_ASSIGN_OR_RETURN(auto entries, list_tf_checkpoint(path));
  for (auto& e : entries)
    if (e.name == "global_step" && e.unsupported.empty() && e.dims.rank() == 0 &&
        (e.type == dtype::i64 || e.type == dtype::i32)) {
      RUNNEL_ASSIGN_OR_RETURN(auto t, read_tf_checkpoint(path, {"global_step"}));
      auto& v = t.at("global_step");
      return std::optional<int64_t>(v.type() == dtype::i64 ? v.data<int64_t>()[0]
                                                           : v.data<int32_t>()[0]);
    }
  return std::optional<int64_t>();
}

/// A name from a state file, as a path: relative ones are inside `dir`.
std::string in_dir(const std::string& dir, const std::string& name) {
  return std::filesystem::path(name).is_absolute() ? name
                                                   : (std::filesystem::path(dir) / name).string();
}

std::string summary(const tensor& t) {
  if (t.type() == dtype::string) {
    std::string s = "values:";
    for (int64_t i = 0; i < std::min<int64_t>(t.num_elements(), 3); ++i)
      s += " \"" + t.flat<std::string>()[size_t(i)] + "\"";
    return s;
  }
  int64_t n = t.num_elements();
  if (n == 0)
    return "empty";
  double lo = INFINITY, hi = -INFINITY, sum = 0, sq = 0;
  int64_t nan = 0;
  for (int64_t i = 0; i < n; ++i) {
    double v = element_as_double(t, i);
    if (std::isnan(v)) {
      ++nan;
      continue;
    }
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
    sq += v * v;
  }
  double count = double(n - nan), mean = count ? sum / count : 0;
  double sd = count ? std::sqrt(std::max(0.0, sq / count - mean * mean)) : 0;
  char buf[256];
  std::snprintf(buf, sizeof buf, "min %.6g  max %.6g  mean %.6g  std %.6g%s  first %s", lo, hi,
                mean, sd, nan ? ("  nan " + std::to_string(nan)).c_str() : "",
                t.reshaped(shape{n}).value().values_to_string(4).c_str());
  return buf;
}

int ckpt_verify(const std::vector<std::string>& args) {
  if (wants_help(args)) {
    std::fputs(ckpt_usage, stdout);
    return 0;
  }
  if (args.size() != 1)
    return usage_error("ckpt verify needs one DIR", ckpt_usage);
  const std::string& dir = args[0];
  auto st = read_checkpoint_state(dir);
  if (!st)
    return fail(st.error());
  std::vector<std::string> files = st->all;
  if (std::find(files.begin(), files.end(), st->latest) == files.end())
    files.push_back(st->latest);
  int bad = 0;
  for (auto& f : files) {
    std::string path = in_dir(dir, f);
    status s = is_tf_checkpoint(path) || ::access(path.c_str(), R_OK) == 0
                   ? verify_any_checkpoint(path)
                   : not_found(path + " is listed but missing");
    std::printf("%s %s%s\n", s.ok() ? "ok " : "BAD", path.c_str(),
                f == st->latest ? " (latest)" : "");
    if (!s.ok()) {
      std::printf("    %s\n", s.message().c_str());
      ++bad;
    }
  }
  return bad ? 1 : 0;
}

int ckpt_convert(const std::vector<std::string>& args) {
  if (wants_help(args)) {
    std::fputs(ckpt_usage, stdout);
    return 0;
  }
  if (args.size() != 2)
    return usage_error("ckpt convert needs FROM and TO", ckpt_usage);
  const std::string &from = args[0], &to = args[1];
  auto entries = list_any_checkpoint(from);
  if (!entries)
    return fail(entries.error());
  for (auto& e : *entries)
    if (!e.unsupported.empty())
      return fail(unimplemented("ckpt convert: " + from + ": variable '" + e.name +
                                "' cannot be read (" + e.unsupported + "); nothing was written"));
  auto tensors = read_any_checkpoint(from, {});
  if (!tensors)
    return fail(tensors.error());
  auto step = global_step_of(from);
  if (!step)
    return fail(step.error());
  bool to_h5 = to.size() > 3 && to.compare(to.size() - 3, 3, ".h5") == 0;
  status s = to_h5 ? write_checkpoint(to, *tensors, *step)
                   : write_tf_checkpoint(tf_checkpoint_prefix(to), *tensors);
  if (!s.ok())
    return fail(s);
  std::fprintf(stderr, "wrote %zu variables to %s (%s)\n", tensors->size(), to.c_str(),
               to_h5 ? "HDF5" : "TensorFlow V2 checkpoint");
  return 0;
}

int ckpt_inspect(const std::vector<std::string>& args) {
  if (wants_help(args)) {
    std::fputs(ckpt_usage, stdout);
    return 0;
  }
  std::string file;
  bool values = false, json = false;
  for (auto& a : args) {
    if (a == "--values")
      values = true;
    else if (a == "--json")
      json = true;
    else if (!a.empty() && a[0] == '-')
      return usage_error("unknown option " + a, ckpt_usage);
    else if (file.empty())
      file = a;
    else
      return usage_error("unexpected argument " + a, ckpt_usage);
  }
  if (file.empty())
    return usage_error("ckpt inspect needs a FILE, PREFIX or DIR", ckpt_usage);
  // A folder: the latest checkpoint its `checkpoint` state file names.
  if (std::filesystem::is_directory(file)) {
    auto st = read_checkpoint_state(file);
    if (!st)
      return fail(st.error());
    file = in_dir(file, st->latest);
  }
  auto entries = list_any_checkpoint(file);
  if (!entries)
    return fail(entries.error());
  auto step = global_step_of(file);
  if (!step)
    return fail(step.error());
  int64_t total = 0;
  if (json) {
    nlohmann::ordered_json j;
    j["checkpoint"] = file;
    j["global_step"] = *step ? nlohmann::ordered_json(**step) : nlohmann::ordered_json();
    auto vars = nlohmann::ordered_json::array();
    for (auto& e : *entries) {
      nlohmann::ordered_json v;
      v["name"] = e.name;
      v["dtype"] = e.unsupported.empty() ? std::string(name(e.type)) : "unsupported";
      v["shape"] = e.dims.dims();
      if (!e.unsupported.empty())
        v["unsupported"] = e.unsupported;
      total += std::max<int64_t>(e.dims.num_elements(), 0);
      vars.push_back(std::move(v));
    }
    j["variables"] = std::move(vars);
    j["total_values"] = total;
    std::printf("%s\n",
                j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("checkpoint: %s\n", file.c_str());
  std::printf("global_step: %s\n", *step ? std::to_string(**step).c_str() : "(none)");
  std::printf("variables: %zu\n", entries->size());
  size_t width = 4;
  for (auto& e : *entries)
    width = std::max(width, e.name.size());
  for (auto& e : *entries) {
    if (!e.unsupported.empty()) {
      std::printf("  %-*s  %-8s %s  (%s)\n", int(width), e.name.c_str(), "?",
                  e.dims.to_string().c_str(), e.unsupported.c_str());
      continue;
    }
    std::printf("  %-*s  %-8s %s\n", int(width), e.name.c_str(), std::string(name(e.type)).c_str(),
                e.dims.to_string().c_str());
    total += std::max<int64_t>(e.dims.num_elements(), 0);
    if (values) {
      auto t = read_any_checkpoint(file, {e.name});
      if (!t)
        return fail(t.error());
      std::printf("  %-*s  %s\n", int(width), "", summary(t->begin()->second).c_str());
    }
  }
  std::printf("total: %lld values\n", static_cast<long long>(total));
  return 0;
}

} // namespace

int ckpt(const std::string& command, const std::vector<std::string>& args) {
  if (command == "inspect")
    return ckpt_inspect(args);
  if (command == "verify")
    return ckpt_verify(args);
  return ckpt_convert(args);
}

} // namespace runnel::cli
