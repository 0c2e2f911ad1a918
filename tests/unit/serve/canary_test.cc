#include "serve/canary.h"

#include <gtest/gtest.h>

namespace rampart::serve {
namespace {

constexpr int64_t kMs = 1'000'000;

CanaryPolicy Policy() {
  CanaryPolicy policy;
  policy.baseline = 1;
  policy.candidate = 2;
  policy.stages_percent = {5, 20, 100};
  policy.min_requests = 100;
  policy.max_error_rate = 0.005;
  policy.max_p99_ratio = 1.5;
  return policy;
}

// Routes `count` requests and records them: the candidate answers with `candidate_ms` (failing
// when `candidate_fails`), the baseline with 10 ms.
void Drive(CanaryController& canary, int count, int64_t candidate_ms = 10,
           bool candidate_fails = false) {
  for (int i = 0; i < count; ++i) {
    const int64_t version = canary.Route();
    if (version == 2) {
      canary.Record(2, !candidate_fails, candidate_ms * kMs);
    } else {
      canary.Record(1, true, 10 * kMs);
    }
  }
}

TEST(Canary, RoutesExactlyTheStageShare) {
  CanaryController canary("m", Policy());
  int to_candidate = 0;
  for (int i = 0; i < 100; ++i) to_candidate += canary.Route() == 2;
  EXPECT_EQ(to_candidate, 5);
}

TEST(Canary, AdvancesThroughStagesAndPromotes) {
  CanaryController canary("m", Policy());
  Drive(canary, 2000);  // 5 %: the candidate reaches 100 requests after 2000
  CanaryStatus status = canary.Status();
  EXPECT_EQ(status.state, CanaryState::kRunning);
  EXPECT_EQ(status.stage, 1u);
  EXPECT_EQ(status.weight_percent, 20);
  Drive(canary, 500);  // 20 %
  EXPECT_EQ(canary.Status().weight_percent, 100);
  Drive(canary, 100);
  status = canary.Status();
  EXPECT_EQ(status.state, CanaryState::kPromoted);
  EXPECT_EQ(status.weight_percent, 100);
  EXPECT_NE(status.last_decision.find("promoted version 2"), std::string::npos);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(canary.Route(), 2);
}

TEST(Canary, RollsBackWhenTheErrorRatePassesTheLimit) {
  CanaryController canary("m", Policy());
  Drive(canary, 20, 10, /*candidate_fails=*/true);  // 1 failure in 100 is already 1 % > 0.5 %
  const CanaryStatus status = canary.Status();
  EXPECT_EQ(status.state, CanaryState::kRolledBack);
  EXPECT_EQ(status.weight_percent, 0);
  EXPECT_NE(status.last_decision.find("error rate"), std::string::npos) << status.last_decision;
  for (int i = 0; i < 100; ++i) EXPECT_EQ(canary.Route(), 1);
}

TEST(Canary, FailuresUpToTheRateAreTolerated) {
  CanaryPolicy policy = Policy();
  policy.min_requests = 400;  // 0.5 % of 400: two failures are still within the limit
  CanaryController canary("m", policy);
  canary.Record(2, false, 0);
  canary.Record(2, false, 0);
  EXPECT_EQ(canary.Status().state, CanaryState::kRunning);
  canary.Record(2, false, 0);
  EXPECT_EQ(canary.Status().state, CanaryState::kRolledBack);
}

TEST(Canary, RollsBackWhenTheCandidateIsSlow) {
  CanaryController canary("m", Policy());
  Drive(canary, 2000, /*candidate_ms=*/16);  // p99 16 ms > 1.5 x 10 ms
  const CanaryStatus status = canary.Status();
  EXPECT_EQ(status.state, CanaryState::kRolledBack);
  EXPECT_NE(status.last_decision.find("p99"), std::string::npos) << status.last_decision;
}

TEST(Canary, RejectsImpossiblePolicies) {
  CanaryPolicy same = Policy();
  same.candidate = 1;
  EXPECT_FALSE(same.Validate().ok());
  CanaryPolicy stages = Policy();
  stages.stages_percent = {20, 5};
  EXPECT_FALSE(stages.Validate().ok());
  CanaryPolicy ratio = Policy();
  ratio.max_p99_ratio = 0.5;
  EXPECT_FALSE(ratio.Validate().ok());
  EXPECT_TRUE(Policy().Validate().ok());
}

}  // namespace
}  // namespace rampart::serve
