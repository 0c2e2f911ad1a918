#include "serve/scheduler.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <future>
#include <mutex>
#include <string_view>

#include "core/cpu_affinity.h"
#include "testing/fake_clock.h"

namespace rampart::serve {
namespace {

using std::chrono::seconds;

// Shared state of the fake instances: records every batch, and holds an execution whose first
// input value is negative until released.
struct Recorder {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<int64_t> batch_sizes;
  std::vector<float> executed_values;    // first value of each batch
  std::vector<std::thread::id> threads;  // the thread of each execution
  std::vector<int> cpus;                 // the CPU each execution started on
  std::vector<int> nices;                // the nice value of each execution's thread
  int active = 0;
  int max_active = 0;
  bool released = false;
  int wait_for_active = 0;  // when > 0, each execution waits until this many run at once
  int compute_threads = 1;  // what the instances report as ComputeThreads()

  void Release() {
    std::lock_guard lock(mutex);
    released = true;
    changed.notify_all();
  }
  template <typename Predicate>
  bool WaitFor(Predicate predicate) {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, seconds(10), predicate);
  }
};

// Doubles its FP32 input. Batches are visible to the test through the Recorder.
class RecordingInstance final : public backend::ModelInstance {
 public:
  explicit RecordingInstance(Recorder& recorder) : recorder_(recorder) {}

  int ComputeThreads() const override { return recorder_.compute_threads; }

  Result<backend::ExecutionResult> Execute(std::vector<tensor::Tensor>& inputs) override {
    const tensor::Tensor& x = inputs.at(0);
    float first = 0;
    std::memcpy(&first, x.data.data(), sizeof(float));
    {
      std::unique_lock lock(recorder_.mutex);
      recorder_.batch_sizes.push_back(x.shape[0]);
      recorder_.executed_values.push_back(first);
      recorder_.threads.push_back(std::this_thread::get_id());
      recorder_.cpus.push_back(sched_getcpu());
      recorder_.nices.push_back(ThisThreadNice());
      ++recorder_.active;
      recorder_.max_active = std::max(recorder_.max_active, recorder_.active);
      recorder_.changed.notify_all();
      if (first < 0) {
        recorder_.changed.wait_for(lock, seconds(10), [&] { return recorder_.released; });
      }
      if (recorder_.wait_for_active > 0) {
        recorder_.changed.wait_for(
            lock, seconds(10), [&] { return recorder_.max_active >= recorder_.wait_for_active; });
      }
      --recorder_.active;
    }
    backend::ExecutionResult result;
    tensor::Tensor y{"y", tensor::DataType::kFp32, x.shape, x.data};
    auto* values = reinterpret_cast<float*>(y.data.data());
    for (size_t i = 0; i < y.data.size() / sizeof(float); ++i) values[i] *= 2;
    result.outputs.push_back(std::move(y));
    return result;
  }

 private:
  Recorder& recorder_;
};

// A default queue timeout no test reaches (an hour), which requests may shorten.
BatchPolicy Policy(int max_batch_size, bool preserve_ordering = false) {
  BatchPolicy policy;
  policy.max_batch_size = max_batch_size;
  policy.preserve_ordering = preserve_ordering;
  QueuePolicy queue;
  queue.default_timeout = std::chrono::hours(1);
  queue.allow_timeout_override = true;
  policy.queue_policies.push_back(queue);
  return policy;
}

// The real clock, counting its reads by instance threads ("inst-m"). An instance thread reads it
// with the scheduler's lock held just before it decides and waits (RunInstance), so once a read
// is counted, anything enqueued afterwards finds the instance waiting on that decision.
class InstanceClock final : public Clock {
 public:
  SteadyTime Now() const override {
    char name[16] = {};
    pthread_getname_np(pthread_self(), name, sizeof(name));
    if (std::string_view(name).starts_with("inst-")) {
      std::lock_guard lock(mutex_);
      ++instance_reads_;
      read_.notify_all();
    }
    return Clock::Real().Now();
  }
  void WaitForInstanceReads(int reads) const {
    std::unique_lock lock(mutex_);
    ASSERT_TRUE(read_.wait_for(lock, seconds(10), [&] { return instance_reads_ >= reads; }));
  }

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable read_;
  mutable int instance_reads_ = 0;
};

class SchedulerTest : public ::testing::Test {
 protected:
  void Start(BatchPolicy policy, int instances,
             std::chrono::nanoseconds direct_limit = std::chrono::nanoseconds::zero(),
             InstanceThreadOptions threads = {}, const Clock& clock = Clock::Real()) {
    std::vector<std::unique_ptr<backend::ModelInstance>> list;
    for (int i = 0; i < instances; ++i)
      list.push_back(std::make_unique<RecordingInstance>(recorder_));
    scheduler_ = std::make_unique<Scheduler>("m", 1, std::move(policy), std::move(list), stats_,
                                             clock, direct_limit, std::move(threads));
  }

