#include "runnel/net/cluster_spec.hpp"

#include <fstream>
#include <sstream>

namespace runnel {
namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

bool valid_job_name(const std::string& job) {
  if (job.empty() || !(job[0] >= 'a' && job[0] <= 'z'))
    return false;
  for (char c : job)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
      return false;
  return true;
}

} // namespace

std::string task_id::name() const {
  return "/job:" + job + "/replica:0/task:" + std::to_string(task);
}

result<std::pair<std::string, int>> cluster_spec::split_address(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size())
    return invalid_argument("address '" + address + "' is not host:port");
  std::string host = address.substr(0, colon), port = address.substr(colon + 1);
  if (host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
    return invalid_argument("address '" + address + "': port '" + port + "' is not a number");
  int p = std::stoi(port);
  if (p > 65535)
    return invalid_argument("address '" + address + "': port " + port + " is above 65535");
  return std::make_pair(host, p);
}

result<cluster_spec> cluster_spec::parse(const std::string& text) {
  cluster_spec spec;
  // Jobs are separated by ';' or newlines; comments run from '#' to the end of a line.
  std::string cleaned;
  bool comment = false;
  for (char c : text) {
    if (c == '#')
      comment = true;
    if (c == '\n') {
      comment = false;
      cleaned += ';';
      continue;
    }
    if (!comment)
      cleaned += c;
  }
  std::stringstream jobs(cleaned);
  std::string entry;
  while (std::getline(jobs, entry, ';')) {
    entry = trim(entry);
    if (entry.empty())
      continue;
    auto eq = entry.find('=');
    if (eq == std::string::npos)
      return invalid_argument("cluster spec: '" + entry + "' is not job=host:port[,host:port...]");
    std::string job = trim(entry.substr(0, eq));
    if (!valid_job_name(job))
      return invalid_argument("cluster spec: job name '" + job +
                              "' must be lower-case letters, digits and '_', starting with a "
                              "letter");
    if (spec.jobs_.count(job))
      return invalid_argument("cluster spec: job '" + job + "' appears twice");
    std::vector<std::string> addresses;
    std::stringstream tasks(entry.substr(eq + 1));
    std::string address;
    while (std::getline(tasks, address, ',')) {
      address = trim(address);
      auto split = split_address(address);
      if (!split)
        return split.error().with_context("cluster spec: job '" + job + "' task " +
                                          std::to_string(addresses.size()));
      addresses.push_back(address);
    }
    if (addresses.empty())
      return invalid_argument("cluster spec: job '" + job + "' has no tasks");
    spec.jobs_.emplace(job, std::move(addresses));
  }
  if (spec.jobs_.empty())
    return invalid_argument("cluster spec is empty: expected e.g. "
                            "'ps=127.0.0.1:2222;worker=127.0.0.1:2223,127.0.0.1:2224'");
  // Two tasks on one address would fight over the port.
  std::map<std::string, task_id> seen;
  for (auto& t : spec.tasks()) {
    auto a = spec.address(t).value();
    if (auto s = split_address(a); s && s->second == 0)
      continue; // ephemeral ports are told apart when bound
    auto [it, fresh] = seen.emplace(a, t);
    if (!fresh)
      return invalid_argument("cluster spec: tasks " + it->second.name() + " and " + t.name() +
                              " share the address " + a);
  }
  return spec;
}

result<cluster_spec> cluster_spec::load(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return not_found("cannot open cluster spec file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  auto spec = parse(ss.str());
  if (!spec)
    return spec.error().with_context("file '" + path + "'");
  return spec;
}

result<std::string> cluster_spec::address(const std::string& job, int task) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) {
    std::string known;
    for (auto& [name, _] : jobs_)
      known += (known.empty() ? "" : ", ") + name;
    return not_found("no job '" + job + "' in the cluster (jobs: " + known + ")");
  }
  if (task < 0 || size_t(task) >= it->second.size())
    return not_found("no task " + std::to_string(task) + " in job '" + job + "' (it has " +
                     std::to_string(it->second.size()) + ")");
  return it->second[size_t(task)];
}

std::vector<task_id> cluster_spec::tasks() const {
  std::vector<task_id> out;
  for (auto& [job, addresses] : jobs_)
    for (size_t i = 0; i < addresses.size(); ++i)
      out.push_back({job, int(i)});
  return out;
}

int cluster_spec::num_tasks(const std::string& job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? 0 : int(it->second.size());
}

std::string cluster_spec::to_string() const {
  std::string out;
  for (auto& [job, addresses] : jobs_) {
    out += (out.empty() ? "" : ";") + job + "=";
    for (size_t i = 0; i < addresses.size(); ++i)
      out += (i ? "," : "") + addresses[i];
  }
  return out;
}

result<task_id> task_of_device(const std::string& device) {
  auto field = [&](const std::string& tag) -> std::string {
    auto p = device.find(tag);
    if (p == std::string::npos)
      return {};
    p += tag.size();
    auto e = device.find('/', p);
    return device.substr(p, e == std::string::npos ? std::string::npos : e - p);
  };
  std::string job = field("/job:"), task = field("/task:");
  // (At most 9 digits: a longer task number made std::stoi throw; found by tests/fuzz.)
  if (job.empty() || task.empty() || task.size() > 9 ||
      task.find_first_not_of("0123456789") != std::string::npos)
    return invalid_argument("device '" + device + "' does not name a job and a task");
  return task_id{job, std::stoi(task)};
}

} // namespace runnel
