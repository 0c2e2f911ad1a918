// The in-memory store fake honours store.h's contract (its tests rely on it; so do other
// modules' tests).

#include "testing/memory_store.h"

#include <gtest/gtest.h>

#include <thread>

namespace rampart::testing {
namespace {

TEST(MemoryStoreTest, TenantsPrincipalsAndKeysFollowTheContract) {
  MemoryStore store;
  EXPECT_EQ(store.CreateTenant({.name = "bad name"}).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(store.CreateTenant({.name = "zeta"}).ok());
  ASSERT_TRUE(store.CreateTenant({.name = "acme"}).ok());
  EXPECT_EQ(store.CreateTenant({.name = "acme"}).code(), StatusCode::kAlreadyExists);
  EXPECT_GT((*store.GetTenant("acme"))->created_unix, 0);
  EXPECT_EQ((*store.ListTenants()).front().name, "acme");

  EXPECT_EQ(store.PutPrincipal({.tenant = "none", .name = "a"}).code(), StatusCode::kNotFound);
  ASSERT_TRUE(store.PutPrincipal({.tenant = "acme", .name = "bob"}).ok());
  ASSERT_TRUE(store.PutPrincipal({.tenant = "acme", .name = "alice"}).ok());
  EXPECT_EQ((*store.ListPrincipals("acme")).front().name, "alice");

  store::ApiKey key{.id = "rk_live_2", .tenant = "acme", .principal = "carol"};
  key.created_unix = 10;
  ASSERT_TRUE(store.CreateApiKey(key).ok());  // carol is created with it
  EXPECT_TRUE((*store.GetPrincipal("acme", "carol")).has_value());
  EXPECT_EQ(store.CreateApiKey(key).code(), StatusCode::kAlreadyExists);
  store::ApiKey earlier = key;
  earlier.id = "rk_live_9";
  earlier.created_unix = 5;
  ASSERT_TRUE(store.CreateApiKey(earlier).ok());
  EXPECT_EQ((*store.ListApiKeys("")).front().id, "rk_live_9");  // by creation time
  store::ApiKey orphan = key;
  orphan.id = "rk_live_3";
  orphan.tenant = "none";
  EXPECT_EQ(store.CreateApiKey(orphan).code(), StatusCode::kNotFound);

  EXPECT_EQ(store.DeleteTenant("acme").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.DeleteTenant("none").code(), StatusCode::kNotFound);
  ASSERT_TRUE(store.RevokeApiKey("rk_live_2", 100).ok());
  ASSERT_TRUE(store.RevokeApiKey("rk_live_2", 200).ok());
  EXPECT_EQ((*store.GetApiKey("rk_live_2"))->revoked_unix, 100);
  EXPECT_EQ(store.RevokeApiKey("rk_live_x", 1).code(), StatusCode::kNotFound);

  ASSERT_TRUE(store.DeletePrincipal("acme", "carol").ok());  // revokes its other key
  EXPECT_NE((*store.GetApiKey("rk_live_9"))->revoked_unix, 0);
  EXPECT_EQ(store.DeletePrincipal("acme", "carol").code(), StatusCode::kNotFound);
}

TEST(MemoryStoreTest, GenerationMovesOnChangesAndNotOnTouches) {
  MemoryStore store;
  const int64_t start = *store.Generation();
  ASSERT_TRUE(store.CreateTenant({.name = "acme"}).ok());
  const int64_t after_tenant = *store.Generation();
  EXPECT_NE(after_tenant, start);
  ASSERT_TRUE(store.CreateApiKey({.id = "k", .tenant = "acme", .principal = "p"}).ok());
  const int64_t after_key = *store.Generation();
  EXPECT_NE(after_key, after_tenant);
  ASSERT_TRUE(store.TouchApiKeys({{"k", 50}, {"unknown", 60}}).ok());
  EXPECT_EQ(*store.Generation(), after_key);
  EXPECT_EQ((*store.GetApiKey("k"))->last_used_unix, 50);
}

TEST(MemoryStoreTest, LeaseBudgetNeverOverGrantsUnderConcurrency) {
  MemoryStore store;
  constexpr int64_t kLimit = 1000;
  std::atomic<int64_t> granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        const Result<store::BudgetLease> lease = store.LeaseBudget("tenant:acme", 60, kLimit, 3);
        ASSERT_TRUE(lease.ok());
        ASSERT_LE(lease->used, kLimit);
        granted += lease->granted;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(granted, kLimit);
  // A new window starts afresh.
  EXPECT_EQ(store.LeaseBudget("tenant:acme", 120, kLimit, 5)->granted, 5);
  EXPECT_EQ(store.LeaseBudget("tenant:acme", 120, kLimit, -1).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(MemoryStoreTest, AnUnavailableStoreFailsEveryCall) {
  MemoryStore store;
  store.SetUnavailable(true);
  EXPECT_EQ(store.Generation().status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(store.CreateTenant({.name = "acme"}).code(), StatusCode::kUnavailable);
  store.SetUnavailable(false);
  EXPECT_TRUE(store.CreateTenant({.name = "acme"}).ok());
}

}  // namespace
}  // namespace rampart::testing
