// Quotas shared through a store (replicas): leases, their windows, and the sum over replicas.

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "policy/quota.h"
#include "testing/eventually.h"
#include "testing/fake_clock.h"
#include "testing/memory_store.h"
#include "testing/postgres_server.h"

namespace rampart::policy {
namespace {

// Stops the PostgreSQL server, if a test started one, when the binary ends.
::testing::Environment* const kPostgres =
    ::testing::AddGlobalTestEnvironment(new rampart::testing::PostgresEnvironment);

using std::chrono::seconds;
using testing::Eventually;

// The units granted so far for (key, window) of `store`: a lease of nothing reads them.
int64_t Used(store::Store& store, const std::string& key, int64_t window_start_unix) {
  Result<store::BudgetLease> lease = store.LeaseBudget(key, window_start_unix, 1'000'000, 0);
  EXPECT_TRUE(lease.ok()) << lease.status().ToString();
  return lease.ok() ? lease->used : -1;
}

constexpr int64_t kStart = 3600;  // the fake clock's Unix time: a minute starts
const std::string kBudget = "quota/key:rk_a/requests_per_minute";

identity::Identity KeyA() {
  identity::Identity identity;
  identity.method = identity::Method::kApiKey;
  identity.tenant = "acme";
  identity.principal = "alice";
  identity.key_id = "rk_a";
  return identity;
}

// Admits on `ledger` until it refuses for the whole window (every unit is taken, here or by
// the replicas), waiting for leases meanwhile. Returns the requests admitted.
int AdmitUntilExhausted(QuotaLedger& ledger) {
  int admitted = 0;
  const bool exhausted = Eventually([&] {
    QuotaLedger::Admission admission = ledger.Admit(KeyA(), 0);
    if (admission.admitted()) ++admitted;
    // Refused for the window (by its own count or the replicas'), not while a lease comes.
    return !admission.admitted() &&
           admission.refusal->status.message().find("waiting") == std::string::npos;
  });
  EXPECT_TRUE(exhausted);
  return admitted;
}

class SharedQuotaTest : public ::testing::Test {
 protected:
  std::unique_ptr<QuotaLedger> Replica(int64_t requests_per_minute) {
    QuotaRule rule{"key", "*", "*", {.requests_per_minute = requests_per_minute}};
    return std::make_unique<QuotaLedger>(QuotaOptions{.rules = {rule}, .clock = &clock_}, &store_);
  }

  testing::FakeClock clock_;
  testing::MemoryStore store_;
};

TEST_F(SharedQuotaTest, AReplicaAdmitsOnlyFromLeasedUnits) {
  auto replica = Replica(160);
  // Nothing leased yet: refused at once (Admit never waits for the store), as a rate.
  QuotaLedger::Admission first = replica->Admit(KeyA(), 0);
  ASSERT_FALSE(first.admitted());
  EXPECT_EQ(first.refusal->retry_after_seconds, 1);
  EXPECT_FALSE(first.refusal->budget);
  EXPECT_EQ(first.refusal->status.message(),
            "rate limit: 160 requests per minute for key rk_a: this replica is waiting for its "
            "share");
  // The lease thread takes a lease of 160 / 16 units.
  ASSERT_TRUE(Eventually([&] { return replica->Admit(KeyA(), 0).admitted(); }));
  EXPECT_EQ(Used(store_, kBudget, kStart), 10);
}

TEST_F(SharedQuotaTest, TwoReplicasTogetherNeverPassTheLimit) {
  auto one = Replica(100);
  auto two = Replica(100);
  int admitted = 0;
  // Alternating between the replicas, each admits only what it leased.
  for (int round = 0; round < 3; ++round) {
    admitted += AdmitUntilExhausted(round % 2 == 0 ? *one : *two);
  }
  admitted += AdmitUntilExhausted(*one);
  admitted += AdmitUntilExhausted(*two);
  EXPECT_EQ(Used(store_, kBudget, kStart), 100);
  EXPECT_EQ(admitted, 100);
  QuotaLedger::Admission refused = two->Admit(KeyA(), 0);
  ASSERT_FALSE(refused.admitted());
  EXPECT_EQ(refused.refusal->retry_after_seconds, 60);
}

TEST_F(SharedQuotaTest, ConcurrentReplicasNeverPassTheLimit) {
  auto one = Replica(1000);
  auto two = Replica(1000);
  std::atomic<int> admitted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] { admitted += AdmitUntilExhausted(t % 2 == 0 ? *one : *two); });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(admitted.load(), 1000);
  EXPECT_EQ(Used(store_, kBudget, kStart), 1000);
}

