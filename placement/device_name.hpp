#pragma once
// Device names and specs in TensorFlow's grammar.
//
//   auto d = device_spec::parse("/job:ps/replica:0/task:1/device:CPU:0").value();
//   d.to_string();                                   // "/job:ps/replica:0/task:1/device:CPU:0"
//   auto partial = device_spec::parse("/device:GPU:*").value();   // type GPU, any id
//   auto legacy = device_spec::parse("/gpu:1").value();           // same as /device:GPU:1
//   partial.matches(d);                              // false: d is a CPU
//   auto merged = device_spec::merge(d, partial);    // error: CPU and GPU conflict
//   auto soft = device_spec::merge(d, partial, /*allow_soft_placement=*/true);  // CPU kept
//
// Every part is optional; an absent part or `*` matches anything. Device types are compared
// without regard to case and printed in upper case (CPU, GPU). A malformed spec is an
// invalid_argument error that quotes it and says which part is wrong.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "runnel/ops/core/status.hpp"

namespace runnel {

struct device_spec {
  std::optional<std::string> job;
  std::optional<int64_t> replica;
  std::optional<int64_t> task;
  std::optional<std::string> type; ///< upper case: "CPU", "GPU"
  std::optional<int64_t> id;

  /// Parses `/job:J/replica:R/task:T/device:TYPE:ID` (parts in this order, each optional, `*`
  /// for any), the legacy `/cpu:0` and `/gpu:1` forms, and "" (anything).
  static result<device_spec> parse(std::string_view spec);
  /// The canonical form of the parts that are set ("" when none is).
  std::string to_string() const;

  /// True when every part set here is set to the same value in `device` (a wildcard part of
  /// `device` does not satisfy a part set here).
  bool matches(const device_spec& device) const;
  bool fully_specified() const { return job && replica && task && type && id; }

  /// The spec that satisfies both: parts set in only one are taken from it. Conflicting parts
  /// are an error naming both specs; with `allow_soft_placement`, a conflicting device type or
  /// id keeps `a`'s (the more specific constraint, e.g. a node's own spec over a scope's).
  static result<device_spec> merge(const device_spec& a, const device_spec& b,
                                   bool allow_soft_placement = false);

  friend bool operator==(const device_spec&, const device_spec&) = default;
};

} // namespace runnel
