#include "serve/batch_queue.h"

#include <gtest/gtest.h>

#include <limits>

namespace rampart::serve {
namespace {

using std::chrono::microseconds;

// The batcher's rules, driven with explicit times: no threads, no sleeps.
class BatchQueueTest : public ::testing::Test {
 protected:
  void Configure(std::string_view dynamic_batching, int max_batch_size = 8, bool ragged = false) {
    ConfigureText(fmt::format("max_batch_size: {} dynamic_batching {{ {} }}", max_batch_size,
                              dynamic_batching),
                  ragged);
  }
  // A model without dynamic_batching: one request per execution (rule 6).
  void ConfigureUnbatched() { ConfigureText("max_batch_size: 8", false); }

  void ConfigureText(std::string_view batching, bool ragged) {
    auto parsed = model::ParseConfigText(
        fmt::format("name: \"m\" backend: \"pytorch\" {} "
                    "input [ {{ name: \"x\" data_type: TYPE_FP32 dims: [ -1 ] {} }} ] "
                    "output [ {{ name: \"y\" data_type: TYPE_FP32 dims: [ -1 ] }} ]",
                    batching, ragged ? "allow_ragged_batch: true" : ""),
        "config.pbtxt");
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    model::ModelConfig config = parsed->config;
    ASSERT_TRUE(model::CompleteAndValidate(config, "m", "config.pbtxt").ok());
    auto policy = BatchPolicy::FromConfig(config);
    ASSERT_TRUE(policy.ok()) << policy.status().ToString();
    queue_ = std::make_unique<BatchQueue>(*policy);
  }

  // Adds a request of `items` rows (width `width`) at time `at_us`; returns its admission status.
  Status Add(int id, int64_t items, int64_t at_us, uint64_t priority = 0, uint64_t timeout_us = 0,
             int64_t width = 4) {
    auto request = std::make_unique<InferRequest>();
    request->model_name = "m";
    request->id = std::to_string(id);
    request->priority = priority;
    request->timeout_us = timeout_us;
    request->inputs.push_back({"x", tensor::DataType::kFp32, {items, width}, {}});
    const SteadyTime now = At(at_us);
    auto admission = queue_->Admit(*request, now);
    if (!admission.ok()) return admission.status();
    auto pending = std::make_unique<PendingRequest>();
    pending->request = std::move(request);
    pending->enqueued = now;
    pending->batch_items = items;
    pending->level = admission->level;
    pending->deadline = admission->deadline;
    queue_->Push(std::move(pending));
    return Status::Ok();
  }

  // Queues a one-row request whose client has gone away (it was admitted before it left).
  void PushCancelled(int id) {
    auto request = std::make_unique<InferRequest>();
    request->id = std::to_string(id);
    request->cancelled = std::make_shared<std::atomic<bool>>(true);
    request->inputs.push_back({"x", tensor::DataType::kFp32, {1, 4}, {}});
    auto pending = std::make_unique<PendingRequest>();
    pending->request = std::move(request);
    queue_->Push(std::move(pending));
  }

  static SteadyTime At(int64_t us) { return SteadyTime() + microseconds(us); }

  static std::vector<std::string> Ids(const BatchQueue::Decision& decision) {
    std::vector<std::string> ids;
    for (const auto& pending : decision.batch) ids.push_back(pending->request->id);
    return ids;
  }

