#include "core/worker_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>

namespace rampart {
namespace {

// A gate tasks wait at until the test opens it, counting who arrived.
class Gate {
 public:
  void Arrive() {
    std::unique_lock lock(mutex_);
    ++arrived_;
    changed_.notify_all();
    changed_.wait(lock, [this] { return open_; });
  }
  void WaitFor(int count) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return arrived_ >= count; });
  }
  void Open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_ = 0;
  bool open_ = false;
};

TEST(WorkerPoolTest, RunsTasksOnEveryThreadAtOnce) {
  WorkerPool pool("pool-test", 3, 10);
  Gate gate;
  std::atomic<int> done{0};
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(pool.Post([&] {
                      gate.Arrive();
                      ++done;
                    })
                    .ok());
  }
  gate.WaitFor(3);  // all three are running at once: it would hang with fewer threads
  gate.Open();
  pool.Stop();
  EXPECT_EQ(done.load(), 3);
}

TEST(WorkerPoolTest, AFullQueueRefusesAndStopRunsWhatWaits) {
  WorkerPool pool("pool-test", 1, 2);
  Gate gate;
  std::atomic<int> done{0};
  ASSERT_TRUE(pool.Post([&] { gate.Arrive(); }).ok());
  gate.WaitFor(1);  // the one thread is busy
  EXPECT_TRUE(pool.Post([&] { ++done; }).ok());
  EXPECT_TRUE(pool.Post([&] { ++done; }).ok());
  const Status refused = pool.Post([&] { ++done; });
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted) << refused.ToString();
  gate.Open();
  pool.Stop();
  EXPECT_EQ(done.load(), 2);  // the queued ones ran, the refused one did not
  EXPECT_EQ(pool.Post([] {}).code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace rampart