  // Sends requests one after another (each answered before the next) until one runs on this
  // thread; how many it took, or 0 if none did within `attempts`. The first execution always
  // runs on an instance thread (the model is not measured yet); after that an instance is idle
  // again microseconds after each answer.
  int SendUntilDirect(int attempts) {
    for (int i = 1; i <= attempts; ++i) {
      EXPECT_TRUE(Send(1).get().ok());
      std::lock_guard lock(recorder_.mutex);
      if (recorder_.threads.back() == std::this_thread::get_id()) return i;
    }
    return 0;
  }
  void TearDown() override {
    recorder_.Release();
    if (scheduler_) scheduler_->Stop();
  }

  // Enqueues one request of `rows` rows whose values are all `value`; the future completes with
  // the response. `cancelled`, when given, is the flag the request's client sets on leaving.
  std::future<Result<std::unique_ptr<InferResponse>>> Send(
      float value, int64_t rows = 1, uint64_t timeout_us = 0,
      std::shared_ptr<std::atomic<bool>> cancelled = nullptr) {
    auto promise = std::make_shared<std::promise<Result<std::unique_ptr<InferResponse>>>>();
    auto future = promise->get_future();
    SendThen(value, rows, timeout_us, std::move(cancelled),
             [promise](Result<std::unique_ptr<InferResponse>> result) {
               promise->set_value(std::move(result));
             });
    return future;
  }
  void SendThen(float value, int64_t rows, uint64_t timeout_us,
                std::shared_ptr<std::atomic<bool>> cancelled, InferCallback done) {
    auto request = std::make_unique<InferRequest>();
    request->model_name = "m";
    request->timeout_us = timeout_us;
    request->arrival = Clock::Real().Now();
    request->cancelled = std::move(cancelled);
    tensor::Tensor x{"x", tensor::DataType::kFp32, {rows, 2}, {}};
    for (int64_t i = 0; i < rows * 2; ++i) {
      x.data.append(reinterpret_cast<const char*>(&value), sizeof(float));
    }
    request->inputs.push_back(std::move(x));
    scheduler_->Enqueue(std::move(request), rows, std::move(done));
  }

