// Timers: callbacks run at their due time whatever the thread is sleeping for when they are
// scheduled.

#include "gateway/timer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <vector>

#include "testing/eventually.h"

namespace rampart::gateway {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Lets the thread run a callback, after which it sleeps with nothing due (most likely by the
// time this returns: what the tests below are about).
void LetItSleep(Timers& timers) {
  std::atomic<bool> ran = false;
  timers.Schedule(milliseconds(0), [&] { ran = true; });
  ASSERT_TRUE(testing::Eventually([&] { return ran.load(); }));
}

TEST(TimersTest, ACallbackDueBeforeTheOneWaitedForRunsOnTime) {
  Timers timers;
  std::atomic<bool> late = false;
  std::atomic<bool> soon = false;
  LetItSleep(timers);
  timers.Schedule(seconds(60), [&] { late = true; });
  timers.Schedule(milliseconds(1), [&] { soon = true; });
  // Within Eventually's 10 s, long before the first callback's 60 s.
  EXPECT_TRUE(testing::Eventually([&] { return soon.load(); }));
  EXPECT_FALSE(late.load());
}

TEST(TimersTest, ACancelledCallbackDoesNotHoldBackALaterSoonerOne) {
  Timers timers;
  std::atomic<bool> ran = false;
  LetItSleep(timers);
  const Timers::Id id = timers.Schedule(seconds(60), [] {});
  EXPECT_TRUE(timers.Cancel(id));
  timers.Schedule(milliseconds(1), [&] { ran = true; });
  EXPECT_TRUE(testing::Eventually([&] { return ran.load(); }));
}

TEST(TimersTest, CallbacksDueLaterThanTheOneWaitedForRunInOrder) {
  Timers timers;
  std::mutex mutex;
  std::vector<int> order;
  const auto record = [&](int value) {
    return [&, value] {
      std::lock_guard lock(mutex);
      order.push_back(value);
    };
  };
  LetItSleep(timers);
  timers.Schedule(milliseconds(20), record(1));
  timers.Schedule(milliseconds(40), record(2));
  timers.Schedule(milliseconds(60), record(3));
  EXPECT_TRUE(testing::Eventually([&] {
    std::lock_guard lock(mutex);
    return order.size() == 3;
  }));
  std::lock_guard lock(mutex);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

}  // namespace
}  // namespace rampart::gateway
