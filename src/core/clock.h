#pragma once

// Clock: the one seam for time, so schedulers and timeouts can be tested with a FakeClock.
// Implementations are thread-safe.

#include <chrono>
#include <cstdint>

namespace rampart {

using SteadyTime = std::chrono::steady_clock::time_point;
using Nanoseconds = std::chrono::nanoseconds;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual SteadyTime Now() const = 0;
  // The process-wide real clock.
  static const Clock& Real();
  // The real clock at the kernel tick's resolution (CoarseNow): for deadlines of seconds.
  static const Clock& Coarse();
};

inline int64_t ToNanos(Nanoseconds d) { return d.count(); }
inline int64_t NanosBetween(SteadyTime from, SteadyTime to) {
  return std::chrono::duration_cast<Nanoseconds>(to - from).count();
}
// The monotonic clock (steady_clock's) read at the kernel tick's resolution
// (CLOCK_MONOTONIC_COARSE: up to a few milliseconds behind Now(), and several times cheaper to
// read): for timeouts counted in seconds that are armed per request. Compare its times only with
// its own.
SteadyTime CoarseNow();
// Unix time in milliseconds at the kernel tick's resolution (for "last_inference" fields).
int64_t UnixMillisNow();

}  // namespace rampart