  Recorder recorder_;
  Statistics stats_;
  InstanceClock instance_clock_;   // for Start's `clock`; outlives the scheduler
  testing::FakeClock fake_clock_;  // likewise: moves only when a test says
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(SchedulerTest, BatchesRequestsThatQueueWhileTheInstanceIsBusy) {
  Start(Policy(8), 1);
  auto blocker = Send(-1);
  ASSERT_TRUE(recorder_.WaitFor([&] { return recorder_.batch_sizes.size() == 1; }));
  std::vector<std::future<Result<std::unique_ptr<InferResponse>>>> waiting;
  for (int i = 1; i <= 5; ++i) waiting.push_back(Send(static_cast<float>(i), i == 3 ? 2 : 1));
  recorder_.Release();
  ASSERT_TRUE(blocker.get().ok());
  for (int i = 1; i <= 5; ++i) {
    auto result = waiting[static_cast<size_t>(i - 1)].get();
    ASSERT_TRUE(result.ok()) << result.status().ToString();
    const tensor::Tensor& y = (*result)->outputs.at(0);
    EXPECT_EQ(y.shape[0], i == 3 ? 2 : 1);  // split back by each request's rows
    float value = 0;
    std::memcpy(&value, y.data.data(), sizeof(float));
    EXPECT_FLOAT_EQ(value, 2.0f * static_cast<float>(i));
  }
  EXPECT_EQ(recorder_.batch_sizes, (std::vector<int64_t>{1, 6}));
  const StatisticsSnapshot stats = stats_.Snapshot();
  EXPECT_EQ(stats.execution_count, 2u);
  EXPECT_EQ(stats.inference_count, 7u);
  EXPECT_EQ(stats.success.count, 6u);
  EXPECT_EQ(stats.batch_stats.at(6).compute_infer.count, 1u);
}

TEST_F(SchedulerTest, InstancesRunInParallel) {
  recorder_.wait_for_active = 2;
  Start(Policy(0), 2);
  auto a = Send(1);
  auto b = Send(2);
  ASSERT_TRUE(a.get().ok());
  ASSERT_TRUE(b.get().ok());
  EXPECT_EQ(recorder_.max_active, 2);
}

TEST_F(SchedulerTest, PreservesOrderingAcrossInstances) {
  Start(Policy(1, /*preserve_ordering=*/true), 2);
  auto slow = Send(-1);
  ASSERT_TRUE(recorder_.WaitFor([&] { return recorder_.batch_sizes.size() == 1; }));
  auto fast = Send(5);
  ASSERT_TRUE(recorder_.WaitFor([&] { return recorder_.batch_sizes.size() == 2; }));
  // The fast request has executed, but its answer waits for the slow one before it.
  EXPECT_EQ(fast.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  recorder_.Release();
  ASSERT_TRUE(slow.get().ok());
  ASSERT_TRUE(fast.get().ok());
}

TEST_F(SchedulerTest, OrderedDeliveryLetsACallbackEnqueueOnTheSameModel) {
  // An ensemble's step callback starts its next step on the thread that delivers the answer; with
  // direct execution, that step runs and completes on the same thread, inside the delivery.
  Start(Policy(0, /*preserve_ordering=*/true), 2, /*direct_limit=*/std::chrono::seconds(1));
  ASSERT_GE(SendUntilDirect(1000), 2);
  std::promise<Result<std::unique_ptr<InferResponse>>> second;
  auto answered = second.get_future();
  // On a thread of its own, so that a deadlock fails the test instead of hanging it.
  auto chain = std::async(std::launch::async, [&] {
    SendThen(1, 1, 0, nullptr, [&](Result<std::unique_ptr<InferResponse>> first) {
      EXPECT_TRUE(first.ok());
      SendThen(2, 1, 0, nullptr, [&](Result<std::unique_ptr<InferResponse>> result) {
        second.set_value(std::move(result));
      });
    });
  });
  if (answered.wait_for(seconds(10)) != std::future_status::ready) {
    ADD_FAILURE() << "the second request was never answered (delivery deadlocked)";
    std::abort();  // the stuck threads cannot be joined
  }
  EXPECT_TRUE(answered.get().ok());
  chain.get();
}

TEST_F(SchedulerTest, ABatchCompletedByACancellationLeavesAtTheNextArrival) {
  BatchPolicy policy = Policy(8);
  policy.preferred_sizes = {4};
  policy.max_queue_delay = std::chrono::seconds(100);
  Start(std::move(policy), 1, std::chrono::nanoseconds::zero(), {}, instance_clock_);
  instance_clock_.WaitForInstanceReads(1);  // idle, waiting for work
  auto gone = std::make_shared<std::atomic<bool>>(false);
  auto a = Send(1, 2);
  instance_clock_.WaitForInstanceReads(2);  // a planned: the instance waits out the delay
  auto b = Send(2, 1, 0, gone);
  gone->store(true);    // b's client hangs up while it waits
  auto c = Send(3, 2);  // 2 + 2 rows once b is dropped: a preferred batch, at once
  ASSERT_EQ(a.wait_for(seconds(10)), std::future_status::ready);
  EXPECT_TRUE(a.get().ok());
  EXPECT_TRUE(c.get().ok());
  EXPECT_EQ(b.get().status().code(), StatusCode::kCancelled);
  std::lock_guard lock(recorder_.mutex);
  EXPECT_EQ(recorder_.batch_sizes, (std::vector<int64_t>{4}));
}

TEST_F(SchedulerTest, TimeoutRejectsWhileEveryInstanceIsBusy) {
  Start(Policy(4), 1);
  auto blocker = Send(-1);  // no timeout: it must run however loaded the machine is
  ASSERT_TRUE(recorder_.WaitFor([&] { return recorder_.batch_sizes.size() == 1; }));
  auto waiting = Send(1, 1, /*timeout_us=*/2000);
  auto result = waiting.get();  // the timer thread answers while the instance is still busy
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(result.status().message(), "Request timeout expired");
  EXPECT_EQ(blocker.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  recorder_.Release();
  ASSERT_TRUE(blocker.get().ok());
  const StatisticsSnapshot stats = stats_.Snapshot();
  EXPECT_EQ(stats.failures_by_reason[static_cast<int>(FailureReason::kRejected)], 1u);
  EXPECT_EQ(recorder_.batch_sizes.size(), 1u);  // the expired request never ran
}

TEST_F(SchedulerTest, StopRunsWhatIsQueuedThenRefuses) {
  Start(Policy(0), 1);
  auto blocker = Send(-1);
  ASSERT_TRUE(recorder_.WaitFor([&] { return recorder_.batch_sizes.size() == 1; }));
  auto queued = Send(3);
  std::thread stopper([this] { scheduler_->Stop(); });
  recorder_.Release();
  stopper.join();
  EXPECT_TRUE(blocker.get().ok());
  EXPECT_TRUE(queued.get().ok());
  auto refused = Send(4).get();
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
}

TEST_F(SchedulerTest, InstanceThreadsRunOnTheirCpus) {
  const int target = AllowedCpus().back();
  Start(Policy(0), 2, std::chrono::nanoseconds::zero(), {.cpus = {target}});
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(Send(static_cast<float>(i)).get().ok());
  std::lock_guard lock(recorder_.mutex);
  ASSERT_EQ(recorder_.cpus.size(), 6u);
  for (int cpu : recorder_.cpus) EXPECT_EQ(cpu, target);
}

// Lowering a priority (a higher nice value) is always allowed.
TEST_F(SchedulerTest, InstanceThreadsRunAtTheirNiceOffset) {
  const int own = ThisThreadNice();  // the instance threads start with their creator's
  Start(Policy(0), 2, std::chrono::nanoseconds::zero(), {.nice_offset = 3});
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(Send(static_cast<float>(i)).get().ok());
  std::lock_guard lock(recorder_.mutex);
  ASSERT_EQ(recorder_.nices.size(), 4u);
  for (int nice : recorder_.nices) EXPECT_EQ(nice, std::min(own + 3, 19));
  EXPECT_EQ(ThisThreadNice(), own);
  EXPECT_EQ(scheduler_->FavouredInstances(), 0);  // a lower priority holds no core
}

// A product split over several threads would wait for the ones a priority cannot reach.
TEST_F(SchedulerTest, InstancesComputingOnSeveralThreadsKeepTheirNiceValue) {
  const int own = ThisThreadNice();
  recorder_.compute_threads = 2;
  Start(Policy(0), 1, std::chrono::nanoseconds::zero(), {.nice_offset = 3});
  ASSERT_TRUE(Send(1).get().ok());
  std::lock_guard lock(recorder_.mutex);
  ASSERT_EQ(recorder_.nices.size(), 1u);
  EXPECT_EQ(recorder_.nices[0], own);
  EXPECT_EQ(scheduler_->FavouredInstances(), 0);
}

// Raising one needs privilege; without it the instance threads still serve, at the nice value
// they started with.
TEST_F(SchedulerTest, InstanceThreadsServeWhetherOrNotAHigherPriorityIsGranted) {
  const int own = ThisThreadNice();
  bool granted = false;
  std::thread probe([&] { granted = SetThisThreadNice(own - 1).ok(); });
  probe.join();
  Start(Policy(0), 2, std::chrono::nanoseconds::zero(), {.nice_offset = -1});
  // Counted before the constructor returns, not once the threads get round to it.
  EXPECT_EQ(scheduler_->FavouredInstances(), granted ? 2 : 0);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(Send(static_cast<float>(i)).get().ok());
  std::lock_guard lock(recorder_.mutex);
  ASSERT_EQ(recorder_.nices.size(), 4u);
  for (int nice : recorder_.nices) EXPECT_EQ(nice, granted ? std::max(own - 1, -20) : own);
}

TEST_F(SchedulerTest, FastModelRunsOnTheCallersThreadOnceMeasured) {
  Start(Policy(0), 1, /*direct_limit=*/std::chrono::seconds(1));
  const int attempts = SendUntilDirect(1000);
  EXPECT_GE(attempts, 2);  // never before the first measurement
  EXPECT_NE(recorder_.threads.front(), std::this_thread::get_id());
  EXPECT_GE(scheduler_->DirectExecutions(), 1u);
  const StatisticsSnapshot stats = stats_.Snapshot();
  EXPECT_EQ(stats.success.count, static_cast<uint64_t>(attempts));
  EXPECT_EQ(stats.execution_count, static_cast<uint64_t>(attempts));
}

TEST_F(SchedulerTest, DirectExecutionIsOffByDefault) {
  Start(Policy(0), 1);
  EXPECT_EQ(SendUntilDirect(50), 0);
  EXPECT_EQ(scheduler_->DirectExecutions(), 0u);
}

TEST_F(SchedulerTest, SlowModelStaysOnItsInstanceThreads) {
  Start(Policy(0), 1, /*direct_limit=*/std::chrono::nanoseconds(1));
  EXPECT_EQ(SendUntilDirect(50), 0);
  EXPECT_EQ(scheduler_->DirectExecutions(), 0u);
}

TEST_F(SchedulerTest, BatcherThatWaitsIsNeverBypassed) {
  BatchPolicy policy = Policy(8);
  policy.max_queue_delay = std::chrono::microseconds(100);
  Start(std::move(policy), 1, /*direct_limit=*/std::chrono::seconds(1));
  EXPECT_EQ(SendUntilDirect(50), 0);
  EXPECT_EQ(scheduler_->DirectExecutions(), 0u);
}

TEST_F(SchedulerTest, BatcherWithoutDelayRunsALoneRequestDirectly) {
  Start(Policy(8), 1, /*direct_limit=*/std::chrono::seconds(1));
  EXPECT_GE(SendUntilDirect(1000), 2);
}

// Starts a direct execution that blocks until released, on a thread of its own (`caller`), and
// returns once it is running: the instance is busy meanwhile.
class DirectExecutionTest : public SchedulerTest {
 protected:
  // On clock_, which moves only when a test says: executions take no time unless it does.
  void StartBlockedDirectExecution(std::chrono::nanoseconds direct_limit) {
    Start(Policy(0), 1, direct_limit, {}, fake_clock_);
    ASSERT_GE(SendUntilDirect(1000), 2);
    caller_ = std::thread([&] { blocked_ = Send(-1); });
    ASSERT_TRUE(recorder_.WaitFor([&] { return recorder_.active == 1; }));
    std::lock_guard lock(recorder_.mutex);
    caller_id_ = caller_.get_id();
    ASSERT_EQ(recorder_.threads.back(), caller_id_);
  }
  void TearDown() override {
    recorder_.Release();
    if (caller_.joinable()) caller_.join();
    SchedulerTest::TearDown();
  }
  // Executions per thread, in order, from the n-th execution on.
  std::vector<std::thread::id> ThreadsFrom(size_t n) {
    std::lock_guard lock(recorder_.mutex);
    return {recorder_.threads.begin() + static_cast<std::ptrdiff_t>(n), recorder_.threads.end()};
  }

  std::thread caller_;
  std::thread::id caller_id_;  // caller_'s, kept for after the join
  std::future<Result<std::unique_ptr<InferResponse>>> blocked_;
};

TEST_F(DirectExecutionTest, RequestsQueuedMeanwhileRunOnTheBorrowedThread) {
  StartBlockedDirectExecution(std::chrono::seconds(1));
  const size_t before = recorder_.threads.size();
  std::vector<std::future<Result<std::unique_ptr<InferResponse>>>> queued;
  for (int i = 0; i < 3; ++i) queued.push_back(Send(static_cast<float>(i + 1)));
  EXPECT_EQ(scheduler_->QueueSize(), 3u);
  EXPECT_EQ(scheduler_->BusyInstances(), 1u);  // the instance lent to the caller's thread
  recorder_.Release();
  caller_.join();
  ASSERT_TRUE(blocked_.get().ok());
  for (auto& answer : queued) ASSERT_TRUE(answer.get().ok());
  EXPECT_EQ(scheduler_->BusyInstances(), 0u);
  // No hand-off to the instance thread: the caller ran them, in order.
  const std::vector<std::thread::id> threads = ThreadsFrom(before);
  ASSERT_EQ(threads.size(), 3u);
  for (const std::thread::id& thread : threads) EXPECT_EQ(thread, caller_id_);
  std::lock_guard lock(recorder_.mutex);
  EXPECT_EQ(recorder_.executed_values.back(), 3.0f);
}

TEST_F(DirectExecutionTest, TheBorrowedThreadRunsABoundedNumber) {
  StartBlockedDirectExecution(std::chrono::seconds(1));
  const size_t before = recorder_.threads.size();
  const int extra = 5;
  std::vector<std::future<Result<std::unique_ptr<InferResponse>>>> queued;
  for (int i = 0; i < Scheduler::kMaxDirectExecutions - 1 + extra; ++i) {
    queued.push_back(Send(static_cast<float>(i + 1)));
  }
  recorder_.Release();
  caller_.join();
  for (auto& answer : queued) ASSERT_TRUE(answer.get().ok());
  const std::vector<std::thread::id> threads = ThreadsFrom(before);
  const auto on_caller = std::count(threads.begin(), threads.end(), caller_id_);
  EXPECT_EQ(on_caller, Scheduler::kMaxDirectExecutions - 1);  // plus its own, the blocked one
  for (size_t i = static_cast<size_t>(on_caller); i < threads.size(); ++i) {
    EXPECT_NE(threads[i], caller_id_);
    EXPECT_NE(threads[i], std::this_thread::get_id());  // the instance thread's
  }
}

TEST_F(DirectExecutionTest, RequestsQueuedBehindASlowExecutionGoToTheInstanceThread) {
  StartBlockedDirectExecution(std::chrono::milliseconds(1));
  auto queued = Send(7);
  EXPECT_EQ(scheduler_->QueueSize(), 1u);
  // The blocked execution takes 20 ms by the scheduler's clock, enough (over eight times the
  // limit) to lift the smoothed execution time above the direct-execution limit.
  fake_clock_.Advance(std::chrono::milliseconds(20));
  recorder_.Release();
  caller_.join();
  ASSERT_TRUE(blocked_.get().ok());
  ASSERT_TRUE(queued.get().ok());
  std::lock_guard lock(recorder_.mutex);
  EXPECT_EQ(recorder_.executed_values.back(), 7.0f);
  EXPECT_NE(recorder_.threads.back(), caller_id_);
  EXPECT_NE(recorder_.threads.back(), std::this_thread::get_id());
}

// The model whose settings the calling thread carries (what PrepareThread applies), as a runtime
// keeps a thread count per thread.
thread_local std::string thread_settings_of;

// Records, for each execution, the settings its thread carried: they must be its own model's.
class SettingsInstance final : public backend::ModelInstance {
 public:
  SettingsInstance(std::string model, std::vector<std::string>& seen, std::mutex& mutex)
      : model_(std::move(model)), seen_(seen), mutex_(mutex) {}
  void PrepareThread() override { thread_settings_of = model_; }
  Result<backend::ExecutionResult> Execute(std::vector<tensor::Tensor>& inputs) override {
    {
      std::lock_guard lock(mutex_);
      seen_.push_back(model_ + " ran with " + thread_settings_of + "'s settings");
    }
    backend::ExecutionResult result;
    result.outputs.push_back(std::move(inputs.at(0)));
    return result;
  }

 private:
  std::string model_;
  std::vector<std::string>& seen_;
  std::mutex& mutex_;
};

TEST(SchedulerThreadSettings, AStepRunOnAnotherModelsThreadLeavesThatThreadsSettingsAlone) {
  // Model a's answer starts model b's request on a's instance thread (an ensemble's next step
  // runs directly there once b is measured as fast); a's next batch must still run with a's
  // settings.
  std::mutex mutex;
  std::vector<std::string> seen;
  Statistics a_stats;
  Statistics b_stats;
  const auto make = [&](const std::string& name, Statistics& stats,
                        std::chrono::nanoseconds direct_limit) {
    std::vector<std::unique_ptr<backend::ModelInstance>> instances;
    instances.push_back(std::make_unique<SettingsInstance>(name, seen, mutex));
    return std::make_unique<Scheduler>(name, 1, Policy(0), std::move(instances), stats,
                                       Clock::Real(), direct_limit);
  };
  // a always runs on its own instance thread; b runs directly on its caller's once measured.
  std::unique_ptr<Scheduler> a = make("a", a_stats, std::chrono::nanoseconds::zero());
  std::unique_ptr<Scheduler> b = make("b", b_stats, std::chrono::seconds(1));
  const auto send = [](Scheduler& scheduler, InferCallback done) {
    auto request = std::make_unique<InferRequest>();
    request->arrival = Clock::Real().Now();
    request->inputs.push_back({"x", tensor::DataType::kFp32, {1, 1}, std::string(4, '\0')});
    scheduler.Enqueue(std::move(request), 1, std::move(done));
  };
  const auto sent = [&](Scheduler& scheduler) {
    auto answered = std::make_shared<std::promise<void>>();
    auto future = answered->get_future();
    send(scheduler, [answered](Result<std::unique_ptr<InferResponse>>) { answered->set_value(); });
    return future;
  };
  // b is measured by its first execution, on its own thread. Then a's answers start requests
  // for b from a's thread, where b runs directly once its instance is idle again (it is freed
  // just after its answer, so the first tries may still find it busy).
  sent(*b).wait();
  for (int attempt = 0; attempt < 1000 && b->DirectExecutions() == 0; ++attempt) {
    auto step_done = std::make_shared<std::promise<void>>();
    auto step = step_done->get_future();
    send(*a, [&, step_done](Result<std::unique_ptr<InferResponse>>) {
      send(*b, [step_done](Result<std::unique_ptr<InferResponse>>) { step_done->set_value(); });
    });
    ASSERT_EQ(step.wait_for(seconds(10)), std::future_status::ready);
  }
  // (The count moves just after the step's answer: one more attempt may have gone direct too.)
  ASSERT_GE(b->DirectExecutions(), 1u);
  sent(*a).wait();
  std::lock_guard lock(mutex);
  ASSERT_GE(seen.size(), 4u);
  EXPECT_EQ(seen.back(), "a ran with a's settings");
  for (const std::string& each : seen) {
    EXPECT_TRUE(each == "a ran with a's settings" || each == "b ran with b's settings") << each;
  }
}

// Throws from Execute while `throws` is set: what a runtime that lets an exception out does.
class ThrowingInstance final : public backend::ModelInstance {
 public:
  explicit ThrowingInstance(std::atomic<bool>& throws) : throws_(throws) {}
  Result<backend::ExecutionResult> Execute(std::vector<tensor::Tensor>& inputs) override {
    if (throws_.load()) throw std::bad_alloc();
    backend::ExecutionResult result;
    result.outputs.push_back(std::move(inputs.at(0)));
    return result;
  }

 private:
  std::atomic<bool>& throws_;
};

TEST(SchedulerExceptions, AnExceptionFailsItsBatchAndTheInstanceServesOn) {
  std::atomic<bool> throws{true};
  Statistics stats;
  std::vector<std::unique_ptr<backend::ModelInstance>> instances;
  instances.push_back(std::make_unique<ThrowingInstance>(throws));
  Scheduler scheduler("m", 1, Policy(4), std::move(instances), stats);
  const auto send = [&] {
    auto answered = std::make_shared<std::promise<Result<std::unique_ptr<InferResponse>>>>();
    auto future = answered->get_future();
    auto request = std::make_unique<InferRequest>();
    request->arrival = Clock::Real().Now();
    request->inputs.push_back({"x", tensor::DataType::kFp32, {1, 1}, std::string(4, '\0')});
    scheduler.Enqueue(std::move(request), 1,
                      [answered](Result<std::unique_ptr<InferResponse>> result) {
                        answered->set_value(std::move(result));
                      });
    return future;
  };
  Result<std::unique_ptr<InferResponse>> failed = send().get();
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(failed.status().message(), "out of memory while running a batch");
  throws = false;
  EXPECT_TRUE(send().get().ok());
  EXPECT_EQ(stats.Snapshot().fail.count, 1u);
}

TEST_F(SchedulerTest, ACallbackThatThrowsDoesNotStopTheModel) {
  Start(Policy(4, /*preserve_ordering=*/true), 1);
  std::promise<void> thrown;
  SendThen(1, 1, 0, nullptr, [&](Result<std::unique_ptr<InferResponse>>) {
    thrown.set_value();
    throw std::runtime_error("a front end's callback failed");
  });
  thrown.get_future().wait();
  // The next answer is delivered (in order after the first, which counts as delivered).
  EXPECT_TRUE(Send(2).get().ok());
}

}  // namespace
}  // namespace rampart::serve