  std::unique_ptr<BatchQueue> queue_;
};

TEST_F(BatchQueueTest, SendsPreferredSizeWithoutWaiting) {
  Configure("preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 1000000");
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(Add(i, 1, 0).ok());
  auto decision = queue_->Next(At(0));
  EXPECT_EQ(Ids(decision), (std::vector<std::string>{"0", "1", "2", "3"}));
  EXPECT_EQ(queue_->size(), 1u);
}

TEST_F(BatchQueueTest, PicksTheLargestReachablePreferredSize) {
  Configure("preferred_batch_size: [ 2, 4, 6 ] max_queue_delay_microseconds: 1000000");
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(Add(i, 1, 0).ok());
  EXPECT_EQ(queue_->Next(At(0)).batch.size(), 4u);
}

TEST_F(BatchQueueTest, WaitsForTheQueueDelayToTheMicrosecond) {
  Configure("preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 100");
  ASSERT_TRUE(Add(0, 1, 10).ok());
  ASSERT_TRUE(Add(1, 1, 50).ok());
  auto early = queue_->Next(At(109));
  EXPECT_TRUE(early.batch.empty());
  ASSERT_TRUE(early.wake_at.has_value());
  EXPECT_EQ(*early.wake_at, At(110));  // oldest (t=10) + 100 us
  auto due = queue_->Next(At(110));
  EXPECT_EQ(Ids(due), (std::vector<std::string>{"0", "1"}));
}

TEST_F(BatchQueueTest, LeavesEarlyWhenArrivalsCompleteAPreferredBatch) {
  Configure("preferred_batch_size: [ 3 ] max_queue_delay_microseconds: 100");
  ASSERT_TRUE(Add(0, 1, 0).ok());
  ASSERT_TRUE(Add(1, 1, 5).ok());
  EXPECT_TRUE(queue_->Next(At(6)).batch.empty());
  ASSERT_TRUE(Add(2, 1, 7).ok());
  EXPECT_EQ(queue_->Next(At(7)).batch.size(), 3u);
}

TEST_F(BatchQueueTest, WouldRunNowAnswersWhatNextWouldDo) {
  Configure("preferred_batch_size: [ 3 ] max_queue_delay_microseconds: 100");
  EXPECT_FALSE(queue_->WouldRunNow(At(0)));  // empty
  ASSERT_TRUE(Add(0, 1, 0).ok());
  ASSERT_TRUE(Add(1, 1, 5).ok());
  EXPECT_FALSE(queue_->WouldRunNow(At(6)));   // two of a preferred three, delay running
  EXPECT_TRUE(queue_->WouldRunNow(At(100)));  // the oldest has waited the delay
  ASSERT_TRUE(Add(2, 1, 7).ok());
  EXPECT_TRUE(queue_->WouldRunNow(At(7)));  // a preferred batch
  EXPECT_EQ(queue_->size(), 3u);            // asking takes nothing
  EXPECT_EQ(queue_->Next(At(7)).batch.size(), 3u);
  // A request whose shape cannot join means waiting cannot grow the batch (rule 5).
  ASSERT_TRUE(Add(3, 1, 8).ok());
  EXPECT_FALSE(queue_->WouldRunNow(At(9)));
  ASSERT_TRUE(Add(4, 1, 9, 0, 0, /*width=*/5).ok());
  EXPECT_TRUE(queue_->WouldRunNow(At(9)));
  EXPECT_EQ(Ids(queue_->Next(At(9))), (std::vector<std::string>{"3"}));
}

TEST_F(BatchQueueTest, WouldRunNowLooksPastCancelledRequests) {
  Configure("preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 100000");
  ASSERT_TRUE(Add(0, 2, 0).ok());
  PushCancelled(1);
  ASSERT_TRUE(Add(2, 2, 2).ok());
  // 2 + 1 + 2 rows reach no preferred size, but Next drops the cancelled row first: 2 + 2 = 4.
  EXPECT_TRUE(queue_->WouldRunNow(At(2)));
  auto decision = queue_->Next(At(2));
  EXPECT_EQ(Ids(decision), (std::vector<std::string>{"0", "2"}));
  EXPECT_EQ(decision.rejected.size(), 1u);
  // Nothing but cancelled requests: work for an instance (dropping them), and then nothing to
  // run or wait for (no oldest request to time a delay from; UBSan caught the overflow before).
  PushCancelled(3);
  PushCancelled(4);
  EXPECT_TRUE(queue_->WouldRunNow(At(5)));
  auto dropped = queue_->Next(At(5));
  EXPECT_TRUE(dropped.batch.empty());
  EXPECT_EQ(dropped.rejected.size(), 2u);
  EXPECT_FALSE(dropped.wake_at.has_value());
  EXPECT_FALSE(queue_->WouldRunNow(At(5)));
}

TEST_F(BatchQueueTest, CancelledRequestsAreDroppedOnlyAsFarAsABatchReaches) {
  Configure("", /*max_batch_size=*/2);
  ASSERT_TRUE(Add(0, 1, 0).ok());
  ASSERT_TRUE(Add(1, 1, 0).ok());
  PushCancelled(2);
  ASSERT_TRUE(Add(3, 1, 0).ok());
  PushCancelled(4);
  // The first batch is full after two: nothing behind it is looked at.
  BatchQueue::Decision first = queue_->Next(At(0));
  EXPECT_EQ(Ids(first), (std::vector<std::string>{"0", "1"}));
  EXPECT_TRUE(first.rejected.empty());
  EXPECT_EQ(queue_->size(), 3u);
  EXPECT_TRUE(queue_->WouldRunNow(At(0)));
  // The next walk drops the cancelled ones it passes on its way to filling a batch.
  BatchQueue::Decision second = queue_->Next(At(0));
  EXPECT_EQ(Ids(second), (std::vector<std::string>{"3"}));
  std::vector<std::string> rejected;
  for (const auto& each : second.rejected) rejected.push_back(each.pending->request->id);
  EXPECT_EQ(rejected, (std::vector<std::string>{"2", "4"}));
  EXPECT_TRUE(queue_->empty());
}

TEST_F(BatchQueueTest, AFullQueueOfCancelledRequestsIsDroppedByOneWalk) {
  Configure("max_queue_delay_microseconds: 100", /*max_batch_size=*/4);
  for (int id = 0; id < 100; ++id) PushCancelled(id);
  ASSERT_TRUE(Add(100, 1, 0).ok());
  BatchQueue::Decision decision = queue_->Next(At(100));
  EXPECT_EQ(Ids(decision), (std::vector<std::string>{"100"}));
  EXPECT_EQ(decision.rejected.size(), 100u);
  EXPECT_TRUE(queue_->empty());
}

TEST_F(BatchQueueTest, CapsAtMaxBatchSizeAndNeverSplitsARequest) {
  Configure("max_queue_delay_microseconds: 100", /*max_batch_size=*/8);
  ASSERT_TRUE(Add(0, 3, 0).ok());
  ASSERT_TRUE(Add(1, 3, 0).ok());
  ASSERT_TRUE(Add(2, 3, 0).ok());  // 9 > 8: cannot join, so waiting cannot grow the batch
  auto decision = queue_->Next(At(0));
  EXPECT_EQ(Ids(decision), (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(queue_->size(), 1u);
}

TEST_F(BatchQueueTest, FullBatchGoesAtOnce) {
  Configure("max_queue_delay_microseconds: 1000000", /*max_batch_size=*/4);
  ASSERT_TRUE(Add(0, 2, 0).ok());
  EXPECT_TRUE(queue_->Next(At(1)).batch.empty());
  ASSERT_TRUE(Add(1, 2, 2).ok());
  EXPECT_EQ(queue_->Next(At(2)).batch.size(), 2u);
}

TEST_F(BatchQueueTest, ZeroDelayBatchesWhatHasQueued) {
  Configure("");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Add(i, 1, 0).ok());
  EXPECT_EQ(queue_->Next(At(0)).batch.size(), 3u);
}

TEST_F(BatchQueueTest, ShapesNeverMix) {
  Configure("max_queue_delay_microseconds: 1000000");
  ASSERT_TRUE(Add(0, 1, 0, 0, 0, /*width=*/4).ok());
  ASSERT_TRUE(Add(1, 1, 0, 0, 0, /*width=*/4).ok());
  ASSERT_TRUE(Add(2, 1, 0, 0, 0, /*width=*/5).ok());
  ASSERT_TRUE(Add(3, 1, 0, 0, 0, /*width=*/4).ok());
  EXPECT_EQ(Ids(queue_->Next(At(0))), (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(Ids(queue_->Next(At(0))), (std::vector<std::string>{"2"}));
  EXPECT_EQ(Ids(queue_->Next(At(2000000))), (std::vector<std::string>{"3"}));
}

TEST_F(BatchQueueTest, RaggedInputsShareABatchWhateverTheirShapes) {
  Configure("max_queue_delay_microseconds: 1000000", 8, /*ragged=*/true);
  ASSERT_TRUE(Add(0, 1, 0, 0, 0, /*width=*/4).ok());
  ASSERT_TRUE(Add(1, 1, 0, 0, 0, /*width=*/5).ok());
  ASSERT_TRUE(Add(2, 2, 0, 0, 0, /*width=*/3).ok());
  EXPECT_EQ(Ids(queue_->Next(At(1000000))), (std::vector<std::string>{"0", "1", "2"}));
}

TEST_F(BatchQueueTest, HigherPriorityFirstAndFifoWithinALevel) {
  Configure("priority_levels: 3 default_priority_level: 2", /*max_batch_size=*/2);
  ASSERT_TRUE(Add(0, 1, 0, 3).ok());
  ASSERT_TRUE(Add(1, 1, 1).ok());  // default level 2
  ASSERT_TRUE(Add(2, 1, 2, 1).ok());
  ASSERT_TRUE(Add(3, 1, 3, 2).ok());
  ASSERT_TRUE(Add(4, 1, 4, 1).ok());
  EXPECT_EQ(Ids(queue_->Next(At(5))), (std::vector<std::string>{"2", "4"}));
  EXPECT_EQ(Ids(queue_->Next(At(5))), (std::vector<std::string>{"1", "3"}));
  EXPECT_EQ(Ids(queue_->Next(At(5))), (std::vector<std::string>{"0"}));
}

TEST_F(BatchQueueTest, PriorityPastTheModelsLevelsMeansTheDefaultLevel) {
  // Triton's InferenceRequest::SetPriority: a level the model does not have is its default.
  Configure("priority_levels: 3 default_priority_level: 2", /*max_batch_size=*/2);
  ASSERT_TRUE(Add(0, 1, 0, 3).ok());
  ASSERT_TRUE(Add(1, 1, 1, 4).ok());
  ASSERT_TRUE(Add(2, 1, 2, 1).ok());
  EXPECT_EQ(Ids(queue_->Next(At(3))), (std::vector<std::string>{"2", "1"}));
  EXPECT_EQ(Ids(queue_->Next(At(3))), (std::vector<std::string>{"0"}));
  // A model without priority levels takes any priority.
  Configure("max_queue_delay_microseconds: 0");
  EXPECT_TRUE(Add(3, 1, 4, 7).ok());
}

TEST_F(BatchQueueTest, FullQueueRejectsWithTritonsMessage) {
  Configure("default_queue_policy { max_queue_size: 2 }");
  ASSERT_TRUE(Add(0, 1, 0).ok());
  ASSERT_TRUE(Add(1, 1, 0).ok());
  Status full = Add(2, 1, 0);
  EXPECT_EQ(full.code(), StatusCode::kUnavailable);
  EXPECT_EQ(full.message(), "Exceeds maximum queue size");
}

TEST_F(BatchQueueTest, TimeoutRejectsWhileWaiting) {
  Configure(
      "max_queue_delay_microseconds: 1000 default_queue_policy { "
      "default_timeout_microseconds: 300 }");
  ASSERT_TRUE(Add(0, 1, 0).ok());
  ASSERT_TRUE(Add(1, 1, 200).ok());
  std::optional<SteadyTime> next;
  EXPECT_TRUE(queue_->Expire(At(299), next).empty());
  EXPECT_EQ(next, At(300));
  auto expired = queue_->Expire(At(300), next);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].pending->request->id, "0");
  EXPECT_EQ(expired[0].status.message(), "Request timeout expired");
  EXPECT_EQ(next, At(500));
  EXPECT_EQ(queue_->size(), 1u);
}

TEST_F(BatchQueueTest, RequestTimeoutOnlyShortensAndOnlyWhenAllowed) {
  Configure(
      "default_queue_policy { default_timeout_microseconds: 1000 "
      "allow_timeout_override: true }");
  ASSERT_TRUE(Add(0, 1, 0, 0, /*timeout_us=*/100).ok());
  ASSERT_TRUE(Add(1, 1, 0, 0, /*timeout_us=*/5000).ok());  // cannot lengthen
  std::optional<SteadyTime> next;
  EXPECT_EQ(queue_->Expire(At(100), next).size(), 1u);
  EXPECT_EQ(next, At(1000));

  Configure("default_queue_policy { default_timeout_microseconds: 1000 }");
  ASSERT_TRUE(Add(0, 1, 0, 0, /*timeout_us=*/100).ok());  // override not allowed
  EXPECT_TRUE(queue_->Expire(At(100), next).empty());
}

TEST_F(BatchQueueTest, RequestTimeoutsPastInt64StillOnlyShorten) {
  Configure(
      "default_queue_policy { default_timeout_microseconds: 1000 "
      "allow_timeout_override: true }");
  ASSERT_TRUE(Add(0, 1, 0, 0, /*timeout_us=*/std::numeric_limits<uint64_t>::max()).ok());
  ASSERT_TRUE(Add(1, 1, 0, 0, /*timeout_us=*/uint64_t{1} << 63).ok());
  std::optional<SteadyTime> next;
  EXPECT_TRUE(queue_->Expire(At(999), next).empty());
  EXPECT_EQ(queue_->Expire(At(1000), next).size(), 2u);  // the default held for both

  // Under the longest default, a timeout just below it still shortens it.
  Configure(fmt::format(
      "default_queue_policy {{ default_timeout_microseconds: {} allow_timeout_override: true }}",
      kMaxQueueMicros));
  ASSERT_TRUE(Add(0, 1, 0, 0, /*timeout_us=*/std::numeric_limits<uint64_t>::max()).ok());
  ASSERT_TRUE(Add(1, 1, 0, 0, /*timeout_us=*/kMaxQueueMicros - 1).ok());
  EXPECT_TRUE(queue_->Expire(At(0), next).empty());
  EXPECT_EQ(next, At(static_cast<int64_t>(kMaxQueueMicros - 1)));
}

// Triton's PolicyQueue::Enqueue: a request's timeout can shorten the level's default timeout, and
// where the level has none, there is nothing to shorten.
TEST_F(BatchQueueTest, RequestTimeoutIsIgnoredWithoutADefault) {
  Configure("default_queue_policy { allow_timeout_override: true }");
  ASSERT_TRUE(Add(0, 1, 0, 0, /*timeout_us=*/100).ok());
  std::optional<SteadyTime> next;
  EXPECT_TRUE(queue_->Expire(At(1000), next).empty());
  EXPECT_FALSE(next.has_value());
  EXPECT_EQ(queue_->size(), 1u);
}

TEST_F(BatchQueueTest, DelayActionMovesBehindUnexpiredRequests) {
  Configure(
      "default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 1000000 "
      "allow_timeout_override: true }",
      /*max_batch_size=*/1);
  ASSERT_TRUE(Add(0, 1, 0, 0, /*timeout_us=*/10).ok());
  ASSERT_TRUE(Add(1, 1, 1).ok());
  std::optional<SteadyTime> next;
  EXPECT_TRUE(queue_->Expire(At(10), next).empty());  // delayed, not rejected
  EXPECT_EQ(Ids(queue_->Next(At(11))), (std::vector<std::string>{"1"}));
  EXPECT_EQ(Ids(queue_->Next(At(11))), (std::vector<std::string>{"0"}));
}

TEST_F(BatchQueueTest, CancelledRequestsNeverReachABatch) {
  Configure("");
  ASSERT_TRUE(Add(0, 1, 0).ok());
  ASSERT_TRUE(Add(1, 1, 0).ok());
  PushCancelled(2);
  auto decision = queue_->Next(At(0));
  EXPECT_EQ(Ids(decision), (std::vector<std::string>{"0", "1"}));
  ASSERT_EQ(decision.rejected.size(), 1u);
  EXPECT_EQ(decision.rejected[0].status.code(), StatusCode::kCancelled);
}

TEST_F(BatchQueueTest, RequestsLeavingFromTheMiddleKeepTheOthersInOrder) {
  Configure(
      "default_queue_policy { default_timeout_microseconds: 1000000 "
      "allow_timeout_override: true }");
  for (int id : {0, 1, 2, 3, 4, 5}) {
    const uint64_t timeout_us = id == 1 || id == 4 ? 10 : 0;  // 1 and 4 time out
    ASSERT_TRUE(Add(id, 1, 0, 0, timeout_us).ok());
  }
  PushCancelled(6);
  ASSERT_TRUE(Add(7, 1, 0).ok());

  const BatchQueue::Decision decision = queue_->Next(At(10));
  EXPECT_EQ(Ids(decision), (std::vector<std::string>{"0", "2", "3", "5", "7"}));
  std::vector<std::string> rejected;
  for (const auto& each : decision.rejected) rejected.push_back(each.pending->request->id);
  EXPECT_EQ(rejected, (std::vector<std::string>{"6", "1", "4"}));  // cancelled, then expired
  EXPECT_TRUE(queue_->empty());
}

TEST_F(BatchQueueTest, OneAtATimeDropsCancelledRequestsWhenTheyComeUp) {
  ConfigureUnbatched();
  ASSERT_TRUE(Add(0, 1, 0).ok());
  PushCancelled(1);
  ASSERT_TRUE(Add(2, 1, 0).ok());

  BatchQueue::Decision first = queue_->Next(At(0));
  EXPECT_EQ(Ids(first), (std::vector<std::string>{"0"}));
  EXPECT_TRUE(first.rejected.empty());
  BatchQueue::Decision second = queue_->Next(At(0));
  EXPECT_EQ(Ids(second), (std::vector<std::string>{"2"}));
  ASSERT_EQ(second.rejected.size(), 1u);
  EXPECT_EQ(second.rejected[0].pending->request->id, "1");
  EXPECT_EQ(second.rejected[0].status.code(), StatusCode::kCancelled);
  EXPECT_TRUE(queue_->empty());
}

TEST_F(BatchQueueTest, TimeoutsStillApplyAfterRequestsWithoutThemLeave) {
  // Level 1 has no timeout; level 2 a 10 µs one.
  Configure(
      "priority_levels: 2 default_priority_level: 1 "
      "priority_queue_policy { key: 2 value: { default_timeout_microseconds: 10 } }",
      /*max_batch_size=*/1);
  ASSERT_TRUE(Add(0, 1, 0).ok());
  ASSERT_TRUE(Add(1, 1, 0, /*priority=*/2).ok());
  EXPECT_EQ(Ids(queue_->Next(At(0))), (std::vector<std::string>{"0"}));
  std::optional<SteadyTime> next;
  EXPECT_TRUE(queue_->Expire(At(5), next).empty());
  EXPECT_EQ(next, At(10));
  EXPECT_EQ(queue_->Expire(At(10), next).size(), 1u);
  EXPECT_FALSE(next.has_value());
  EXPECT_TRUE(queue_->empty());
}

TEST(BatchPolicy, ModelsWithoutDynamicBatchingRunOneAtATimeWithABoundedQueue) {
  auto parsed = model::ParseConfigText(
      "name: \"m\" backend: \"pytorch\" max_batch_size: 8 "
      "input [ { name: \"x\" data_type: TYPE_FP32 dims: [ 1 ] } ] "
      "output [ { name: \"y\" data_type: TYPE_FP32 dims: [ 1 ] } ]",
      "c");
  auto policy = BatchPolicy::FromConfig(parsed->config);
  ASSERT_TRUE(policy.ok());
  EXPECT_EQ(policy->max_batch_size, 0);
  EXPECT_EQ(policy->queue_policies[0].max_queue_size, BatchPolicy::kDefaultMaxQueueSize);
}

TEST(BatchPolicy, EveryLevelIsBoundedByDefaultAndAConfiguredSizeWins) {
  auto parsed = model::ParseConfigText(
      "name: \"m\" backend: \"pytorch\" max_batch_size: 8 "
      "dynamic_batching { priority_levels: 2 default_priority_level: 1 "
      "priority_queue_policy { key: 2 value: { max_queue_size: 7 } } } "
      "input [ { name: \"x\" data_type: TYPE_FP32 dims: [ 1 ] } ] "
      "output [ { name: \"y\" data_type: TYPE_FP32 dims: [ 1 ] } ]",
      "c");
  ASSERT_TRUE(parsed.ok());
  auto bounded = BatchPolicy::FromConfig(parsed->config);
  ASSERT_TRUE(bounded.ok());
  EXPECT_EQ(bounded->queue_policies[0].max_queue_size, BatchPolicy::kDefaultMaxQueueSize);
  EXPECT_EQ(bounded->queue_policies[1].max_queue_size, 7u);
  auto chosen = BatchPolicy::FromConfig(parsed->config, /*default_max_queue_size=*/50);
  ASSERT_TRUE(chosen.ok());
  EXPECT_EQ(chosen->queue_policies[0].max_queue_size, 50u);
  auto unbounded = BatchPolicy::FromConfig(parsed->config, /*default_max_queue_size=*/0);
  ASSERT_TRUE(unbounded.ok());
  EXPECT_EQ(unbounded->queue_policies[0].max_queue_size, 0u);
  EXPECT_EQ(unbounded->queue_policies[1].max_queue_size, 7u);
}

TEST(BatchPolicy, RefusesDelaysAndTimeoutsPastAnyClock) {
  const auto policy_for = [](std::string_view batching) {
    auto parsed = model::ParseConfigText(
        fmt::format("name: \"m\" backend: \"pytorch\" max_batch_size: 8 "
                    "dynamic_batching {{ {} }} "
                    "input [ {{ name: \"x\" data_type: TYPE_FP32 dims: [ 1 ] }} ] "
                    "output [ {{ name: \"y\" data_type: TYPE_FP32 dims: [ 1 ] }} ]",
                    batching),
        "c");
    EXPECT_TRUE(parsed.ok());
    return BatchPolicy::FromConfig(parsed->config);
  };
  // As int64 microseconds, 2^64 - 1 would be -1: a batcher that never waits.
  auto delay = policy_for("max_queue_delay_microseconds: 18446744073709551615");
  ASSERT_FALSE(delay.ok());
  EXPECT_EQ(delay.status().message(),
            "model 'm': dynamic_batching.max_queue_delay_microseconds: 18446744073709551615 is "
            "too large (at most 1000000000000000)");
  auto timeout = policy_for(
      "priority_levels: 2 default_priority_level: 1 priority_queue_policy { key: 2 value: { "
      "default_timeout_microseconds: 9223372036854775808 } }");
  ASSERT_FALSE(timeout.ok());
  EXPECT_EQ(timeout.status().message(),
            "model 'm': dynamic_batching.priority_queue_policy[2].default_timeout_microseconds: "
            "9223372036854775808 is too large (at most 1000000000000000)");
  EXPECT_TRUE(policy_for("max_queue_delay_microseconds: 1000000000000000").ok());
  // One queue per level: ten trillion would not fit in memory.
  auto levels = policy_for("priority_levels: 10000000000000 default_priority_level: 1");
  ASSERT_FALSE(levels.ok());
  EXPECT_EQ(levels.status().message(),
            "model 'm': dynamic_batching.priority_levels must be at most 1024 (each level is a "
            "queue the batcher scans), got 10000000000000");
  EXPECT_TRUE(policy_for("priority_levels: 1024 default_priority_level: 1").ok());
}

}  // namespace
}  // namespace rampart::serve
