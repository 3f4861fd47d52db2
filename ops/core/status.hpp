#pragma once
// Errors as values.
//
//   result<tensor> r = try_something();
//   if (!r) return r.error();          // propagate the status
//   tensor t = std::move(r).value();   // or .value(), which throws runnel::error
//
// `status` carries one of TensorFlow's codes and a message that names what is at fault
// (node, op, shape, file). `result<T>` holds a T or a non-ok status.

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace runnel {

/// TensorFlow's error codes (same numbering as tensorflow/core/protobuf/error_codes.proto).
enum class error_code : int {
  ok = 0,
  cancelled = 1,
  unknown = 2,
  invalid_argument = 3,
  deadline_exceeded = 4,
  not_found = 5,
  already_exists = 6,
  permission_denied = 7,
  resource_exhausted = 8,
  failed_precondition = 9,
  aborted = 10,
  out_of_range = 11,
  unimplemented = 12,
  internal = 13,
  unavailable = 14,
  data_loss = 15,
  unauthenticated = 16,
};

/// The code's name as TensorFlow spells it in messages, e.g. "INVALID_ARGUMENT".
const char* to_string(error_code code);

/// An error code and a message; `ok()` when the code is `error_code::ok`.
class [[nodiscard]] status {
public:
  status() = default;
  status(error_code code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == error_code::ok; }
  error_code code() const { return code_; }
  const std::string& message() const { return message_; }
  /// "INVALID_ARGUMENT: message", or "OK".
  std::string to_string() const;
  /// The same code with `context + ": "` in front of the message (no-op on ok).
  status with_context(const std::string& context) const;

  friend bool operator==(const status& a, const status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

private:
  error_code code_ = error_code::ok;
  std::string message_;
};

/// The ok status.
inline status ok_status() {
  return {};
}
status invalid_argument(std::string message);
status not_found(std::string message);
status failed_precondition(std::string message);
status out_of_range(std::string message);
status unimplemented(std::string message);
status internal_error(std::string message);
status unavailable(std::string message);
status aborted(std::string message);
status cancelled(std::string message);
status resource_exhausted(std::string message);
status deadline_exceeded(std::string message);
status data_loss(std::string message);
status already_exists(std::string message);

/// The exception `result<T>::value()` throws for callers who prefer exceptions.
class error : public std::runtime_error {
public:
  explicit error(status s) : std::runtime_error(s.to_string()), status_(std::move(s)) {}
  const status& get_status() const { return status_; }

private:
  status status_;
};

/// Throws runnel::error when `s` is not ok.
/// Whether informational lines (the GPUs found, ...) go to stderr: RUNNEL_VERBOSE=1 in the
/// environment, or set_verbose_logging(true) (the tools' --verbose).
bool verbose_logging();
void set_verbose_logging(bool on);

inline void throw_if_error(const status& s) {
  if (!s.ok())
    throw error(s);
}

/// A T or a non-ok status.
template <class T> class [[nodiscard]] result {
public:
  result(T value) : value_(std::move(value)) {}
  result(status s) : value_(std::move(s)) {
    if (std::get<status>(value_).ok())
      value_ = status(error_code::internal, "result constructed from an ok status");
  }

  bool ok() const { return value_.index() == 0; }
  explicit operator bool() const { return ok(); }

  /// The status: ok when a value is held.
  status error() const { return ok() ? status{} : std::get<status>(value_); }

  T& value() & {
    check();
    return std::get<T>(value_);
  }
  const T& value() const& {
    check();
    return std::get<T>(value_);
  }
  T&& value() && {
    check();
    return std::get<T>(std::move(value_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

private:
  void check() const {
    if (!ok())
      throw runnel::error(std::get<status>(value_));
  }
  std::variant<T, status> value_;
};

} // namespace runnel

/// Returns early from a function returning status or result<T> when `expr` is not ok.
#define RUNNEL_RETURN_IF_ERROR(expr)                                                               \
  do {                                                                                             \
    ::runnel::status runnel_status_ = (expr);                                                      \
    if (!runnel_status_.ok())                                                                      \
      return runnel_status_;                                                                       \
  } while (false)

#define RUNNEL_CONCAT_INNER_(a, b) a##b
#define RUNNEL_CONCAT_(a, b) RUNNEL_CONCAT_INNER_(a, b)
/// `RUNNEL_ASSIGN_OR_RETURN(auto x, make_x());` declares x from a result or returns its error.
#define RUNNEL_ASSIGN_OR_RETURN(lhs, expr)                                                         \
  auto RUNNEL_CONCAT_(runnel_result_, __LINE__) = (expr);                                          \
  if (!RUNNEL_CONCAT_(runnel_result_, __LINE__).ok())                                              \
    return RUNNEL_CONCAT_(runnel_result_, __LINE__).error();                                       \
  lhs = std::move(RUNNEL_CONCAT_(runnel_result_, __LINE__)).value()
