#include "identity/api_keys.h"

#include <gtest/gtest.h>

#include <regex>
#include <thread>

#include "identity/encoding.h"
#include "testing/eventually.h"
#include "testing/memory_store.h"

namespace rampart::identity {
namespace {

using ::rampart::testing::Eventually;
using ::rampart::testing::MemoryStore;

constexpr int64_t kNow = 1'800'000'000;

class ApiKeyTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(store_
                    .CreateTenant(
                        {.name = "acme", .attributes = {{"region", "eu"}, {"clearance", "PUBLIC"}}})
                    .ok());
    store::Principal alice;
    alice.tenant = "acme";
    alice.name = "alice";
    alice.roles = {"viewer"};
    alice.attributes = {{"department", "research"}, {"clearance", "SECRET"}};
    ASSERT_TRUE(store_.PutPrincipal(alice).ok());
  }

  // Makes a key for acme/alice in the store and returns its text.
  std::string AddKey(std::vector<std::string> roles = {"analyst"}, int64_t expires = 0) {
    NewApiKey key = GenerateApiKey("acme", "alice", "ci", std::move(roles), kNow, expires);
    EXPECT_TRUE(store_.CreateApiKey(key.record).ok());
    return key.key;
  }

  std::unique_ptr<ApiKeyTable> Open(std::chrono::milliseconds poll = std::chrono::hours(1)) {
    Result<std::unique_ptr<ApiKeyTable>> table = ApiKeyTable::Open(store_, {.poll_period = poll});
    EXPECT_TRUE(table.ok()) << table.status().ToString();
    return table.ok() ? std::move(*table) : nullptr;
  }

  MemoryStore store_;
};

