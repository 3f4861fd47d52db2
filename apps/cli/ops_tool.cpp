// `runnel ops`: the ops Runnel has (signatures, kernels per device, gradients), and which of
// TensorFlow 1.x's ops an imported graph may hold.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "runnel/apps/cli/cli_common.hpp"
#include "runnel/ops/cpu/builtin_kernels.hpp"
#include "runnel/ops/defs/families.hpp"
#include "runnel/ops/gpu/accelerator.hpp"
#include "runnel/ops/grad/gradients.hpp"
#include "runnel/storage/tf/tf_graph.hpp"

namespace runnel::cli {

const char* ops_usage =
    "usage: runnel ops [NAME...] [--json]\n"
    "       runnel ops --tensorflow [--missing] [--markdown]\n"
    "Without arguments: every op Runnel has, one per line: its family, whether it has CPU and\n"
    "GPU kernels, and its gradient (yes; 'none' when it has none by nature, as comparisons and\n"
    "shape ops; '-' when none is written). NAME...: those ops in full (inputs, outputs,\n"
    "attributes with defaults, kernel dtypes per device); --json: one JSON object per op.\n"
    "--tensorflow: TensorFlow 1.x's ops as graphs hold them (tf.nn, tf.layers, tf.train,\n"
    "tf.data, the RNN cells), by group, each with the Runnel op it imports as or 'missing';\n"
    "--missing lists only those Runnel lacks, --markdown prints the summary table of\n"
    "docs/interop.md.\n";

namespace {

/// What the registries say of one op.
struct op_facts {
  const op_def* def = nullptr;
  std::string family;
  std::map<device_type, std::set<dtype>> kernel_types; // an empty set: any dtype
  std::set<device_type> devices;
  std::string gradient; // "yes", "none" or "-"
};

std::string device_name(device_type d) {
  return d == device_type::gpu ? "GPU" : "CPU";
}

std::map<std::string, op_facts> gather_facts() {
  std::map<std::string, op_facts> facts;
  auto families = builtin_op_families();
  auto& grads = builtin_gradients();
  for (auto& name : builtin_ops().names()) {
    auto& f = facts[name];
    f.def = builtin_ops().find(name);
    f.family = families.count(name) ? families[name] : "";
    f.gradient = grads.find(name) || grads.find_sparse(name) ? "yes"
                 : grads.is_non_differentiable(name)         ? "none"
                                                             : "-";
  }
  auto add = [&](const std::string& op, device_type d, const std::vector<dtype>& types) {
    auto it = facts.find(op);
    if (it == facts.end())
      return;
    it->second.devices.insert(d);
    auto& set = it->second.kernel_types[d];
    set.insert(types.begin(), types.end());
  };
  for (auto& r : builtin_kernels().registrations())
    add(r.op, r.device, r.types);
  for (auto& g : gpu_kernel_ops())
    add(g.op, device_type::gpu, g.types);
  // Control flow runs in the executor itself, on whichever device its frame is.
  for (auto& [name, f] : facts)
    if (is_control_flow_op(name)) {
      f.devices.insert(device_type::cpu);
      f.devices.insert(device_type::gpu);
    }
  return facts;
}

std::string arg_text(const arg_def& a) {
  std::string type = a.fixed != dtype::invalid   ? std::string(name(a.fixed))
                     : !a.type_list_attr.empty() ? "list(" + a.type_list_attr + ")"
                                                 : a.type_attr;
  if (!a.number_attr.empty())
    type = a.number_attr + " * " + type;
  return a.name + ": " + (a.is_ref ? "ref " : "") + type;
}

std::string args_text(const std::vector<arg_def>& args) {
  std::string out;
  for (auto& a : args)
    out += (out.empty() ? "" : ", ") + arg_text(a);
  return out;
}

std::string types_text(const std::set<dtype>& types) {
  if (types.empty())
    return "any dtype";
  std::string out;
  for (auto t : types)
    out += (out.empty() ? "" : " ") + std::string(name(t));
  return out;
}

void print_full(const std::string& name, const op_facts& f) {
  std::printf("%s(%s) -> (%s)%s\n", name.c_str(), args_text(f.def->inputs).c_str(),
              args_text(f.def->outputs).c_str(), f.def->stateful ? "  [stateful]" : "");
  for (auto& a : f.def->attrs) {
    std::string allowed;
    for (auto t : a.allowed)
      allowed += (allowed.empty() ? " in {" : ", ") + std::string(runnel::name(t));
    if (!allowed.empty())
      allowed += "}";
    std::printf("  attr %s: %s%s%s\n", a.name.c_str(), to_string(a.type), allowed.c_str(),
                a.default_value ? (" = " + attr_to_string(*a.default_value)).c_str() : "");
  }
  for (auto& [d, types] : f.kernel_types)
    std::printf("  %s kernel: %s\n", device_name(d).c_str(), types_text(types).c_str());
  if (f.kernel_types.empty())
    std::printf("  kernels: %s\n", f.devices.empty() ? "none" : "the executor runs it");
  std::printf("  gradient: %s\n  family: %s\n", f.gradient.c_str(), f.family.c_str());
}

nlohmann::ordered_json to_json(const std::string& name, const op_facts& f) {
  nlohmann::ordered_json j;
  j["name"] = name;
  j["family"] = f.family;
  auto args = [](const std::vector<arg_def>& list) {
    auto a = nlohmann::ordered_json::array();
    for (auto& x : list)
      a.push_back(arg_text(x));
    return a;
  };
  j["inputs"] = args(f.def->inputs);
  j["outputs"] = args(f.def->outputs);
  auto attrs = nlohmann::ordered_json::object();
  for (auto& a : f.def->attrs)
    attrs[a.name] = a.default_value ? attr_to_string(*a.default_value) : to_string(a.type);
  j["attrs"] = std::move(attrs);
  j["stateful"] = f.def->stateful;
  auto devices = nlohmann::ordered_json::array();
  for (auto d : f.devices)
    devices.push_back(device_name(d));
  j["devices"] = std::move(devices);
  j["gradient"] = f.gradient;
  return j;
}

/// Ops whose name holds `query`, ignoring case: the suggestions for a name that is not an op.
std::string similar_ops(const std::map<std::string, op_facts>& facts, const std::string& query) {
  auto lower = [](std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s;
  };
  std::string out;
  int n = 0;
  for (auto& [name, f] : facts)
    if (lower(name).find(lower(query)) != std::string::npos && n++ < 8)
      out += (out.empty() ? "" : ", ") + name;
  return out.empty() ? "`runnel ops` lists every op" : "similar: " + out;
}

int tensorflow_ops(const std::map<std::string, op_facts>& facts, bool missing_only, bool markdown) {
  size_t total = 0, have = 0;
  if (markdown)
    std::printf("| group | TensorFlow ops | import | missing |\n|---|---|---|---|\n");
  for (auto& g : tensorflow_1x_ops()) {
    std::vector<std::string> missing;
    for (auto& op : g.ops) {
      auto as = imported_op_name(op);
      bool ok = facts.count(as) > 0;
      if (!ok)
        missing.push_back(op);
      if (!markdown && (!ok || !missing_only))
        std::printf("%-26s %-38s %s\n", g.group.c_str(), op.c_str(),
                    !ok        ? "missing"
                    : as == op ? "yes"
                               : ("as " + as).c_str());
    }
    total += g.ops.size();
    have += g.ops.size() - missing.size();
    if (markdown) {
      std::string list;
      for (auto& m : missing)
        list += (list.empty() ? "" : ", ") + m;
      std::printf("| %s | %zu | %zu | %s |\n", g.group.c_str(), g.ops.size(),
                  g.ops.size() - missing.size(), list.empty() ? "-" : list.c_str());
    }
  }
  if (markdown)
    std::printf("| **all** | %zu | %zu | |\n", total, have);
  else
    std::fprintf(stderr, "%zu of %zu TensorFlow 1.x ops import\n", have, total);
  return 0;
}

} // namespace

int ops(const std::vector<std::string>& args) {
  if (wants_help(args)) {
    std::fputs(ops_usage, stdout);
    return 0;
  }
  bool json = false, tensorflow = false, missing = false, markdown = false;
  std::vector<std::string> names;
  for (auto& a : args) {
    if (a == "--json")
      json = true;
    else if (a == "--tensorflow")
      tensorflow = true;
    else if (a == "--missing")
      missing = true;
    else if (a == "--markdown")
      markdown = true;
    else if (!a.empty() && a[0] == '-')
      return usage_error("ops: unknown option " + a, ops_usage);
    else
      names.push_back(a);
  }
  if ((missing || markdown) && !tensorflow)
    return usage_error("ops: --missing and --markdown go with --tensorflow", ops_usage);
  if (tensorflow && (json || !names.empty()))
    return usage_error("ops --tensorflow takes no op names and no --json", ops_usage);
  auto facts = gather_facts();
  if (tensorflow)
    return tensorflow_ops(facts, missing, markdown);
  for (auto& n : names)
    if (!facts.count(n))
      return fail(not_found("no op named '" + n + "' (" + similar_ops(facts, n) + ")"));
  if (names.empty())
    for (auto& [name, f] : facts)
      names.push_back(name);
  if (args.empty())
    std::printf("%-40s %-14s %-4s %-4s %s\n", "op", "family", "CPU", "GPU", "gradient");
  for (auto& n : names) {
    auto& f = facts.at(n);
    if (json)
      std::printf("%s\n", to_json(n, f).dump().c_str());
    else if (args.empty())
      std::printf("%-40s %-14s %-4s %-4s %s\n", n.c_str(), f.family.c_str(),
                  f.devices.count(device_type::cpu) ? "CPU" : "-",
                  f.devices.count(device_type::gpu) ? "GPU" : "-", f.gradient.c_str());
    else
      print_full(n, f);
  }
  return 0;
}

} // namespace runnel::cli
