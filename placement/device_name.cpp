#include "runnel/placement/device_name.hpp"

#include <algorithm>
#include <cctype>
#include <vector>

namespace runnel {
namespace {

std::string upper(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    c = char(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

bool valid_name(std::string_view s) {
  if (s.empty() || !std::isalpha(static_cast<unsigned char>(s[0])))
    return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

/// A non-negative number, or nullopt for "*"; false when neither.
bool parse_index(std::string_view s, std::optional<int64_t>& out) {
  if (s == "*") {
    out.reset();
    return true;
  }
  if (s.empty() || s.size() > 9 ||
      !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  int64_t v = 0;
  for (char c : s)
    v = v * 10 + (c - '0');
  out = v;
  return true;
}

} // namespace

result<device_spec> device_spec::parse(std::string_view spec) {
  device_spec d;
  if (spec.empty())
    return d;
  auto bad = [&](const std::string& why) {
    return invalid_argument("malformed device spec '" + std::string(spec) + "': " + why +
                            " (expected /job:NAME/replica:R/task:T/device:TYPE:ID, each part "
                            "optional, * for any; or /cpu:0, /gpu:1)");
  };
  if (spec[0] != '/')
    return bad("it must start with '/'");
  std::vector<std::string_view> parts;
  size_t pos = 1;
  while (pos <= spec.size()) {
    size_t next = spec.find('/', pos);
    if (next == std::string_view::npos)
      next = spec.size();
    parts.push_back(spec.substr(pos, next - pos));
    pos = next + 1;
  }
  int order = 0; // job, replica, task, device: each at most once, in this order
  for (auto part : parts) {
    if (part.empty())
      return bad("an empty part");
    size_t colon = part.find(':');
    if (colon == std::string_view::npos)
      return bad("part '" + std::string(part) + "' has no ':'");
    auto key = part.substr(0, colon);
    auto value = part.substr(colon + 1);
    auto in_order = [&](int rank) {
      if (rank <= order)
        return false;
      order = rank;
      return true;
    };
    if (key == "job") {
      if (!in_order(1))
        return bad("'job' out of order or repeated");
      if (value != "*" && !valid_name(value))
        return bad("job name '" + std::string(value) + "'");
      if (value != "*")
        d.job = std::string(value);
    } else if (key == "replica" || key == "task") {
      if (!in_order(key == "replica" ? 2 : 3))
        return bad("'" + std::string(key) + "' out of order or repeated");
      auto& field = key == "replica" ? d.replica : d.task;
      if (!parse_index(value, field))
        return bad(std::string(key) + " '" + std::string(value) + "' is not a number or *");
    } else if (key == "device") {
      if (!in_order(4))
        return bad("'device' out of order or repeated");
      size_t c2 = value.find(':');
      auto type = value.substr(0, c2);
      if (type != "*" && !valid_name(type))
        return bad("device type '" + std::string(type) + "'");
      if (type != "*")
        d.type = upper(type);
      if (c2 != std::string_view::npos && !parse_index(value.substr(c2 + 1), d.id))
        return bad("device id '" + std::string(value.substr(c2 + 1)) + "' is not a number or *");
    } else if (upper(key) == "CPU" || upper(key) == "GPU") { // legacy /cpu:0, /gpu:1
      if (!in_order(4))
        return bad("'" + std::string(key) + "' out of order or repeated");
      d.type = upper(key);
      if (!parse_index(value, d.id))
        return bad("device id '" + std::string(value) + "' is not a number or *");
    } else {
      return bad("unknown part '" + std::string(key) + "'");
    }
  }
  return d;
}

std::string device_spec::to_string() const {
  std::string out;
  if (job)
    out += "/job:" + *job;
  if (replica)
    out += "/replica:" + std::to_string(*replica);
  if (task)
    out += "/task:" + std::to_string(*task);
  if (type || id)
    out += "/device:" + (type ? *type : std::string("*")) + ":" +
           (id ? std::to_string(*id) : std::string("*"));
  return out;
}

bool device_spec::matches(const device_spec& device) const {
  auto same = [](const auto& want, const auto& have) { return !want || (have && *want == *have); };
  return same(job, device.job) && same(replica, device.replica) && same(task, device.task) &&
         same(type, device.type) && same(id, device.id);
}

result<device_spec> device_spec::merge(const device_spec& a, const device_spec& b,
                                       bool allow_soft_placement) {
  device_spec out = a;
  auto conflict = [&](const char* part) {
    return invalid_argument("cannot merge device specs '" + a.to_string() + "' and '" +
                            b.to_string() + "': their " + part + "s differ" +
                            (allow_soft_placement ? ""
                                                  : " (soft placement would relax a device "
                                                    "type or id conflict)"));
  };
  auto take = [](auto& mine, const auto& theirs) {
    if (!mine)
      mine = theirs;
    return !theirs || *mine == *theirs;
  };
  if (!take(out.job, b.job))
    return conflict("job");
  if (!take(out.replica, b.replica))
    return conflict("replica");
  if (!take(out.task, b.task))
    return conflict("task");
  bool type_ok = take(out.type, b.type);
  if (!type_ok) {
    if (!allow_soft_placement)
      return conflict("device type");
    return out; // keep a's type and id
  }
  if (!take(out.id, b.id)) {
    if (!allow_soft_placement)
      return conflict("device id");
    out.id = a.id;
  }
  return out;
}

} // namespace runnel
