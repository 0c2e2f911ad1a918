// The guard's key kept sealed in the keyring: made once, the same on every later start and for
// every replica sharing the store, never in clear in the store, and refused under another master
// key.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "app/keyring_cli.h"
#include "crypto/keyring.h"
#include "store/store.h"

namespace rampart::app {
namespace {

class SealedGuardKeysTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("rampart_sealed_guard_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string WriteMasterKey(const std::string& name, char digit) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << std::string(64, digit);
    std::filesystem::permissions(
        path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    return path;
  }

  // The guard's keys as a server with this master key would get them.
  Result<guard::GuardKeys> Start(store::Store& store, const std::string& master_file) {
    ASSIGN_OR_RETURN(std::unique_ptr<crypto::MasterKey> master,
                     crypto::MasterKeyFromFile(master_file));
    ASSIGN_OR_RETURN(KeyringRuntime runtime, OpenKeyring(store, std::move(master)));
    return SealedGuardKeys(store, *runtime.keyring);
  }

  std::filesystem::path dir_;
};

TEST_F(SealedGuardKeysTest, MadeOnceAndTheSameOnEveryStart) {
  auto store = store::OpenSqliteStore((dir_ / "data").string());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const std::string master = WriteMasterKey("master.key", 'a');

  Result<guard::GuardKeys> first = Start(**store, master);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  Result<guard::GuardKeys> again = Start(**store, master);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(first->ForTenant("acme").token, again->ForTenant("acme").token);
  EXPECT_EQ(first->ForTenant("acme").hash, again->ForTenant("acme").hash);

  // A replica on the same store (another Store object) gets the same key.
  auto replica = store::OpenSqliteStore((dir_ / "data").string());
  ASSERT_TRUE(replica.ok());
  Result<guard::GuardKeys> theirs = Start(**replica, master);
  ASSERT_TRUE(theirs.ok()) << theirs.status().ToString();
  EXPECT_EQ(first->ForTenant("default").token, theirs->ForTenant("default").token);

  // What the store holds is an envelope under the keyring's "secrets" key.
  auto sealed = (*store)->GetSealedSecret(std::string(kGuardSecretName));
  ASSERT_TRUE(sealed.ok());
  ASSERT_TRUE(sealed->has_value());
  EXPECT_GT((*sealed)->envelope.size(), 32u);
}

TEST_F(SealedGuardKeysTest, AnotherMasterKeyCannotOpenIt) {
  auto store = store::OpenSqliteStore((dir_ / "data").string());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE(Start(**store, WriteMasterKey("master.key", 'a')).ok());
  Result<guard::GuardKeys> other = Start(**store, WriteMasterKey("other.key", 'b'));
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("decryption failed"), std::string::npos)
      << other.status().ToString();
}

}  // namespace
}  // namespace rampart::app
