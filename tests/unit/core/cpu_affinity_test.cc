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

TEST(CpuAffinity, CountsTheCpusThisProcessMayRunOnNotTheMachines) {
  EXPECT_EQ(UsableCpuCount(), static_cast<int>(AllowedCpus().size()));
  int pinned_count = 0;
  std::thread pinned([&] {
    ASSERT_TRUE(PinThisThread({AllowedCpus().front()}).ok());
    pinned_count = UsableCpuCount();  // what a process started under `taskset -c N` sees
  });
  pinned.join();
  EXPECT_EQ(pinned_count, 1);
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

TEST(CpuAffinity, NiceIsForTheCallingThreadOnly) {
  const int own = ThisThreadNice();
  int lowered = 0;
  std::thread lower([&] {
    ASSERT_TRUE(SetThisThreadNice(own + 2).ok());  // a lower priority needs no privilege
    lowered = ThisThreadNice();
  });
  lower.join();
  EXPECT_EQ(lowered, std::min(own + 2, 19));
  EXPECT_EQ(ThisThreadNice(), own);  // this thread is untouched
}

TEST(CpuAffinity, AHigherPriorityIsGrantedOrRefusedWithTheReason) {
  const int own = ThisThreadNice();
  Status raised;
  int after = 0;
  std::thread raise([&] {
    raised = SetThisThreadNice(own - 1);
    after = ThisThreadNice();
  });
  raise.join();
  if (raised.ok()) {
    EXPECT_EQ(after, std::max(own - 1, -20));
  } else {
    EXPECT_EQ(raised.code(), StatusCode::kPermissionDenied);
    EXPECT_NE(raised.message().find("CAP_SYS_NICE"), std::string::npos) << raised.message();
    EXPECT_EQ(after, own);
  }
}

}  // namespace
}  // namespace rampart