TEST(GenerateApiKeyTest, HasTheDocumentedShapeAndASaltedHashOfTheWholeKey) {
  const NewApiKey key = GenerateApiKey("acme", "alice", "ci", {"b", "a", "b"}, kNow, kNow + 60);
  EXPECT_TRUE(std::regex_match(key.key, std::regex("rk_live_[0-9A-Za-z]{12}_[0-9A-Za-z]{32}")))
      << key.key;
  EXPECT_EQ(key.record.id, key.key.substr(0, 20));
  EXPECT_TRUE(LooksLikeApiKey(key.key));
  EXPECT_EQ(key.record.salt.size(), 32u);  // 16 bytes, hex
  EXPECT_EQ(key.record.hash, HexEncode(Sha256(*HexDecode(key.record.salt) + key.key)));
  EXPECT_EQ(key.record.roles, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(key.record.created_unix, kNow);
  EXPECT_EQ(key.record.expires_unix, kNow + 60);
  EXPECT_EQ(key.key.find(key.record.hash), std::string::npos);

  const NewApiKey other = GenerateApiKey("acme", "alice", "ci", {}, kNow);
  EXPECT_NE(other.key, key.key);
  EXPECT_NE(other.record.salt, key.record.salt);
  EXPECT_FALSE(LooksLikeApiKey("sk-abc"));
}

TEST_F(ApiKeyTableTest, VerifiesAKeyIntoItsPrincipalsIdentity) {
  const std::string key = AddKey({"analyst", "viewer"}, kNow + 3600);
  const auto table = Open();
  const Result<Identity> identity = table->Verify(key, kNow);
  ASSERT_TRUE(identity.ok()) << identity.status().ToString();
  EXPECT_EQ(identity->method, Method::kApiKey);
  EXPECT_EQ(identity->tenant, "acme");
  EXPECT_EQ(identity->principal, "alice");
  EXPECT_EQ(identity->roles, (std::vector<std::string>{"analyst", "viewer"}));
  // The tenant's attributes, overridden by the principal's.
  EXPECT_EQ(
      identity->attributes,
      (store::Attributes{{"clearance", "SECRET"}, {"department", "research"}, {"region", "eu"}}));
  EXPECT_EQ(identity->key_id, key.substr(0, 20));
  EXPECT_EQ(identity->expires_unix, kNow + 3600);
}

TEST_F(ApiKeyTableTest, RefusesWrongSecretsUnknownIdsAndMalformedKeysAlike) {
  const std::string key = AddKey();
  const auto table = Open();
  std::string wrong_secret = key;
  wrong_secret.back() = wrong_secret.back() == 'a' ? 'b' : 'a';
  std::string unknown_id = key;
  unknown_id[10] = unknown_id[10] == 'a' ? 'b' : 'a';
  std::string other_prefix = key;
  other_prefix.replace(3, 4, "test");
  std::string other_separator = key;
  other_separator[20] = '-';
  std::string longer = key;
  longer.push_back('x');
  for (const std::string& text :
       {wrong_secret, unknown_id, key.substr(0, key.size() - 1), longer, std::string("rk_"),
        std::string(""), other_prefix, other_separator}) {
    const Result<Identity> identity = table->Verify(text, kNow);
    EXPECT_EQ(identity.status().code(), StatusCode::kUnauthenticated) << text;
    EXPECT_EQ(identity.status().message(), "invalid API key") << text;
  }
}

TEST_F(ApiKeyTableTest, RevokedExpiredAndDisabledKeysAreRefusedWithTheirReason) {
  const std::string revoked = AddKey();
  const std::string expiring = AddKey({}, kNow + 10);
  const auto table = Open();
  ASSERT_TRUE(store_.RevokeApiKey(revoked.substr(0, 20), kNow).ok());
  ASSERT_TRUE(table->Refresh().ok());
  EXPECT_EQ(table->Verify(revoked, kNow).status().message(), "API key revoked");

  EXPECT_TRUE(table->Verify(expiring, kNow + 9).ok());
  EXPECT_EQ(table->Verify(expiring, kNow + 10).status().message(), "API key expired");

  store::Principal alice = **store_.GetPrincipal("acme", "alice");
  alice.disabled = true;
  ASSERT_TRUE(store_.PutPrincipal(alice).ok());
  ASSERT_TRUE(table->Refresh().ok());
  EXPECT_EQ(table->Verify(expiring, kNow).status().message(), "principal disabled");

  // Deleting the principal revokes its keys.
  ASSERT_TRUE(store_.DeletePrincipal("acme", "alice").ok());
  ASSERT_TRUE(table->Refresh().ok());
  EXPECT_EQ(table->Verify(expiring, kNow).status().message(), "API key revoked");
}

TEST_F(ApiKeyTableTest, ThePollerPicksUpChangesMadeBehindItsBack) {
  const auto table = Open(std::chrono::milliseconds(5));
  const std::string key = AddKey();  // after Open: only a reload can know it
  EXPECT_TRUE(Eventually([&] { return table->Verify(key, kNow).ok(); }));
  ASSERT_TRUE(store_.RevokeApiKey(key.substr(0, 20), kNow).ok());
  EXPECT_TRUE(
      Eventually([&] { return table->Verify(key, kNow).status().message() == "API key revoked"; }));
}

TEST_F(ApiKeyTableTest, PollingReloadsOnlyWhenTheGenerationMoves) {
  const std::string key = AddKey();
  const auto table = Open(std::chrono::milliseconds(1));
  const int64_t lists_after_open = store_.list_key_calls();
  // Touches do not move the generation: let the poller run many rounds with uses to write.
  ASSERT_TRUE(table->Verify(key, kNow).ok());
  EXPECT_TRUE(Eventually([&] { return store_.touch_calls() >= 1; }));
  const int64_t touches = store_.touch_calls();
  ASSERT_TRUE(table->Verify(key, kNow + 1).ok());
  EXPECT_TRUE(Eventually([&] { return store_.touch_calls() > touches; }));
  EXPECT_EQ(store_.list_key_calls(), lists_after_open);
  ASSERT_TRUE(store_.PutPrincipal({.tenant = "acme", .name = "bob"}).ok());
  EXPECT_TRUE(Eventually([&] { return store_.list_key_calls() > lists_after_open; }));
}

TEST_F(ApiKeyTableTest, LastUseIsWrittenInTheBackgroundAndOnlyWhenItMoves) {
  const std::string key = AddKey();
  const auto table = Open(std::chrono::milliseconds(1));
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(table->Verify(key, kNow + 5).ok());
  EXPECT_TRUE(Eventually(
      [&] { return (*store_.GetApiKey(key.substr(0, 20)))->last_used_unix == kNow + 5; }));
  // 100 uses in one second are one write; an older time never replaces a newer one.
  const int64_t touches = store_.touch_calls();
  ASSERT_TRUE(table->Verify(key, kNow + 1).ok());
  ASSERT_TRUE(store_.PutPrincipal({.tenant = "acme", .name = "bob"}).ok());  // forces a reload
  EXPECT_TRUE(Eventually([&] { return store_.list_key_calls() > 1; }));
  ASSERT_TRUE(table->Refresh().ok());
  EXPECT_EQ(store_.touch_calls(), touches);
  EXPECT_EQ((*store_.GetApiKey(key.substr(0, 20)))->last_used_unix, kNow + 5);
}

TEST_F(ApiKeyTableTest, DestructionWritesPendingLastUse) {
  const std::string key = AddKey();
  {
    const auto table = Open();  // an hour between polls: only the destructor writes
    ASSERT_TRUE(table->Verify(key, kNow + 7).ok());
  }
  EXPECT_EQ((*store_.GetApiKey(key.substr(0, 20)))->last_used_unix, kNow + 7);
}

TEST_F(ApiKeyTableTest, AnUnreachableStoreKeepsTheLastSnapshot) {
  const std::string key = AddKey();
  const auto table = Open(std::chrono::milliseconds(1));
  store_.SetUnavailable(true);
  EXPECT_EQ(table->Refresh().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(table->Verify(key, kNow).ok());
  store_.SetUnavailable(false);

  store_.SetUnavailable(true);
  EXPECT_EQ(ApiKeyTable::Open(store_).status().code(), StatusCode::kUnavailable);
  store_.SetUnavailable(false);
}

TEST_F(ApiKeyTableTest, FindPrincipalReadsTheSnapshot) {
  const auto table = Open();
  const std::optional<store::Principal> alice = table->FindPrincipal("acme", "alice");
  ASSERT_TRUE(alice.has_value());
  EXPECT_EQ(alice->roles, (std::vector<std::string>{"viewer"}));
  EXPECT_FALSE(table->FindPrincipal("acme", "bob").has_value());
  EXPECT_FALSE(table->FindPrincipal("other", "alice").has_value());
}

TEST_F(ApiKeyTableTest, VerifiesFromManyThreadsWhileTheSnapshotIsReplaced) {
  const std::string key = AddKey();
  const auto table = Open(std::chrono::milliseconds(1));
  std::atomic<bool> stop{false};
  std::atomic<int64_t> failures{0};
  std::vector<std::thread> verifiers;
  for (int t = 0; t < 4; ++t) {
    verifiers.emplace_back([&, t] {
      int64_t now = kNow + t;
      while (!stop) {
        if (!table->Verify(key, ++now).ok()) ++failures;
      }
    });
  }
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(store_.PutPrincipal({.tenant = "acme", .name = fmt::format("p{}", i)}).ok());
    ASSERT_TRUE(table->Refresh().ok());
  }
  stop = true;
  for (std::thread& thread : verifiers) thread.join();
  EXPECT_EQ(failures, 0);
}

}  // namespace
}  // namespace rampart::identity
