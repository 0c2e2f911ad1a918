#pragma once

// The edge where exceptions stop. Rampart's own code reports errors as Status; exceptions still
// come from the standard library (std::bad_alloc above all, std::length_error) and from
// third-party code. Every thread entry and every call into code that may throw on untrusted
// input goes through one of these, so that an exception becomes an error answer or a log line
// with its context, never std::terminate.

#include <exception>
#include <new>
#include <string_view>
#include <type_traits>

#include "core/logging.h"
#include "core/status.h"

namespace rampart {

// The Status for an exception caught while doing `what` ("decoding the request"): running out of
// memory is the server's condition, not the request's fault, so it is Unavailable (HTTP 503,
// gRPC UNAVAILABLE: a client may retry); anything else is Internal.
inline Status StatusFromException(std::string_view what, const std::exception_ptr& caught) {
  try {
    std::rethrow_exception(caught);
  } catch (const std::bad_alloc&) {
    return Unavailable("out of memory while {}", what);
  } catch (const std::exception& error) {
    return Internal("{}: {}", what, error.what());
  } catch (...) {
    return Internal("{}: unknown exception", what);
  }
}

// Calls `body`, which returns a Status or a Result<T>; an exception it throws is returned as a
// Status (StatusFromException).
template <typename Body>
auto CatchAsStatus(std::string_view what, Body&& body) -> std::invoke_result_t<Body> {
  try {
    return body();
  } catch (...) {
    return StatusFromException(what, std::current_exception());
  }
}

// Calls `body` (returning void) at a thread's top level or in a loop that must go on: an
// exception is logged as an error naming `where`, and swallowed. Returns false when one was.
template <typename Body>
bool RunLoggingExceptions(std::string_view where, Body&& body) noexcept {
  try {
    body();
    return true;
  } catch (...) {
    const Status status = StatusFromException(where, std::current_exception());
    try {
      LOG_ERROR("{}", status.message());
    } catch (...) {  // logging itself failed (out of memory): nothing more can be said
    }
    return false;
  }
}

}  // namespace rampart
