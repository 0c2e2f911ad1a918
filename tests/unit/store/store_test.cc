// Tenants, principals and API keys on both backends: CRUD, errors, ordering and the generation.

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "store/records.h"
#include "store/store_fixture.h"

namespace rampart::store::testing {
namespace {

// Stops the binary's PostgreSQL server when the tests end.
::testing::Environment* const kPostgres =
    ::testing::AddGlobalTestEnvironment(new rampart::testing::PostgresEnvironment);

template <typename Backend>
class StoreRecordsTest : public StoreTest<Backend> {};
TYPED_TEST_SUITE(StoreRecordsTest, Backends, BackendNames);

TYPED_TEST(StoreRecordsTest, TenantsAreCreatedReadListedInByteOrderAndDeleted) {
  Store& store = *this->store_;
  const int64_t before = internal::NowUnix();
  STORE_ASSERT_OK(store.CreateTenant({.name = "b", .attributes = {{"region", "eu"}}}));
  STORE_ASSERT_OK(store.CreateTenant(
      {.name = "a", .attributes = {{"groups", "x,y"}, {"note", "\"quoted\" \u00e9\t{}"}}}));
  STORE_ASSERT_OK(store.CreateTenant({.name = "B"}));

  const Status again = store.CreateTenant({.name = "a"});
  EXPECT_EQ(again.code(), StatusCode::kAlreadyExists) << again.ToString();

  auto a = store.GetTenant("a");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(a->has_value());
  EXPECT_EQ((*a)->name, "a");
  EXPECT_EQ((*a)->attributes, (Attributes{{"groups", "x,y"}, {"note", "\"quoted\" \u00e9\t{}"}}));
  EXPECT_GE((*a)->created_unix, before);  // set by the store, not the caller

  auto missing = store.GetTenant("nobody");
  ASSERT_TRUE(missing.ok()) << missing.status().ToString();
  EXPECT_FALSE(missing->has_value());

  auto list = store.ListTenants();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  std::vector<std::string> names;
  for (const Tenant& tenant : *list) names.push_back(tenant.name);
  EXPECT_EQ(names, (std::vector<std::string>{"B", "a", "b"}));  // bytes, not a locale's order

  STORE_ASSERT_OK(store.DeleteTenant("b"));
  EXPECT_EQ(store.DeleteTenant("b").code(), StatusCode::kNotFound);
  auto gone = store.GetTenant("b");
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone->has_value());
}

TYPED_TEST(StoreRecordsTest, RecordsThatBreakTheRulesAreRefusedAndChangeNothing) {
  Store& store = *this->store_;
  STORE_ASSERT_OK(store.CreateTenant({.name = "acme"}));
  const int64_t generation = this->GenerationOf(store);
  for (const std::string& name :
       std::vector<std::string>{"", "has space", std::string(65, 'x'), "semi;colon"}) {
    EXPECT_EQ(store.CreateTenant({.name = name}).code(), StatusCode::kInvalidArgument) << name;
  }
  EXPECT_EQ(store.CreateTenant({.name = "t", .attributes = {{"bad", "\xff\xfe"}}}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store.CreateTenant({.name = "t", .attributes = {{"", "empty name"}}}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store.PutPrincipal({.tenant = "acme", .name = "bad name"}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store.PutPrincipal({.tenant = "acme", .name = "a", .roles = {""}}).code(),
            StatusCode::kInvalidArgument);
  ApiKey key = this->Key("rk_live_x", "acme", "alice");
  key.hash = "not hex";
  EXPECT_EQ(store.CreateApiKey(key).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store.LeaseBudget("k", 0, -1, 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store.LeaseBudget("", 0, 1, 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(this->GenerationOf(store), generation);
  auto tenants = store.ListTenants();
  ASSERT_TRUE(tenants.ok());
  EXPECT_EQ(tenants->size(), 1u);
}

TYPED_TEST(StoreRecordsTest, PrincipalsArePutReplacedListedAndDeleted) {
  Store& store = *this->store_;
  EXPECT_EQ(store.PutPrincipal({.tenant = "acme", .name = "alice"}).code(), StatusCode::kNotFound);
  STORE_ASSERT_OK(store.CreateTenant({.name = "acme"}));
  STORE_ASSERT_OK(store.CreateTenant({.name = "beta"}));
  STORE_ASSERT_OK(store.PutPrincipal(
      {.tenant = "acme", .name = "spiffe://acme/ns/a/sa/b", .roles = {"viewer"}}));
  STORE_ASSERT_OK(store.PutPrincipal({.tenant = "acme",
                                      .name = "alice",
                                      .roles = {"analyst", "viewer"},
                                      .attributes = {{"clearance", "SECRET"}}}));
  STORE_ASSERT_OK(store.PutPrincipal({.tenant = "beta", .name = "Zed"}));

  auto alice = store.GetPrincipal("acme", "alice");
  ASSERT_TRUE(alice.ok() && alice->has_value()) << alice.status().ToString();
  EXPECT_EQ((*alice)->roles, (std::vector<std::string>{"analyst", "viewer"}));
  EXPECT_EQ((*alice)->attributes, (Attributes{{"clearance", "SECRET"}}));
  EXPECT_FALSE((*alice)->disabled);
  const int64_t created = (*alice)->created_unix;
  EXPECT_GT(created, 0);

  // Replacing changes roles, attributes and disabled, and keeps the creation time.
  STORE_ASSERT_OK(store.PutPrincipal({.tenant = "acme",
                                      .name = "alice",
                                      .roles = {"operator"},
                                      .disabled = true,
                                      .created_unix = created + 1000}));
  alice = store.GetPrincipal("acme", "alice");
  ASSERT_TRUE(alice.ok() && alice->has_value());
  EXPECT_EQ((*alice)->roles, (std::vector<std::string>{"operator"}));
  EXPECT_TRUE((*alice)->attributes.empty());
  EXPECT_TRUE((*alice)->disabled);
  EXPECT_EQ((*alice)->created_unix, created);

  auto in_beta = store.GetPrincipal("beta", "alice");
  ASSERT_TRUE(in_beta.ok());
  EXPECT_FALSE(in_beta->has_value());  // names are per tenant

  const auto names = [&](const std::string& tenant) {
    std::vector<std::string> result;
    auto list = store.ListPrincipals(tenant);
    EXPECT_TRUE(list.ok()) << list.status().ToString();
    if (list.ok()) {
      for (const Principal& principal : *list)
        result.push_back(principal.tenant + "/" + principal.name);
    }
    return result;
  };
  EXPECT_EQ(names("acme"),
            (std::vector<std::string>{"acme/alice", "acme/spiffe://acme/ns/a/sa/b"}));
  EXPECT_EQ(names(""),
            (std::vector<std::string>{"acme/alice", "acme/spiffe://acme/ns/a/sa/b", "beta/Zed"}));
  EXPECT_TRUE(names("nobody").empty());

  STORE_ASSERT_OK(store.DeletePrincipal("acme", "alice"));
  EXPECT_EQ(store.DeletePrincipal("acme", "alice").code(), StatusCode::kNotFound);
  EXPECT_EQ(names("acme"), (std::vector<std::string>{"acme/spiffe://acme/ns/a/sa/b"}));
}

TYPED_TEST(StoreRecordsTest, ATenantInUseCannotBeDeletedUntilItsPrincipalsAreGone) {
  Store& store = *this->store_;
  STORE_ASSERT_OK(store.CreateTenant({.name = "acme"}));
  STORE_ASSERT_OK(store.CreateApiKey(this->Key("rk_live_a", "acme", "ci")));
  EXPECT_EQ(store.DeleteTenant("acme").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.DeleteTenant("nobody").code(), StatusCode::kNotFound);

  // Deleting the principal revokes its key; a tenant with only revoked keys may go, and they go
  // with it.
  STORE_ASSERT_OK(store.DeletePrincipal("acme", "ci"));
  STORE_ASSERT_OK(store.DeleteTenant("acme"));
  auto key = store.GetApiKey("rk_live_a");
  ASSERT_TRUE(key.ok());
  EXPECT_FALSE(key->has_value());
  // The name is free again.
  STORE_EXPECT_OK(store.CreateTenant({.name = "acme"}));
}

TYPED_TEST(StoreRecordsTest, ApiKeysAreCreatedWithTheirPrincipalReadAndListedByCreation) {
  Store& store = *this->store_;
  EXPECT_EQ(store.CreateApiKey(this->Key("rk_live_1", "acme", "ci")).code(), StatusCode::kNotFound);
  STORE_ASSERT_OK(store.CreateTenant({.name = "acme"}));
  STORE_ASSERT_OK(store.CreateTenant({.name = "beta"}));
  STORE_ASSERT_OK(store.PutPrincipal({.tenant = "acme", .name = "alice", .roles = {"analyst"}}));

  ApiKey full = this->Key("rk_live_3", "acme", "alice", /*created_unix=*/2000);
  full.roles = {"operator", "viewer"};
  full.expires_unix = 9000;
  full.name = "laptop \u2014 alice";
  STORE_ASSERT_OK(store.CreateApiKey(full));
  STORE_ASSERT_OK(store.CreateApiKey(this->Key("rk_live_2", "acme", "ci", 2000)));
  STORE_ASSERT_OK(store.CreateApiKey(this->Key("rk_live_9", "beta", "ci", 1000)));
  EXPECT_EQ(store.CreateApiKey(this->Key("rk_live_3", "beta", "other")).code(),
            StatusCode::kAlreadyExists);

  auto read = store.GetApiKey("rk_live_3");
  ASSERT_TRUE(read.ok() && read->has_value()) << read.status().ToString();
  EXPECT_EQ((*read)->tenant, "acme");
  EXPECT_EQ((*read)->principal, "alice");
  EXPECT_EQ((*read)->name, full.name);
  EXPECT_EQ((*read)->roles, full.roles);
  EXPECT_EQ((*read)->salt, full.salt);
  EXPECT_EQ((*read)->hash, full.hash);
  EXPECT_EQ((*read)->created_unix, 2000);
  EXPECT_EQ((*read)->expires_unix, 9000);
  EXPECT_EQ((*read)->revoked_unix, 0);
  EXPECT_EQ((*read)->last_used_unix, 0);

  // The key's principal "ci" was made, with no roles; alice kept hers.
  auto ci = store.GetPrincipal("acme", "ci");
  ASSERT_TRUE(ci.ok() && ci->has_value());
  EXPECT_TRUE((*ci)->roles.empty());
  auto alice = store.GetPrincipal("acme", "alice");
  ASSERT_TRUE(alice.ok() && alice->has_value());
  EXPECT_EQ((*alice)->roles, (std::vector<std::string>{"analyst"}));

  const auto ids = [&](const std::string& tenant) {
    std::vector<std::string> result;
    auto list = store.ListApiKeys(tenant);
    EXPECT_TRUE(list.ok()) << list.status().ToString();
    if (list.ok()) {
      for (const ApiKey& key : *list) result.push_back(key.id);
    }
    return result;
  };
  EXPECT_EQ(ids(""), (std::vector<std::string>{"rk_live_9", "rk_live_2", "rk_live_3"}));
  EXPECT_EQ(ids("acme"), (std::vector<std::string>{"rk_live_2", "rk_live_3"}));
  auto missing = store.GetApiKey("rk_live_0");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
}

TYPED_TEST(StoreRecordsTest, RevocationKeepsTheFirstTimeAndDeletingAPrincipalRevokesItsKeys) {
  Store& store = *this->store_;
  STORE_ASSERT_OK(store.CreateTenant({.name = "acme"}));
  STORE_ASSERT_OK(store.CreateApiKey(this->Key("rk_live_a", "acme", "alice")));
  STORE_ASSERT_OK(store.CreateApiKey(this->Key("rk_live_b", "acme", "alice")));
  STORE_ASSERT_OK(store.CreateApiKey(this->Key("rk_live_c", "acme", "bob")));

  EXPECT_EQ(store.RevokeApiKey("rk_live_zz", 100).code(), StatusCode::kNotFound);
  STORE_ASSERT_OK(store.RevokeApiKey("rk_live_a", 5000));
  STORE_ASSERT_OK(store.RevokeApiKey("rk_live_a", 6000));
  auto a = store.GetApiKey("rk_live_a");
  ASSERT_TRUE(a.ok() && a->has_value());
  EXPECT_EQ((*a)->revoked_unix, 5000);

  const int64_t before = internal::NowUnix();
  STORE_ASSERT_OK(store.DeletePrincipal("acme", "alice"));
  a = store.GetApiKey("rk_live_a");
  auto b = store.GetApiKey("rk_live_b");
  auto c = store.GetApiKey("rk_live_c");
  ASSERT_TRUE(a.ok() && a->has_value() && b.ok() && b->has_value() && c.ok() && c->has_value());
  EXPECT_EQ((*a)->revoked_unix, 5000);
  EXPECT_GE((*b)->revoked_unix, before);
  EXPECT_EQ((*c)->revoked_unix, 0);  // bob's key is not alice's
}

TYPED_TEST(StoreRecordsTest, TouchesRecordTheLatestUseIgnoreUnknownKeysAndNeverGoBack) {
  Store& store = *this->store_;
  STORE_ASSERT_OK(store.CreateTenant({.name = "acme"}));
  STORE_ASSERT_OK(store.CreateApiKey(this->Key("rk_live_a", "acme", "alice")));
  STORE_ASSERT_OK(store.CreateApiKey(this->Key("rk_live_b", "acme", "alice")));
  STORE_ASSERT_OK(store.TouchApiKeys({{"rk_live_a", 700}, {"rk_live_b", 800}, {"unknown", 9}}));
  STORE_ASSERT_OK(store.TouchApiKeys({{"rk_live_a", 650}}));  // an older batch arriving late
  STORE_ASSERT_OK(store.TouchApiKeys({}));
  auto a = store.GetApiKey("rk_live_a");
  auto b = store.GetApiKey("rk_live_b");
  ASSERT_TRUE(a.ok() && a->has_value() && b.ok() && b->has_value());
  EXPECT_EQ((*a)->last_used_unix, 700);
  EXPECT_EQ((*b)->last_used_unix, 800);
}

TYPED_TEST(StoreRecordsTest, TheGenerationMovesOnEveryChangeAndOnlyThenForEveryReader) {
  Store& store = *this->store_;
  std::unique_ptr<Store> other = this->OpenOrDie();  // another process or replica
  ASSERT_NE(other, nullptr);
  int64_t last = this->GenerationOf(store);
  const auto moved = [&] {
    const int64_t now = this->GenerationOf(store);
    const bool changed = now != last;
    EXPECT_EQ(this->GenerationOf(*other), now);
    last = now;
    return changed;
  };
  STORE_ASSERT_OK(store.CreateTenant({.name = "acme"}));
  EXPECT_TRUE(moved());
  STORE_ASSERT_OK(store.PutPrincipal({.tenant = "acme", .name = "alice"}));
  EXPECT_TRUE(moved());
  STORE_ASSERT_OK(store.PutPrincipal({.tenant = "acme", .name = "alice", .roles = {"x"}}));
  EXPECT_TRUE(moved());
  STORE_ASSERT_OK(other->CreateApiKey(this->Key("rk_live_a", "acme", "alice")));
  EXPECT_TRUE(moved());
  STORE_ASSERT_OK(store.TouchApiKeys({{"rk_live_a", 5}}));
  EXPECT_FALSE(moved());
  ASSERT_TRUE(store.LeaseBudget("tenant:acme:rpm", 60, 10, 1).ok());
  EXPECT_FALSE(moved());
  EXPECT_FALSE(store.CreateTenant({.name = "acme"}).ok());
  EXPECT_FALSE(moved());
  STORE_ASSERT_OK(store.RevokeApiKey("rk_live_a", 10));
  EXPECT_TRUE(moved());
  STORE_ASSERT_OK(store.RevokeApiKey("rk_live_a", 20));  // already revoked: nothing changes
  EXPECT_FALSE(moved());
  STORE_ASSERT_OK(store.DeletePrincipal("acme", "alice"));
  EXPECT_TRUE(moved());
  STORE_ASSERT_OK(store.DeleteTenant("acme"));
  EXPECT_TRUE(moved());
}

TYPED_TEST(StoreRecordsTest, ConcurrentWritersOnSeveralStoresAllSucceed) {
  // Two Store objects on one database stand for two processes (SQLite: the CLI beside the
  // server; PostgreSQL: two replicas): their writers wait for each other, none fails as busy.
  std::unique_ptr<Store> other = this->OpenOrDie();
  ASSERT_NE(other, nullptr);
  STORE_ASSERT_OK(this->store_->CreateTenant({.name = "acme"}));
  constexpr int kThreads = 4;
  constexpr int kWritesPerThread = 25;
  std::vector<std::thread> threads;
  std::vector<Status> failures(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    Store* store = t % 2 == 0 ? this->store_.get() : other.get();
    threads.emplace_back([&, store, t] {
      for (int i = 0; i < kWritesPerThread && failures[t].ok(); ++i) {
        const std::string name = fmt::format("p{}_{}", t, i);
        failures[t] = store->PutPrincipal({.tenant = "acme", .name = name});
        if (failures[t].ok()) {
          failures[t] = store->CreateApiKey(this->Key("rk_live_" + name, "acme", name));
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const Status& failure : failures) EXPECT_TRUE(failure.ok()) << failure.ToString();
  auto principals = other->ListPrincipals("acme");
  auto keys = this->store_->ListApiKeys("acme");
  ASSERT_TRUE(principals.ok() && keys.ok());
  EXPECT_EQ(principals->size(), size_t{kThreads * kWritesPerThread});
  EXPECT_EQ(keys->size(), size_t{kThreads * kWritesPerThread});
}

}  // namespace
}  // namespace rampart::store::testing
