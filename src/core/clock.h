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
};

inline int64_t ToNanos(Nanoseconds d) { return d.count(); }
inline int64_t NanosBetween(SteadyTime from, SteadyTime to) {
  return std::chrono::duration_cast<Nanoseconds>(to - from).count();
}
// Unix time in nanoseconds (for "last_inference" style fields), real clock.
int64_t UnixNanosNow();

}  // namespace rampart
