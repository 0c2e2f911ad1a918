#include "gateway/pool.h"

#include <gtest/gtest.h>

#include <map>

namespace rampart::gateway {
namespace {

using std::chrono::milliseconds;

std::shared_ptr<UpstreamState> Upstream(std::string name, EjectionConfig ejection = {},
                                        HealthCheckConfig health = {}) {
  UpstreamConfig config;
  config.name = std::move(name);
  config.url = "http://127.0.0.1:1";
  return std::make_shared<UpstreamState>(config, ejection, health);
}

TEST(UpstreamStateTest, EjectsAfterConsecutiveFailuresAndReadmits) {
  EjectionConfig ejection{.consecutive_failures = 3,
                          .base_ejection = milliseconds(1000),
                          .max_ejection = milliseconds(1500)};
  auto upstream = Upstream("a", ejection);
  const SteadyTime t0{};
  EXPECT_FALSE(upstream->RecordFailure(t0));
  upstream->RecordSuccess();  // resets the streak
  EXPECT_FALSE(upstream->RecordFailure(t0));
  EXPECT_FALSE(upstream->RecordFailure(t0));
  EXPECT_TRUE(upstream->RecordFailure(t0));
  EXPECT_FALSE(upstream->Available(t0 + milliseconds(999)));
  EXPECT_TRUE(upstream->Available(t0 + milliseconds(1000)));
  // Ejected again: longer, up to the cap.
  const SteadyTime t1 = t0 + milliseconds(1000);
  for (int i = 0; i < 3; ++i) upstream->RecordFailure(t1);
  EXPECT_FALSE(upstream->Available(t1 + milliseconds(1499)));
  EXPECT_TRUE(upstream->Available(t1 + milliseconds(1500)));
  EXPECT_EQ(upstream->ejections(), 2u);
}

TEST(UpstreamStateTest, HealthChecksNeedTheirThresholds) {
  auto upstream =
      Upstream("a", {}, HealthCheckConfig{.unhealthy_threshold = 2, .healthy_threshold = 2});
  EXPECT_FALSE(upstream->ReportCheck(false));
  EXPECT_TRUE(upstream->Healthy());
  EXPECT_TRUE(upstream->ReportCheck(false));
  EXPECT_FALSE(upstream->Healthy());
  EXPECT_FALSE(upstream->Available(SteadyTime{}));
  EXPECT_FALSE(upstream->ReportCheck(true));
  EXPECT_TRUE(upstream->ReportCheck(true));
  EXPECT_TRUE(upstream->Available(SteadyTime{}));
}

TEST(UpstreamStateTest, CoolsDownForRetryAfter) {
  auto upstream = Upstream("a");
  upstream->CoolDown(SteadyTime{} + milliseconds(50));
  EXPECT_FALSE(upstream->Available(SteadyTime{} + milliseconds(49)));
  EXPECT_TRUE(upstream->Available(SteadyTime{} + milliseconds(50)));
}

TEST(PoolTest, WeightsSplitTrafficExactly) {
  Pool pool({{.upstream = Upstream("a"), .priority = 100, .weight = 3},
             {.upstream = Upstream("b"), .priority = 100, .weight = 1}});
  std::map<std::string, int> picks;
  for (int i = 0; i < 400; ++i) {
    ++picks[pool.members()[pool.Choose(0, SteadyTime{}).index].upstream->config().name];
  }
  EXPECT_EQ(picks["a"], 300);
  EXPECT_EQ(picks["b"], 100);
}

TEST(PoolTest, FailsOverByPriorityAndAvoidsTriedEndpoints) {
  auto a = Upstream("a", {.consecutive_failures = 1});
  auto b = Upstream("b");
  auto c = Upstream("c");
  Pool pool({{.upstream = c, .priority = 50},
             {.upstream = a, .priority = 100},
             {.upstream = b, .priority = 90}});
  EXPECT_EQ(pool.members()[0].upstream, a);  // highest priority first
  Pool::Pick first = pool.Choose(0, SteadyTime{});
  EXPECT_EQ(pool.members()[first.index].upstream, a);
  EXPECT_FALSE(first.failover);
  // Tried a (this request): b, a failover.
  Pool::Pick second = pool.Choose(uint64_t{1} << first.index, SteadyTime{});
  EXPECT_EQ(pool.members()[second.index].upstream, b);
  EXPECT_TRUE(second.failover);
  // a ejected: every request starts at b.
  a->RecordFailure(SteadyTime{});
  Pool::Pick third = pool.Choose(0, SteadyTime{});
  EXPECT_EQ(pool.members()[third.index].upstream, b);
  // Everything tried and available: retry among them, highest first.
  Pool::Pick again = pool.Choose(0b111, SteadyTime{});
  EXPECT_EQ(pool.members()[again.index].upstream, b);
  EXPECT_FALSE(again.panic);
}

TEST(PoolTest, PanicsToAllWhenNothingIsAvailable) {
  auto a = Upstream("a", {.consecutive_failures = 1});
  Pool pool({{.upstream = a}});
  a->RecordFailure(SteadyTime{});
  Pool::Pick pick = pool.Choose(0, SteadyTime{});
  EXPECT_TRUE(pick.panic);
  EXPECT_EQ(pick.index, 0u);
}

}  // namespace
}  // namespace rampart::gateway
