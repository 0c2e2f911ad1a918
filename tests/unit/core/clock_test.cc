#include "core/clock.h"

#include <gtest/gtest.h>

#include <chrono>

namespace rampart {
namespace {

TEST(CoarseNow, IsTheSteadyClockAtTickResolution) {
  const SteadyTime coarse = CoarseNow();
  const SteadyTime precise = Clock::Real().Now();
  // The same clock, read at the kernel tick's resolution: never ahead, at most a tick behind
  // (a second is far beyond any tick, and leaves room for a descheduled test thread).
  EXPECT_LE(coarse, precise);
  EXPECT_LT(precise - coarse, std::chrono::seconds(1));
}

TEST(UnixMillisNow, IsTheWallClockInMilliseconds) {
  const int64_t coarse = UnixMillisNow();
  const int64_t precise = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
  EXPECT_LE(coarse, precise);
  EXPECT_LT(precise - coarse, 1000);
}

}  // namespace
}  // namespace rampart
