// The keyring's tables on both backends: key versions (a taken version is AlreadyExists, as two
// replicas rotating at once see it), minimum decryption versions that never move down, and sealed
// secrets with a compare-and-set replace. Bytes of every value survive the TEXT columns.

#include <string>
#include <thread>
#include <vector>

#include "store/store_fixture.h"

namespace rampart::store::testing {
namespace {

template <typename Backend>
using StoreKeyringTest = StoreTest<Backend>;
TYPED_TEST_SUITE(StoreKeyringTest, Backends, BackendNames);

// Every byte value, so that the encoding is checked end to end.
std::string AllBytes() {
  std::string bytes;
  for (int value = 0; value < 256; ++value) bytes.push_back(static_cast<char>(value));
  return bytes;
}

KeyVersion Version(std::string name, int version, std::string material = AllBytes()) {
  return KeyVersion{.name = std::move(name),
                    .version = version,
                    .purpose = "wrapping",
                    .algorithm = "aes-256-gcm",
                    .wrapped_material = std::move(material),
                    .created_unix = 1000 + version};
}

TYPED_TEST(StoreKeyringTest, KeyVersionsAreAddedOnceAndListedInOrderWithTheirBytes) {
  Store& store = *this->store_;
  STORE_ASSERT_OK(store.AddKeyVersion(Version("tokens", 2, "second")));
  STORE_ASSERT_OK(store.AddKeyVersion(Version("tokens", 1)));
  STORE_ASSERT_OK(store.AddKeyVersion(Version("audit", 1, std::string(1, '\0'))));
  const Status taken = store.AddKeyVersion(Version("tokens", 2, "another"));
  EXPECT_EQ(taken.code(), StatusCode::kAlreadyExists) << taken.ToString();

  // A second process's view of the same database.
  auto other = this->OpenOrDie();
  ASSERT_NE(other, nullptr);
  auto versions = other->ListKeyVersions();
  ASSERT_TRUE(versions.ok()) << versions.status().ToString();
  ASSERT_EQ(versions->size(), 3u);
  EXPECT_EQ((*versions)[0].name, "audit");
  EXPECT_EQ((*versions)[0].wrapped_material, std::string(1, '\0'));
  EXPECT_EQ((*versions)[1].name, "tokens");
  EXPECT_EQ((*versions)[1].version, 1);
  EXPECT_EQ((*versions)[1].wrapped_material, AllBytes());
  EXPECT_EQ((*versions)[1].created_unix, 1001);
  EXPECT_EQ((*versions)[1].purpose, "wrapping");
  EXPECT_EQ((*versions)[1].algorithm, "aes-256-gcm");
  EXPECT_EQ((*versions)[2].version, 2);
  EXPECT_EQ((*versions)[2].wrapped_material, "second");  // the first write stayed
}

TYPED_TEST(StoreKeyringTest, KeyVersionsThatBreakTheRulesAreRefused) {
  Store& store = *this->store_;
  EXPECT_EQ(store.AddKeyVersion(Version("", 1)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store.AddKeyVersion(Version("a b", 1)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store.AddKeyVersion(Version("k", 0)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store.AddKeyVersion(Version("k", 1, "")).code(), StatusCode::kInvalidArgument);
  KeyVersion purpose = Version("k", 1);
  purpose.purpose = "other";
  EXPECT_EQ(store.AddKeyVersion(purpose).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store.AddKeyVersion(Version("k", 1, std::string(kMaxSealedBytes + 1, 'x'))).code(),
            StatusCode::kInvalidArgument);
  auto versions = store.ListKeyVersions();
  ASSERT_TRUE(versions.ok());
  EXPECT_TRUE(versions->empty());
}

TYPED_TEST(StoreKeyringTest, ReplicasRotatingAtOnceGetExactlyOneWinnerPerVersion) {
  auto other = this->OpenOrDie();
  ASSERT_NE(other, nullptr);
  constexpr int kVersions = 20;
  std::vector<Status> first(kVersions + 1), second(kVersions + 1);
  std::thread racer([&] {
    for (int v = 1; v <= kVersions; ++v) second[v] = other->AddKeyVersion(Version("k", v, "b"));
  });
  for (int v = 1; v <= kVersions; ++v) first[v] = this->store_->AddKeyVersion(Version("k", v, "a"));
  racer.join();
  for (int v = 1; v <= kVersions; ++v) {
    EXPECT_NE(first[v].ok(), second[v].ok())
        << v << ": " << first[v].ToString() << " / " << second[v].ToString();
    const Status& lost = first[v].ok() ? second[v] : first[v];
    EXPECT_EQ(lost.code(), StatusCode::kAlreadyExists) << lost.ToString();
  }
  auto versions = this->store_->ListKeyVersions();
  ASSERT_TRUE(versions.ok());
  EXPECT_EQ(versions->size(), static_cast<size_t>(kVersions));
}

TYPED_TEST(StoreKeyringTest, MinimumDecryptionVersionsNeverMoveDown) {
  Store& store = *this->store_;
  STORE_ASSERT_OK(store.RaiseMinDecryptionVersion("tokens", 3));
  STORE_ASSERT_OK(store.RaiseMinDecryptionVersion("tokens", 2));
  STORE_ASSERT_OK(store.RaiseMinDecryptionVersion("audit", 1));
  EXPECT_EQ(store.RaiseMinDecryptionVersion("audit", 0).code(), StatusCode::kInvalidArgument);
  auto minimums = store.ListMinDecryptionVersions();
  ASSERT_TRUE(minimums.ok()) << minimums.status().ToString();
  const std::vector<std::pair<std::string, int>> expected = {{"audit", 1}, {"tokens", 3}};
  EXPECT_EQ(*minimums, expected);
}

TYPED_TEST(StoreKeyringTest, SealedSecretsAreCreatedOnceAndReplacedOnlyFromWhatTheCallerSaw) {
  Store& store = *this->store_;
  STORE_ASSERT_OK(store.CreateSealedSecret({.name = "guard:master", .envelope = AllBytes()}));
  EXPECT_EQ(store.CreateSealedSecret({.name = "guard:master", .envelope = "x"}).code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(store.CreateSealedSecret({.name = "bad name", .envelope = "x"}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store.CreateSealedSecret({.name = "empty", .envelope = ""}).code(),
            StatusCode::kInvalidArgument);

  auto got = store.GetSealedSecret("guard:master");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->envelope, AllBytes());
  EXPECT_GT((*got)->updated_unix, 0);
  auto missing = store.GetSealedSecret("nothing");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());

  STORE_ASSERT_OK(store.ReplaceSealedSecret("guard:master", AllBytes(), "rewrapped"));
  // A second rewrap that read the old envelope loses, and says so.
  EXPECT_EQ(store.ReplaceSealedSecret("guard:master", AllBytes(), "stale").code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.ReplaceSealedSecret("nothing", "a", "b").code(), StatusCode::kNotFound);

  STORE_ASSERT_OK(store.CreateSealedSecret({.name = "a:first", .envelope = "1"}));
  auto all = store.ListSealedSecrets();
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].name, "a:first");
  EXPECT_EQ((*all)[1].name, "guard:master");
  EXPECT_EQ((*all)[1].envelope, "rewrapped");
}

TYPED_TEST(StoreKeyringTest, AnEnvelopeThatIsNotHexInTheDatabaseIsAnErrorNotACrash) {
  STORE_ASSERT_OK(this->store_->CreateSealedSecret({.name = "s", .envelope = "x"}));
  STORE_ASSERT_OK(this->backend_.Execute("UPDATE sealed_secrets SET envelope = 'zz1'"));
  auto got = this->store_->GetSealedSecret("s");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kInternal) << got.status().ToString();
}

}  // namespace
}  // namespace rampart::store::testing
