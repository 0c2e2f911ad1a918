// Both backends: shared budgets under concurrency, durability (reopen, SIGKILL), schema versions;
// then what only one backend has (SQLite's file, PostgreSQL's connection strings and reconnects).

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <set>
#include <thread>
#include <vector>

#include "store/schema.h"
#include "store/store_fixture.h"

namespace rampart::store::testing {
namespace {

template <typename Backend>
class StoreDurabilityTest : public StoreTest<Backend> {};
TYPED_TEST_SUITE(StoreDurabilityTest, Backends, BackendNames);

TYPED_TEST(StoreDurabilityTest, LeasesGrantUpToTheLimitPerWindow) {
  Store& store = *this->store_;
  const auto lease = [&](int64_t window, int64_t limit, int64_t want) {
    auto granted = store.LeaseBudget("tenant:acme:tpm", window, limit, want);
    EXPECT_TRUE(granted.ok()) << granted.status().ToString();
    return granted.ok() ? std::pair{granted->granted, granted->used} : std::pair{-1L, -1L};
  };
  EXPECT_EQ(lease(600, 100, 60), std::pair(60L, 60L));
  EXPECT_EQ(lease(600, 100, 60), std::pair(40L, 100L));  // what is left
  EXPECT_EQ(lease(600, 100, 1), std::pair(0L, 100L));
  EXPECT_EQ(lease(600, 100, 0), std::pair(0L, 100L));
  EXPECT_EQ(lease(660, 100, 30), std::pair(30L, 30L));  // a new window starts afresh
  // The previous window is kept as it was, for a replica whose clock lags.
  EXPECT_EQ(lease(600, 100, 5), std::pair(0L, 100L));
  // A lower limit after a reload grants nothing while the window is over it.
  EXPECT_EQ(lease(660, 20, 5), std::pair(0L, 30L));
  // Keys are independent.
  auto other = store.LeaseBudget("tenant:beta:tpm", 600, 10, 50);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->granted, 10);
}

TYPED_TEST(StoreDurabilityTest, ConcurrentLeasesFromSeveralStoresNeverOverGrant) {
  // Two Store objects (two replicas, or two processes on one SQLite file), four threads each,
  // asking for more than the limit together: the grants add up to the limit exactly.
  std::unique_ptr<Store> replica = this->OpenOrDie();
  ASSERT_NE(replica, nullptr);
  constexpr int64_t kLimit = 500;
  constexpr int kThreads = 8;
  constexpr int kLeasesPerThread = 40;  // 8 * 40 * (1..3 units) > 500
  std::atomic<int64_t> granted{0};
  std::atomic<int64_t> most_used{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    Store* store = t % 2 == 0 ? this->store_.get() : replica.get();
    threads.emplace_back([&, store, t] {
      for (int i = 0; i < kLeasesPerThread; ++i) {
        auto lease = store->LeaseBudget("key:rk_live_x:rpm", 1200, kLimit, 1 + (t + i) % 3);
        if (!lease.ok()) {
          ++failures;
          continue;
        }
        granted += lease->granted;
        int64_t seen = most_used.load();
        while (lease->used > seen && !most_used.compare_exchange_weak(seen, lease->used)) {
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(granted.load(), kLimit);
  EXPECT_EQ(most_used.load(), kLimit);
}

TYPED_TEST(StoreDurabilityTest, AReopenedStoreHoldsEverything) {
  STORE_ASSERT_OK(this->store_->CreateTenant({.name = "acme", .attributes = {{"region", "eu"}}}));
  STORE_ASSERT_OK(this->store_->PutPrincipal(
      {.tenant = "acme", .name = "alice", .roles = {"analyst"}, .disabled = true}));
  STORE_ASSERT_OK(this->store_->CreateApiKey(this->Key("rk_live_a", "acme", "alice")));
  STORE_ASSERT_OK(this->store_->RevokeApiKey("rk_live_a", 77));
  ASSERT_TRUE(this->store_->LeaseBudget("b", 60, 10, 4).ok());
  const int64_t generation = this->GenerationOf(*this->store_);
  this->store_.reset();

  std::unique_ptr<Store> reopened = this->OpenOrDie();
  ASSERT_NE(reopened, nullptr);
  EXPECT_EQ(this->GenerationOf(*reopened), generation);
  auto tenant = reopened->GetTenant("acme");
  ASSERT_TRUE(tenant.ok() && tenant->has_value());
  EXPECT_EQ((*tenant)->attributes, (Attributes{{"region", "eu"}}));
  auto alice = reopened->GetPrincipal("acme", "alice");
  ASSERT_TRUE(alice.ok() && alice->has_value());
  EXPECT_TRUE((*alice)->disabled);
  EXPECT_EQ((*alice)->roles, (std::vector<std::string>{"analyst"}));
  auto key = reopened->GetApiKey("rk_live_a");
  ASSERT_TRUE(key.ok() && key->has_value());
  EXPECT_EQ((*key)->revoked_unix, 77);
  auto lease = reopened->LeaseBudget("b", 60, 10, 10);
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ(lease->granted, 6);
}

TYPED_TEST(StoreDurabilityTest, AnEmptyDatabaseIsMigratedOnceToTheLatestVersion) {
  const auto version = this->backend_.QueryText("SELECT MAX(version) FROM schema_version");
  ASSERT_TRUE(version.ok()) << version.status().ToString();
  EXPECT_EQ(*version, std::to_string(internal::LatestSchemaVersion()));
  this->store_.reset();
  ASSERT_NE(this->OpenOrDie(), nullptr);  // a second open applies nothing again
  const auto rows = this->backend_.QueryText("SELECT COUNT(*) FROM schema_version");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(*rows, std::to_string(internal::Migrations().size()));
}

TYPED_TEST(StoreDurabilityTest, ASchemaNewerThanTheBuildIsRefused) {
  this->store_.reset();
  STORE_ASSERT_OK(
      this->backend_.Execute("INSERT INTO schema_version (version, description, applied_unix) "
                             "VALUES (999, 'from a newer Rampart', 0)"));
  auto opened = this->backend_.Open();
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(opened.status().message().find("999"), std::string::npos) << opened.status().ToString();
}

TYPED_TEST(StoreDurabilityTest, EveryAcknowledgedWriteSurvivesSigkill) {
  this->store_.reset();
  int acks[2];
  ASSERT_EQ(pipe(acks), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child: no gtest here; write, and acknowledge each write after the store returned.
    close(acks[0]);
    auto store = this->backend_.Open();
    if (!store.ok()) _exit(2);
    if (!(*store)->CreateTenant({.name = "acme"}).ok()) _exit(3);
    for (int i = 0;; ++i) {
      const std::string name = fmt::format("p{}", i);
      if (!(*store)->PutPrincipal({.tenant = "acme", .name = name}).ok()) _exit(4);
      if (write(acks[1], &i, sizeof(i)) != sizeof(i)) _exit(5);
    }
  }
  close(acks[1]);
  int acknowledged = -1;
  int index = 0;
  // Kill it somewhere in the middle of its writes, after 50 acknowledgements.
  while (acknowledged < 50 && read(acks[0], &index, sizeof(index)) == sizeof(index)) {
    acknowledged = index;
  }
  kill(child, SIGKILL);
  // Acknowledgements already in the pipe count too.
  while (read(acks[0], &index, sizeof(index)) == sizeof(index)) acknowledged = index;
  close(acks[0]);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status))
      << "the child failed first with exit code " << WEXITSTATUS(status);
  ASSERT_GE(acknowledged, 50);

  std::unique_ptr<Store> reopened = this->OpenOrDie();
  ASSERT_NE(reopened, nullptr);
  auto principals = reopened->ListPrincipals("acme");
  ASSERT_TRUE(principals.ok()) << principals.status().ToString();
  std::set<std::string> names;
  for (const Principal& principal : *principals) names.insert(principal.name);
  for (int i = 0; i <= acknowledged; ++i) {
    EXPECT_TRUE(names.contains(fmt::format("p{}", i))) << "lost acknowledged write " << i;
  }
}

}  // namespace
}  // namespace rampart::store::testing
