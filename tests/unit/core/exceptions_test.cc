#include "core/exceptions.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <stdexcept>

#include "core/serial_worker.h"

namespace rampart {
namespace {

TEST(Exceptions, OutOfMemoryIsUnavailableAndOthersAreInternal) {
  const Status memory = CatchAsStatus("decoding", []() -> Status { throw std::bad_alloc(); });
  EXPECT_EQ(memory.code(), StatusCode::kUnavailable);
  EXPECT_EQ(memory.message(), "out of memory while decoding");
  const Result<int> other =
      CatchAsStatus("parsing", []() -> Result<int> { throw std::length_error("too long"); });
  EXPECT_EQ(other.status().code(), StatusCode::kInternal);
  EXPECT_EQ(other.status().message(), "parsing: too long");
  const Result<int> value = CatchAsStatus("adding", []() -> Result<int> { return 3; });
  EXPECT_EQ(*value, 3);
}

TEST(Exceptions, RunLoggingExceptionsSwallowsAndSaysSo) {
  EXPECT_TRUE(RunLoggingExceptions("here", [] {}));
  EXPECT_FALSE(RunLoggingExceptions("here", [] { throw std::runtime_error("boom"); }));
  EXPECT_FALSE(RunLoggingExceptions("here", [] { throw 42; }));
}

TEST(SerialWorker, AThrowingTaskDoesNotStopTheOthers) {
  SerialWorker worker("test");
  std::promise<void> second;
  ASSERT_TRUE(worker.Post([] { throw std::runtime_error("first"); }).ok());
  ASSERT_TRUE(worker.Post([&] { second.set_value(); }).ok());
  EXPECT_EQ(second.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
}

TEST(SerialWorker, ABoundedQueueRefusesWhatWouldWaitPastIt) {
  SerialWorker worker("test", /*max_queued=*/2);
  std::promise<void> started;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  ASSERT_TRUE(worker
                  .Post([&started, released] {
                    started.set_value();
                    released.wait();
                  })
                  .ok());
  started.get_future().wait();  // running, so no longer queued
  std::atomic<int> ran{0};
  EXPECT_TRUE(worker.Post([&] { ++ran; }).ok());
  EXPECT_TRUE(worker.Post([&] { ++ran; }).ok());
  const Status full = worker.Post([&] { ++ran; });
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(full.message(), "2 tasks are waiting already (at most 2)");
  release.set_value();
  worker.Stop();  // runs what is queued
  EXPECT_EQ(ran.load(), 2);
  EXPECT_EQ(worker.Post([] {}).code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace rampart
