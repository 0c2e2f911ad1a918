#include "core/cpu_affinity.h"

#include <gtest/gtest.h>

#include <sched.h>

#include <thread>

namespace rampart {
namespace {

TEST(CpuAffinity, ParsesListsAndRanges) {
  EXPECT_EQ(ParseCpuList("").value(), std::vector<int>{});
  EXPECT_EQ(ParseCpuList("3").value(), std::vector<int>{3});
  EXPECT_EQ(ParseCpuList("0-3,6").value(), (std::vector<int>{0, 1, 2, 3, 6}));
  EXPECT_EQ(ParseCpuList("6,2-3,3").value(), (std::vector<int>{2, 3, 6}));  // sorted, distinct
}

TEST(CpuAffinity, RejectsWhatIsNotACpuList) {
  for (const char* bad : {"a", "3-1", "1-", "-1", "1,,2", "0x1", "1 ", "99999"}) {
    Result<std::vector<int>> cpus = ParseCpuList(bad);
    ASSERT_FALSE(cpus.ok()) << bad;
    EXPECT_EQ(cpus.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(cpus.status().message().find("is not a CPU number or range"), std::string::npos);
  }
}

TEST(CpuAffinity, OnlyAllowedCpusPass) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  EXPECT_TRUE(CheckAllowedCpus(allowed).ok());
  const Status outside = CheckAllowedCpus({CPU_SETSIZE - 1});
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.message().find("is not one this process may run on"), std::string::npos);
}

TEST(CpuAffinity, PinsTheCallingThreadOnly) {
  const std::vector<int> allowed = AllowedCpus();
  const int target = allowed.back();
  int ran_on = -1;
  std::vector<int> pinned_set;
  std::thread pinned([&] {
    ASSERT_TRUE(PinThisThread({target}).ok());
    ran_on = sched_getcpu();
    pinned_set = AllowedCpus();
  });
  pinned.join();
  EXPECT_EQ(ran_on, target);
  EXPECT_EQ(pinned_set, std::vector<int>{target});
  EXPECT_EQ(AllowedCpus(), allowed);  // this thread is untouched
  EXPECT_TRUE(PinThisThread({}).ok());
  EXPECT_EQ(AllowedCpus(), allowed);
}

bool UsesBatchScheduling() { return sched_getscheduler(0) == SCHED_BATCH; }

TEST(CpuAffinity, BatchSchedulingIsForTheCallingThreadOnly) {
  ASSERT_FALSE(UsesBatchScheduling());
  bool moved = false;
  std::thread batch([&] {
    ASSERT_TRUE(UseBatchScheduling().ok());
    moved = UsesBatchScheduling();
  });
  batch.join();
  EXPECT_TRUE(moved);
  EXPECT_FALSE(UsesBatchScheduling());  // this thread is untouched
}

}  // namespace
}  // namespace rampart