TEST_F(SharedQuotaTest, LeasesBelongToTheirWindowAndTheNextIsPrefetched) {
  auto replica = Replica(160);
  ASSERT_TRUE(Eventually([&] { return replica->Admit(KeyA(), 0).admitted(); }));
  // In the minute's last seconds, an active subject's next window is leased ahead. (Reading it
  // lets the store drop this window's count, which the test does not look at again.)
  clock_.Advance(seconds(56));
  ASSERT_TRUE(Eventually([&] { return Used(store_, kBudget, kStart + 60) > 0; }));
  // The lease thread credits a lease after the store's answer: a lease asked now (another key's)
  // comes in a later round, once the prefetch is credited.
  identity::Identity other = KeyA();
  other.key_id = "rk_b";
  EXPECT_FALSE(replica->Admit(other, 0).admitted());
  ASSERT_TRUE(
      Eventually([&] { return Used(store_, "quota/key:rk_b/requests_per_minute", kStart) > 0; }));
  clock_.Advance(seconds(4));
  EXPECT_TRUE(replica->Admit(KeyA(), 0).admitted());  // at once: no wait for a lease
}

TEST_F(SharedQuotaTest, AFailingStoreLimitsAReplicaToTheUnitsItHolds) {
  auto replica = Replica(16);  // leases of one unit
  ASSERT_TRUE(Eventually([&] { return replica->Admit(KeyA(), 0).admitted(); }));
  store_.SetUnavailable(true);
  // Whatever it still holds (at most one unit: leases of one are topped up when none is left),
  // then refusals.
  int admitted = 0;
  for (int i = 0; i < 100; ++i) admitted += replica->Admit(KeyA(), 0).admitted() ? 1 : 0;
  EXPECT_LE(admitted, 1);
  store_.SetUnavailable(false);  // and it recovers
  ASSERT_TRUE(Eventually([&] { return replica->Admit(KeyA(), 0).admitted(); }));
}

// Two replicas, each with its own connection to one SQLite database (as two processes would
// be): the store's LeaseBudget keeps their sum to the limit.
TEST(SharedQuotaSqliteTest, ReplicasOnOneSqliteStoreNeverPassTheLimit) {
  char pattern[] = "/tmp/rampart_quota_test.XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const std::filesystem::path dir = pattern;
  {
    Result<std::unique_ptr<store::Store>> first = store::OpenSqliteStore(dir.string());
    Result<std::unique_ptr<store::Store>> second = store::OpenSqliteStore(dir.string());
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    ASSERT_TRUE(second.ok()) << second.status().ToString();
    testing::FakeClock clock;
    QuotaRule rule{"key", "*", "*", {.requests_per_minute = 200}};
    QuotaLedger one(QuotaOptions{.rules = {rule}, .clock = &clock}, first->get());
    QuotaLedger two(QuotaOptions{.rules = {rule}, .clock = &clock}, second->get());
    std::atomic<int> admitted{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] { admitted += AdmitUntilExhausted(t % 2 == 0 ? one : two); });
    }
    for (std::thread& thread : threads) thread.join();
    EXPECT_EQ(admitted.load(), 200);
  }
  std::filesystem::remove_all(dir);
}

// Two replicas, each with its own connection to one real PostgreSQL database (the shared store
// of a multi-replica deployment), admitting from many threads at once: together they admit
// exactly the limit, never one more.
TEST(SharedQuotaPostgresTest, ReplicasOnOnePostgresStoreNeverPassTheLimit) {
  Result<rampart::testing::PostgresServer*> server = rampart::testing::PostgresServer::Shared();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  Result<std::string> database = (*server)->CreateDatabase();
  ASSERT_TRUE(database.ok()) << database.status().ToString();
  Result<std::unique_ptr<store::Store>> first = store::OpenPostgresStore(*database);
  Result<std::unique_ptr<store::Store>> second = store::OpenPostgresStore(*database);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  {
    testing::FakeClock clock;
    QuotaRule rule{"key", "*", "*", {.requests_per_minute = 240}};
    QuotaLedger one(QuotaOptions{.rules = {rule}, .clock = &clock}, first->get());
    QuotaLedger two(QuotaOptions{.rules = {rule}, .clock = &clock}, second->get());
    std::atomic<int> admitted{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] { admitted += AdmitUntilExhausted(t % 2 == 0 ? one : two); });
    }
    for (std::thread& thread : threads) thread.join();
    EXPECT_EQ(admitted.load(), 240);
  }
  // The store agrees: every unit of the minute was leased, and no more.
  EXPECT_EQ(Used(**first, kBudget, kStart), 240);
}

}  // namespace
}  // namespace rampart::policy
