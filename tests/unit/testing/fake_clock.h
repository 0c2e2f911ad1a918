#pragma once

// A Clock that moves only when a test says so: deadlines and delays are tested without waiting.

#include <mutex>

#include "core/clock.h"

namespace rampart::testing {

class FakeClock final : public Clock {
 public:
  SteadyTime Now() const override {
    std::lock_guard lock(mutex_);
    return now_;
  }
  void Advance(std::chrono::nanoseconds by) {
    std::lock_guard lock(mutex_);
    now_ += by;
  }

 private:
  mutable std::mutex mutex_;
  SteadyTime now_ = SteadyTime() + std::chrono::hours(1);
};

}  // namespace rampart::testing
