#include "policy/quota.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "testing/fake_clock.h"

namespace rampart::policy {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// The fake clock starts at 01:00:00 UTC on 1970-01-01 (Unix 3600): a minute and a day start.
constexpr int64_t kStart = 3600;

identity::Identity Caller(std::string key, std::string principal = "alice",
                          std::string tenant = "acme") {
  identity::Identity identity;
  identity.method = identity::Method::kApiKey;
  identity.tenant = std::move(tenant);
  identity.principal = std::move(principal);
  identity.key_id = std::move(key);
  return identity;
}

QuotaRule Rule(std::string scope, QuotaLimits limits, std::string name = "*",
               std::string tenant = "*") {
  return QuotaRule{std::move(scope), std::move(tenant), std::move(name), limits};
}

class QuotaTest : public ::testing::Test {
 protected:
  std::unique_ptr<QuotaLedger> Ledger(std::vector<QuotaRule> rules) {
    return std::make_unique<QuotaLedger>(
        QuotaOptions{.rules = std::move(rules), .default_reserved_tokens = 1024, .clock = &clock_},
        nullptr);
  }

  testing::FakeClock clock_;
};

TEST_F(QuotaTest, NoRuleAdmitsWithAnEmptyReservation) {
  auto ledger = Ledger({Rule("key", {.requests_per_minute = 1}, "rk_other")});
  for (int i = 0; i < 5; ++i) {
    QuotaLedger::Admission admission = ledger->Admit(Caller("rk_mine"), 100);
    EXPECT_TRUE(admission.admitted());
    EXPECT_TRUE(admission.reservation.empty());
  }
  EXPECT_EQ(ledger->SubjectsHeld(), 0u);
  EXPECT_EQ(ledger->DefaultReservedTokens(), 1024);
}

TEST_F(QuotaTest, RequestsPerMinuteRefusesTheNextAndRollsOverWithTheMinute) {
  auto ledger = Ledger({Rule("key", {.requests_per_minute = 3})});
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(ledger->Admit(Caller("rk_a"), 0).admitted()) << i;
  QuotaLedger::Admission refused = ledger->Admit(Caller("rk_a"), 0);
  ASSERT_FALSE(refused.admitted());
  EXPECT_TRUE(refused.reservation.empty());
  EXPECT_EQ(refused.refusal->limit, "requests_per_minute");
  EXPECT_FALSE(refused.refusal->budget);
  EXPECT_EQ(refused.refusal->retry_after_seconds, 60);
  EXPECT_EQ(refused.refusal->status.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.refusal->status.message(), "rate limit: 3 requests per minute for key rk_a");
  // Another key has its own counter.
  EXPECT_TRUE(ledger->Admit(Caller("rk_b"), 0).admitted());

  clock_.Advance(milliseconds(59'200));  // 0.8 s before the minute ends: Retry-After rounds up
  refused = ledger->Admit(Caller("rk_a"), 0);
  ASSERT_FALSE(refused.admitted());
  EXPECT_EQ(refused.refusal->retry_after_seconds, 1);
  clock_.Advance(milliseconds(800));  // the next minute
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(ledger->Admit(Caller("rk_a"), 0).admitted()) << i;
  EXPECT_FALSE(ledger->Admit(Caller("rk_a"), 0).admitted());
}

TEST_F(QuotaTest, TokensPerMinuteSettlesDownAndUp) {
  auto ledger = Ledger({Rule("key", {.tokens_per_minute = 100})});
  QuotaLedger::Admission first = ledger->Admit(Caller("rk_a"), 60);
  ASSERT_TRUE(first.admitted());
  QuotaLedger::Admission refused = ledger->Admit(Caller("rk_a"), 50);
  ASSERT_FALSE(refused.admitted());
  EXPECT_EQ(refused.refusal->limit, "tokens_per_minute");
  EXPECT_FALSE(refused.refusal->budget);
  EXPECT_EQ(refused.refusal->status.message(), "rate limit: 100 tokens per minute for key rk_a");

  first.reservation.Settle(10);  // 50 of the 60 come back
  first.reservation.Settle(90);  // once: a second settlement changes nothing
  QuotaLedger::Admission second = ledger->Admit(Caller("rk_a"), 50);
  ASSERT_TRUE(second.admitted());  // 10 + 50
  second.reservation.Settle(85);   // an overrun is taken, never refused: 10 + 85
  EXPECT_FALSE(ledger->Admit(Caller("rk_a"), 6).admitted());
  EXPECT_TRUE(ledger->Admit(Caller("rk_a"), 5).admitted());  // exactly 100
  EXPECT_FALSE(ledger->Admit(Caller("rk_a"), 1).admitted());
  // A request of no tokens is not held back by token limits.
  EXPECT_TRUE(ledger->Admit(Caller("rk_a"), 0).admitted());
}

TEST_F(QuotaTest, AReservationDroppedUnsettledKeepsItsTokensSpent) {
  auto ledger = Ledger({Rule("key", {.tokens_per_minute = 100})});
  { QuotaLedger::Admission dropped = ledger->Admit(Caller("rk_a"), 70); }
  EXPECT_FALSE(ledger->Admit(Caller("rk_a"), 31).admitted());
  EXPECT_TRUE(ledger->Admit(Caller("rk_a"), 30).admitted());
}

TEST_F(QuotaTest, ARequestNeedingMoreThanALimitIsABudgetRefusal) {
  auto ledger = Ledger({Rule("tenant", {.tokens_per_minute = 100})});
  QuotaLedger::Admission refused = ledger->Admit(Caller("rk_a"), 101);
  ASSERT_FALSE(refused.admitted());
  EXPECT_TRUE(refused.refusal->budget);  // retrying will never help
  EXPECT_EQ(refused.refusal->status.message(),
            "rate limit: the request needs 101 tokens, more than the 100 per minute for tenant "
            "acme");
}

TEST_F(QuotaTest, ReservationsSettleInTheWindowTheyWereTakenIn) {
  auto ledger = Ledger({Rule("key", {.tokens_per_minute = 100})});
  QuotaLedger::Admission old = ledger->Admit(Caller("rk_a"), 60);
  ASSERT_TRUE(old.admitted());
  clock_.Advance(seconds(60));
  QuotaLedger::Admission current = ledger->Admit(Caller("rk_a"), 100);
  ASSERT_TRUE(current.admitted());
  old.reservation.Settle(0);  // gives back to the minute that has ended, not to this one
  EXPECT_FALSE(ledger->Admit(Caller("rk_a"), 1).admitted());
}

TEST_F(QuotaTest, ConcurrentRequestsAreReleasedOnDestruction) {
  auto ledger = Ledger({Rule("principal", {.concurrent_requests = 2})});
  std::vector<Reservation> held;
  for (int i = 0; i < 2; ++i) {
    QuotaLedger::Admission admission = ledger->Admit(Caller("rk_a"), 0);
    ASSERT_TRUE(admission.admitted());
    held.push_back(std::move(admission.reservation));
  }
  // The principal's slots, whichever key it comes with; another principal has its own.
  QuotaLedger::Admission refused = ledger->Admit(Caller("rk_b"), 0);
  ASSERT_FALSE(refused.admitted());
  EXPECT_EQ(refused.refusal->limit, "concurrent_requests");
  EXPECT_EQ(refused.refusal->retry_after_seconds, 1);
  EXPECT_FALSE(refused.refusal->budget);
  EXPECT_EQ(refused.refusal->status.message(),
            "concurrency limit: 2 concurrent requests for principal acme/alice");
  EXPECT_TRUE(ledger->Admit(Caller("rk_c", "bob"), 0).admitted());

  held.front().Settle(0);  // settling keeps the slot: only the end of the request frees it
  EXPECT_FALSE(ledger->Admit(Caller("rk_a"), 0).admitted());
  held.erase(held.begin());
  QuotaLedger::Admission again = ledger->Admit(Caller("rk_a"), 0);
  EXPECT_TRUE(again.admitted());
  // A moved-to reservation holds the slot; the moved-from one releases nothing.
  Reservation moved = std::move(again.reservation);
  EXPECT_TRUE(again.reservation.empty());  // NOLINT(bugprone-use-after-move)
  EXPECT_FALSE(ledger->Admit(Caller("rk_a"), 0).admitted());
}

TEST_F(QuotaTest, TokensPerDayIsABudgetUntilTheEndOfTheUtcDay) {
  auto ledger = Ledger({Rule("tenant", {.tokens_per_day = 1000}, "acme")});
  ASSERT_TRUE(ledger->Admit(Caller("rk_a"), 1000).admitted());
  QuotaLedger::Admission refused = ledger->Admit(Caller("rk_a"), 1);
  ASSERT_FALSE(refused.admitted());
  EXPECT_TRUE(refused.refusal->budget);
  EXPECT_EQ(refused.refusal->limit, "tokens_per_day");
  EXPECT_EQ(refused.refusal->retry_after_seconds, 86400 - kStart);
  EXPECT_EQ(refused.refusal->status.message(), "budget limit: 1000 tokens per day for tenant acme");
  // Other tenants are not limited by acme's rule; a new minute does not reset a day.
  EXPECT_TRUE(ledger->Admit(Caller("rk_x", "alice", "globex"), 5000).admitted());
  clock_.Advance(seconds(60));
  EXPECT_FALSE(ledger->Admit(Caller("rk_a"), 1).admitted());
  clock_.Advance(seconds(86400 - kStart - 60));  // midnight UTC
  EXPECT_TRUE(ledger->Admit(Caller("rk_a"), 1000).admitted());
}

TEST_F(QuotaTest, BudgetsAreReportedBeforeRates) {
  auto ledger =
      Ledger({Rule("key", {.requests_per_minute = 1}), Rule("tenant", {.tokens_per_day = 10})});
  ASSERT_TRUE(ledger->Admit(Caller("rk_a"), 10).admitted());
  QuotaLedger::Admission refused = ledger->Admit(Caller("rk_a"), 1);
  ASSERT_FALSE(refused.admitted());
  EXPECT_EQ(refused.refusal->limit, "tokens_per_day");  // the key's rate is passed too
  EXPECT_TRUE(refused.refusal->budget);
}

TEST_F(QuotaTest, ARefusalBySomeSubjectTakesNothingFromTheOthers) {
  auto ledger = Ledger({Rule("key", {.requests_per_minute = 5, .tokens_per_minute = 100}),
                        Rule("tenant", {.tokens_per_minute = 50})});
  ASSERT_TRUE(ledger->Admit(Caller("rk_b"), 40).admitted());
  // The tenant refuses 20 more tokens: rk_a's requests and tokens must be untouched.
  for (int i = 0; i < 3; ++i) {
    QuotaLedger::Admission refused = ledger->Admit(Caller("rk_a"), 20);
    ASSERT_FALSE(refused.admitted());
    EXPECT_EQ(refused.refusal->status.message(),
              "rate limit: 50 tokens per minute for tenant acme");
  }
  // Without the tenant's rule (a reload: counters carry over), the key has all of its own left.
  ledger->SetRules({Rule("key", {.requests_per_minute = 5, .tokens_per_minute = 100})});
  EXPECT_TRUE(ledger->Admit(Caller("rk_a"), 100).admitted());
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(ledger->Admit(Caller("rk_a"), 0).admitted()) << i;
  EXPECT_FALSE(ledger->Admit(Caller("rk_a"), 0).admitted());
}

TEST_F(QuotaTest, SetRulesCarriesCountersOver) {
  auto ledger = Ledger({Rule("key", {.requests_per_minute = 5})});
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(ledger->Admit(Caller("rk_a"), 0).admitted());
  ledger->SetRules({Rule("key", {.requests_per_minute = 6})});
  EXPECT_TRUE(ledger->Admit(Caller("rk_a"), 0).admitted());
  EXPECT_TRUE(ledger->Admit(Caller("rk_a"), 0).admitted());
  EXPECT_FALSE(ledger->Admit(Caller("rk_a"), 0).admitted());
  ledger->SetRules({Rule("key", {.requests_per_minute = 3})});  // lowered: already past it
  EXPECT_FALSE(ledger->Admit(Caller("rk_a"), 0).admitted());
}

TEST_F(QuotaTest, TheMostSpecificRuleOfAScopeApplies) {
  auto ledger = Ledger({Rule("key", {.requests_per_minute = 1}),
                        Rule("key", {.requests_per_minute = 3}, "rk_big"),
                        Rule("principal", {.requests_per_minute = 2}, "*", "globex"),
                        Rule("principal", {.requests_per_minute = 100})});
  EXPECT_TRUE(ledger->Admit(Caller("rk_small"), 0).admitted());
  EXPECT_FALSE(ledger->Admit(Caller("rk_small"), 0).admitted());
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(ledger->Admit(Caller("rk_big"), 0).admitted()) << i;
  EXPECT_FALSE(ledger->Admit(Caller("rk_big"), 0).admitted());
  // Principals: globex's rule for globex's, the default elsewhere; a name in two tenants is two
  // principals. Callers without a key are limited by principal and tenant only.
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(ledger->Admit(Caller("", "bob", "globex"), 0).admitted());
  QuotaLedger::Admission refused = ledger->Admit(Caller("", "bob", "globex"), 0);
  ASSERT_FALSE(refused.admitted());
  EXPECT_EQ(refused.refusal->status.message(),
            "rate limit: 2 requests per minute for principal globex/bob");
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(ledger->Admit(Caller("", "bob", "acme"), 0).admitted());
}

TEST_F(QuotaTest, CountersOfPastWindowsAreDropped) {
  auto ledger = Ledger({Rule("key", {.requests_per_minute = 10, .concurrent_requests = 5})});
  Reservation held;
  for (int i = 0; i < 100; ++i) {
    QuotaLedger::Admission admission = ledger->Admit(Caller("rk_" + std::to_string(i)), 0);
    ASSERT_TRUE(admission.admitted());
    if (i == 0) held = std::move(admission.reservation);
  }
  EXPECT_EQ(ledger->SubjectsHeld(), 100u);
  clock_.Advance(seconds(61));
  ASSERT_TRUE(ledger->Admit(Caller("rk_new"), 0).admitted());  // the minute's first: sweeps
  EXPECT_EQ(ledger->SubjectsHeld(), 2u);  // rk_new, and rk_0 whose slot is held
  held = Reservation();
  clock_.Advance(seconds(60));
  ASSERT_TRUE(ledger->Admit(Caller("rk_new"), 0).admitted());
  EXPECT_EQ(ledger->SubjectsHeld(), 1u);
}

TEST_F(QuotaTest, ValidateQuotaRulesNamesTheBadRule) {
  EXPECT_TRUE(ValidateQuotaRules({Rule("key", {}), Rule("tenant", {.tokens_per_day = 1})}).ok());
  Status bad = ValidateQuotaRules({Rule("key", {}), Rule("team", {})});
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(), "quota rule 2: scope 'team' is not key, principal or tenant");
  EXPECT_FALSE(ValidateQuotaRules({Rule("key", {.requests_per_minute = -1})}).ok());
  EXPECT_FALSE(ValidateQuotaRules({Rule("key", {}, "")}).ok());
  // A ledger leaves a bad rule out and keeps the others.
  auto ledger =
      Ledger({Rule("team", {.requests_per_minute = 1}), Rule("key", {.requests_per_minute = 1})});
  EXPECT_TRUE(ledger->Admit(Caller("rk_a"), 0).admitted());
  EXPECT_FALSE(ledger->Admit(Caller("rk_a"), 0).admitted());
}

// 16 threads on two keys of one tenant: the admitted requests match the limits exactly, the
// slots in use never pass the concurrency limit, and the settled tokens add up exactly.
TEST_F(QuotaTest, ConcurrentAdmissionsNeverPassALimitByOne) {
  constexpr int kThreads = 16;
  constexpr int64_t kTokenLimit = 10'000'000;
  const QuotaRule principal_rule = Rule("principal", {.tokens_per_minute = kTokenLimit});
  auto ledger = Ledger({Rule("key", {.requests_per_minute = 3000}),
                        Rule("tenant", {.requests_per_minute = 5000, .concurrent_requests = 4}),
                        principal_rule});
  std::atomic<int> admitted_a{0};
  std::atomic<int> admitted_b{0};
  std::atomic<int> in_flight{0};
  std::atomic<int> max_in_flight{0};
  std::atomic<int64_t> tokens_settled{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const identity::Identity caller = Caller(t % 2 == 0 ? "rk_a" : "rk_b");
      std::atomic<int>& admitted = t % 2 == 0 ? admitted_a : admitted_b;
      // Until a rate refuses (the key's or the tenant's): a full set of slots only delays.
      for (int i = 0;; ++i) {
        QuotaLedger::Admission admission = ledger->Admit(caller, 100);
        if (!admission.admitted()) {
          if (admission.refusal->limit == "requests_per_minute") return;
          continue;
        }
        admitted.fetch_add(1);
        const int now = in_flight.fetch_add(1) + 1;
        int seen = max_in_flight.load();
        while (now > seen && !max_in_flight.compare_exchange_weak(seen, now)) {
        }
        const int64_t used = i % 151;  // under and over the 100 reserved
        tokens_settled.fetch_add(used);
        in_flight.fetch_sub(1);  // before the reservation below releases its slot
        admission.reservation.Settle(used);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_LE(admitted_a.load(), 3000);
  EXPECT_LE(admitted_b.load(), 3000);
  EXPECT_EQ(admitted_a.load() + admitted_b.load(), 5000);  // the tenant's limit, not one more
  EXPECT_LE(max_in_flight.load(), 4);
  EXPECT_GE(max_in_flight.load(), 1);
  // The principal's token counter is exactly what was settled: with only its rule left (counters
  // carry over), the rest of its limit is admitted and not one token more.
  ledger->SetRules({principal_rule});
  const int64_t left = kTokenLimit - tokens_settled.load();
  ASSERT_GT(left, 0);
  EXPECT_FALSE(ledger->Admit(Caller("rk_a"), left + 1).admitted());
  EXPECT_TRUE(ledger->Admit(Caller("rk_a"), left).admitted());
}

}  // namespace
}  // namespace rampart::policy
