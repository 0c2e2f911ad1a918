#include "core/clock.h"

namespace rampart {
namespace {
class SteadyClock final : public Clock {
 public:
  SteadyTime Now() const override { return std::chrono::steady_clock::now(); }
};
}  // namespace

const Clock& Clock::Real() {
  static const SteadyClock clock;
  return clock;
}

int64_t UnixNanosNow() {
  return std::chrono::duration_cast<Nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace rampart
