#include "core/clock.h"

#include <time.h>

namespace rampart {
namespace {
class SteadyClock final : public Clock {
 public:
  SteadyTime Now() const override { return std::chrono::steady_clock::now(); }
};
class CoarseClock final : public Clock {
 public:
  SteadyTime Now() const override { return CoarseNow(); }
};
}  // namespace

const Clock& Clock::Real() {
  static const SteadyClock clock;
  return clock;
}

const Clock& Clock::Coarse() {
  static const CoarseClock clock;
  return clock;
}

SteadyTime CoarseNow() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &now);  // libstdc++'s steady_clock is CLOCK_MONOTONIC
  return SteadyTime(std::chrono::seconds(now.tv_sec) + std::chrono::nanoseconds(now.tv_nsec));
}

int64_t UnixMillisNow() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME_COARSE, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000 + now.tv_nsec / 1'000'000;
}

}  // namespace rampart
