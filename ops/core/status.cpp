#include "runnel/ops/core/status.hpp"

#include <atomic>
#include <cstdlib>
#include <string>

namespace runnel {

const char* to_string(error_code code) {
  switch (code) {
    case error_code::ok:
      return "OK";
    case error_code::cancelled:
      return "CANCELLED";
    case error_code::unknown:
      return "UNKNOWN";
    case error_code::invalid_argument:
      return "INVALID_ARGUMENT";
    case error_code::deadline_exceeded:
      return "DEADLINE_EXCEEDED";
    case error_code::not_found:
      return "NOT_FOUND";
    case error_code::already_exists:
      return "ALREADY_EXISTS";
    case error_code::permission_denied:
      return "PERMISSION_DENIED";
    case error_code::resource_exhausted:
      return "RESOURCE_EXHAUSTED";
    case error_code::failed_precondition:
      return "FAILED_PRECONDITION";
    case error_code::aborted:
      return "ABORTED";
    case error_code::out_of_range:
      return "OUT_OF_RANGE";
    case error_code::unimplemented:
      return "UNIMPLEMENTED";
    case error_code::internal:
      return "INTERNAL";
    case error_code::unavailable:
      return "UNAVAILABLE";
    case error_code::data_loss:
      return "DATA_LOSS";
    case error_code::unauthenticated:
      return "UNAUTHENTICATED";
  }
  return "UNKNOWN";
}

std::string status::to_string() const {
  if (ok())
    return "OK";
  return std::string(runnel::to_string(code_)) + ": " + message_;
}

status status::with_context(const std::string& context) const {
  if (ok())
    return *this;
  return status(code_, context + ": " + message_);
}

status invalid_argument(std::string m) {
  return {error_code::invalid_argument, std::move(m)};
}
status not_found(std::string m) {
  return {error_code::not_found, std::move(m)};
}
status failed_precondition(std::string m) {
  return {error_code::failed_precondition, std::move(m)};
}
status out_of_range(std::string m) {
  return {error_code::out_of_range, std::move(m)};
}
status unimplemented(std::string m) {
  return {error_code::unimplemented, std::move(m)};
}
status internal_error(std::string m) {
  return {error_code::internal, std::move(m)};
}
status unavailable(std::string m) {
  return {error_code::unavailable, std::move(m)};
}
status aborted(std::string m) {
  return {error_code::aborted, std::move(m)};
}
status cancelled(std::string m) {
  return {error_code::cancelled, std::move(m)};
}
status resource_exhausted(std::string m) {
  return {error_code::resource_exhausted, std::move(m)};
}
status deadline_exceeded(std::string m) {
  return {error_code::deadline_exceeded, std::move(m)};
}
status data_loss(std::string m) {
  return {error_code::data_loss, std::move(m)};
}
status already_exists(std::string m) {
  return {error_code::already_exists, std::move(m)};
}

namespace {
std::atomic<int>& verbose_flag() {
  static std::atomic<int> flag{[] {
    const char* v = std::getenv("RUNNEL_VERBOSE");
    return v && *v && std::string(v) != "0" ? 1 : 0;
  }()};
  return flag;
}
} // namespace

bool verbose_logging() {
  return verbose_flag().load(std::memory_order_relaxed) != 0;
}

void set_verbose_logging(bool on) {
  verbose_flag().store(on ? 1 : 0, std::memory_order_relaxed);
}

} // namespace runnel
