#pragma once

// Status and Result<T>: Rampart's one error model.
//
// A Status is either OK (no allocation) or a canonical code plus a message meant for the person
// who sent the request or wrote the config. Protocol front ends (src/api) map codes to their own
// error bodies in exactly one place each. Both types are [[nodiscard]]: ignoring an error is a bug.
//
// Thread safety: values; copy or move freely between threads.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include <fmt/core.h>

namespace rampart {

enum class StatusCode {
  kOk = 0,
  kCancelled,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kPermissionDenied,
  kResourceExhausted,
  kFailedPrecondition,
  kUnimplemented,
  kInternal,
  kUnavailable,
  kUnauthenticated,
  kPayloadTooLarge,  // a body or message over a configured size limit
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);

  static Status Ok() { return Status(); }

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return state_ ? state_->code : StatusCode::kOk; }
  // Empty for OK.
  const std::string& message() const;
  // "NotFound: model 'x' is not available", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>"; OK stays OK.
  Status WithContext(std::string_view context) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code() == b.code() && a.message() == b.message();
  }

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  // shared_ptr keeps copies cheap; a State is never mutated after construction.
  std::shared_ptr<const State> state_;
};

// Formatting constructors: InvalidArgument("dims of '{}' must be positive", name).
#define RAMPART_STATUS_FACTORY(Name)                                                      \
  template <typename... Args>                                                             \
  Status Name(fmt::format_string<Args...> format, Args&&... args) {                       \
    return Status(StatusCode::k##Name, fmt::format(format, std::forward<Args>(args)...)); \
  }
RAMPART_STATUS_FACTORY(Cancelled)
RAMPART_STATUS_FACTORY(InvalidArgument)
RAMPART_STATUS_FACTORY(NotFound)
RAMPART_STATUS_FACTORY(AlreadyExists)
RAMPART_STATUS_FACTORY(PermissionDenied)
RAMPART_STATUS_FACTORY(ResourceExhausted)
RAMPART_STATUS_FACTORY(FailedPrecondition)
RAMPART_STATUS_FACTORY(Unimplemented)
RAMPART_STATUS_FACTORY(Internal)
RAMPART_STATUS_FACTORY(Unavailable)
RAMPART_STATUS_FACTORY(Unauthenticated)
RAMPART_STATUS_FACTORY(PayloadTooLarge)
#undef RAMPART_STATUS_FACTORY

// Result<T>: a T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : value_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (std::get<Status>(value_).ok()) {
      value_ = Status(StatusCode::kInternal, "Result constructed from an OK status");
    }
  }

  bool ok() const { return std::holds_alternative<T>(value_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(value_);
  }

  // REQUIRES: ok().
  T& value() & { return std::get<T>(value_); }
  const T& value() const& { return std::get<T>(value_); }
  T&& value() && { return std::get<T>(std::move(value_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> value_;
};

}  // namespace rampart

#define RAMPART_CONCAT_INNER(a, b) a##b
#define RAMPART_CONCAT(a, b) RAMPART_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                          \
  do {                                                 \
    ::rampart::Status rampart_status_ = (expr);        \
    if (!rampart_status_.ok()) return rampart_status_; \
  } while (0)

#define RAMPART_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()

#define ASSIGN_OR_RETURN(lhs, expr) \
  RAMPART_ASSIGN_OR_RETURN_IMPL(RAMPART_CONCAT(rampart_result_, __LINE__), lhs, expr)
