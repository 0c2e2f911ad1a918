// The master key (files, permissions, the environment), the keyring (versions, rotation, minimum
// decryption versions, reloads across processes sharing a SQLite store) and sealed secrets.

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "crypto/digest.h"
#include "crypto/envelope.h"
#include "crypto/keyring.h"
#include "store/keyring_storage.h"
#include "testing/memory_store.h"

namespace rampart::crypto {
namespace {

#define KR_ASSERT_OK(expr)                                 \
  do {                                                     \
    const ::rampart::Status kr_status_ = (expr);           \
    ASSERT_TRUE(kr_status_.ok()) << kr_status_.ToString(); \
  } while (0)

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/rampart-keyring-XXXXXX";
    EXPECT_NE(mkdtemp(pattern), nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string File(const std::string& name, std::string_view content, mode_t mode) const {
    const std::string path = path_ + "/" + name;
    std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
    EXPECT_EQ(::chmod(path.c_str(), mode), 0);
    return path;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string Bytes(char first) {
  std::string bytes(32, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(first + i);
  return bytes;
}

std::unique_ptr<MasterKey> MasterFromBytes(const TempDir& dir, const std::string& bytes) {
  auto master = MasterKeyFromFile(dir.File("master-" + ToHex(bytes).substr(0, 8), bytes, 0600));
  EXPECT_TRUE(master.ok()) << master.status().ToString();
  return master.ok() ? std::move(*master) : nullptr;
}

TEST(MasterKeyTest, RawHexAndBase64FilesGiveTheSameKey) {
  TempDir dir;
  const std::string key = Bytes('A');
  auto raw = MasterKeyFromFile(dir.File("raw", key, 0600));
  auto hex = MasterKeyFromFile(dir.File("hex", "  " + ToHex(key) + "\n", 0400));
  // base64 of 'A'..'`' (32 bytes), computed independently with `base64`.
  auto base64 =
      MasterKeyFromFile(dir.File("b64", "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVpbXF1eX2A=\n", 0600));
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  ASSERT_TRUE(hex.ok()) << hex.status().ToString();
  ASSERT_TRUE(base64.ok()) << base64.status().ToString();
  EXPECT_EQ((*raw)->Describe(), "file:" + dir.path() + "/raw");

  auto wrapped = (*raw)->Wrap("material", "context");
  ASSERT_TRUE(wrapped.ok()) << wrapped.status().ToString();
  EXPECT_EQ(wrapped->find("material"), std::string::npos);
  for (const MasterKey* other : {hex->get(), base64->get()}) {
    auto unwrapped = other->Unwrap(*wrapped, "context");
    ASSERT_TRUE(unwrapped.ok()) << unwrapped.status().ToString();
    EXPECT_EQ(*unwrapped, "material");
  }
}

TEST(MasterKeyTest, AFileOthersCanReadIsRefusedWithAClearError) {
  TempDir dir;
  for (const mode_t mode : {0640, 0604, 0620, 0666}) {
    auto master = MasterKeyFromFile(dir.File("open", ToHex(Bytes('a')), mode));
    ASSERT_FALSE(master.ok());
    EXPECT_EQ(master.status().code(), StatusCode::kPermissionDenied);
    EXPECT_NE(master.status().message().find("chmod 600"), std::string::npos)
        << master.status().ToString();
  }
}

TEST(MasterKeyTest, BadFilesAreRefusedWithoutQuotingTheirContent) {
  TempDir dir;
  const std::string secret_looking =
      "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeZ";
  for (const std::string& content :
       {secret_looking, std::string(31, 'x'), std::string(33, 'x'), std::string(),
        ToHex(Bytes('a')) + "00", std::string(5000, 'a')}) {
    auto master = MasterKeyFromFile(dir.File("bad", content, 0600));
    ASSERT_FALSE(master.ok()) << content.size();
    EXPECT_EQ(master.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(master.status().message().find("0123456789abcdef"), std::string::npos);
  }
  auto missing = MasterKeyFromFile(dir.path() + "/missing");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  auto directory = MasterKeyFromFile(dir.path());
  EXPECT_FALSE(directory.ok());
}

TEST(MasterKeyTest, TheEnvironmentHoldsHexOrBase64) {
  const std::string key = Bytes('0');
  ASSERT_EQ(::setenv("RAMPART_TEST_MASTER_KEY", ToHex(key).c_str(), 1), 0);
  auto hex = MasterKeyFromEnvironment("RAMPART_TEST_MASTER_KEY");
  ASSERT_TRUE(hex.ok()) << hex.status().ToString();
  EXPECT_EQ((*hex)->Describe(), "env:RAMPART_TEST_MASTER_KEY");
  ASSERT_EQ(::setenv("RAMPART_TEST_MASTER_KEY", "not a key", 1), 0);
  auto garbage = MasterKeyFromEnvironment("RAMPART_TEST_MASTER_KEY");
  EXPECT_EQ(garbage.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(garbage.status().message().find("not a key"), std::string::npos);
  ::unsetenv("RAMPART_TEST_MASTER_KEY");
  auto unset = MasterKeyFromEnvironment("RAMPART_TEST_MASTER_KEY");
  EXPECT_EQ(unset.status().code(), StatusCode::kNotFound);
}

TEST(MasterKeyTest, UnwrapNeedsTheSameKeyAndContextAndAnIntactInput) {
  TempDir dir;
  auto master = MasterFromBytes(dir, Bytes('a'));
  auto other = MasterFromBytes(dir, Bytes('b'));
  ASSERT_NE(master, nullptr);
  ASSERT_NE(other, nullptr);
  auto wrapped = master->Wrap("material", "key|1");
  ASSERT_TRUE(wrapped.ok());
  EXPECT_FALSE(master->Unwrap(*wrapped, "key|2").ok());
  EXPECT_FALSE(other->Unwrap(*wrapped, "key|1").ok());
  for (size_t length = 0; length < wrapped->size(); ++length) {
    auto truncated = master->Unwrap(wrapped->substr(0, length), "key|1");
    ASSERT_FALSE(truncated.ok());
    EXPECT_NE(truncated.status().message().find("decryption failed"), std::string::npos);
  }
}

// A keyring over the in-memory store.
class KeyringTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = Keyring::Open(storage_, MasterFromBytes(dir_, Bytes('k')));
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    keyring_ = std::move(*opened);
  }

  TempDir dir_;
  testing::MemoryStore store_;
  store::StoreKeyringStorage storage_{store_};
  std::unique_ptr<Keyring> keyring_;
};

TEST_F(KeyringTest, KeysAreCreatedOnceRotatedAndKeepTheirOldVersions) {
  KR_ASSERT_OK(keyring_->Ensure("tokens", KeyPurpose::kWrapping, "aes-256-gcm"));
  KR_ASSERT_OK(keyring_->Ensure("tokens", KeyPurpose::kWrapping, "aes-256-gcm"));  // exists
  EXPECT_EQ(keyring_->Ensure("tokens", KeyPurpose::kWrapping, "sm4-ctr-hmac-sm3").code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(keyring_->Ensure("tokens", KeyPurpose::kSigning, "ed25519").code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(keyring_->Ensure("x", KeyPurpose::kWrapping, "ed25519").code(),
            StatusCode::kInvalidArgument);

  auto first = keyring_->CurrentWrappingKey("tokens");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->version, 1);
  EXPECT_EQ(first->material.size(), 32u);
  auto rotated = keyring_->Rotate("tokens");
  ASSERT_TRUE(rotated.ok()) << rotated.status().ToString();
  EXPECT_EQ(*rotated, 2);
  auto second = keyring_->CurrentWrappingKey("tokens");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->version, 2);
  EXPECT_NE(second->material, first->material);
  auto old = keyring_->WrappingKeyVersion("tokens", 1);
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->material, first->material);
  EXPECT_EQ(keyring_->WrappingKeyVersion("tokens", 3).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(keyring_->Rotate("unknown").status().code(), StatusCode::kNotFound);

  auto status = keyring_->StatusOf("tokens");
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->current_version, 2);
  EXPECT_EQ(status->min_decryption_version, 1);
  EXPECT_EQ(status->algorithm, "aes-256-gcm");
  ASSERT_EQ(status->versions.size(), 2u);

  // The store holds only wrapped material.
  auto stored = store_.ListKeyVersions();
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 2u);
  EXPECT_EQ((*stored)[0].wrapped_material.find(first->material), std::string::npos);
}

TEST_F(KeyringTest, TheMinimumDecryptionVersionRetiresOldVersionsAndNeverGoesDown) {
  KR_ASSERT_OK(keyring_->Ensure("tokens", KeyPurpose::kWrapping, "aes-256-gcm"));
  ASSERT_TRUE(keyring_->Rotate("tokens").ok());
  EXPECT_EQ(keyring_->SetMinDecryptionVersion("tokens", 3).code(), StatusCode::kInvalidArgument);
  KR_ASSERT_OK(keyring_->SetMinDecryptionVersion("tokens", 2));
  EXPECT_EQ(keyring_->WrappingKeyVersion("tokens", 1).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_TRUE(keyring_->WrappingKeyVersion("tokens", 2).ok());
  EXPECT_EQ(keyring_->SetMinDecryptionVersion("tokens", 1).code(), StatusCode::kInvalidArgument);
  KR_ASSERT_OK(keyring_->SetMinDecryptionVersion("tokens", 2));  // the same: no change
  EXPECT_EQ(keyring_->StatusOf("tokens")->min_decryption_version, 2);
}

TEST_F(KeyringTest, SigningKeysSignWithTheCurrentVersionAndVerifyWithAnyLiveOne) {
  KR_ASSERT_OK(keyring_->Ensure("audit", KeyPurpose::kSigning, "ed25519"));
  auto signing = keyring_->CurrentSigningKey("audit");
  ASSERT_TRUE(signing.ok()) << signing.status().ToString();
  EXPECT_EQ(signing->first, 1);
  auto signature = signing->second.Sign("checkpoint");
  ASSERT_TRUE(signature.ok());
  ASSERT_TRUE(keyring_->Rotate("audit").ok());
  auto verifying = keyring_->VerifyingKeyVersion("audit", 1);
  ASSERT_TRUE(verifying.ok()) << verifying.status().ToString();
  EXPECT_TRUE(verifying->Verify("checkpoint", *signature));
  EXPECT_EQ(keyring_->CurrentSigningKey("audit")->first, 2);
  EXPECT_EQ(keyring_->CurrentWrappingKey("audit").status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(KeyringTest, ADifferentMasterKeyCannotOpenTheKeyring) {
  KR_ASSERT_OK(keyring_->Ensure("tokens", KeyPurpose::kWrapping, "aes-256-gcm"));
  auto other = Keyring::Open(storage_, MasterFromBytes(dir_, Bytes('z')));
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("decryption failed"), std::string::npos)
      << other.status().ToString();
  EXPECT_NE(other.status().message().find("key 'tokens' version 1"), std::string::npos);
}

TEST_F(KeyringTest, AStoredVersionMovedToAnotherNameOrVersionDoesNotUnwrap) {
  KR_ASSERT_OK(keyring_->Ensure("tokens", KeyPurpose::kWrapping, "aes-256-gcm"));
  auto stored = store_.ListKeyVersions();
  ASSERT_TRUE(stored.ok());
  store::KeyVersion moved = (*stored)[0];
  moved.version = 2;  // someone with write access to the store "rotates" to a copy
  KR_ASSERT_OK(store_.AddKeyVersion(moved));
  const Status reloaded = keyring_->Reload();
  EXPECT_FALSE(reloaded.ok());
  EXPECT_NE(reloaded.message().find("key 'tokens' version 2"), std::string::npos)
      << reloaded.ToString();
}

// Two processes sharing one SQLite store: each has its own Store and Keyring.
TEST(KeyringReplicaTest, ReloadPicksUpAnotherProcesssRotationAndARaceIsAlreadyExists) {
  TempDir dir;
  auto first_store = store::OpenSqliteStore(dir.path() + "/data");
  auto second_store = store::OpenSqliteStore(dir.path() + "/data");
  ASSERT_TRUE(first_store.ok() && second_store.ok());
  store::StoreKeyringStorage first_storage(**first_store), second_storage(**second_store);
  auto first = Keyring::Open(first_storage, MasterFromBytes(dir, Bytes('m')));
  auto second = Keyring::Open(second_storage, MasterFromBytes(dir, Bytes('m')));
  ASSERT_TRUE(first.ok() && second.ok());
  KR_ASSERT_OK((*first)->Ensure("tokens", KeyPurpose::kWrapping, "sm4-ctr-hmac-sm3"));
  // Ensure on the second finds the first's key in the store rather than making another.
  KR_ASSERT_OK((*second)->Ensure("tokens", KeyPurpose::kWrapping, "sm4-ctr-hmac-sm3"));
  EXPECT_EQ((*first)->CurrentWrappingKey("tokens")->material,
            (*second)->CurrentWrappingKey("tokens")->material);

  ASSERT_EQ(*(*first)->Rotate("tokens"), 2);
  EXPECT_EQ((*second)->CurrentWrappingKey("tokens")->version, 1);  // not reloaded yet
  // The second rotates from its stale view: version 2 is taken, so it reloads and says so.
  auto raced = (*second)->Rotate("tokens");
  ASSERT_FALSE(raced.ok());
  EXPECT_EQ(raced.status().code(), StatusCode::kAlreadyExists) << raced.status().ToString();
  EXPECT_EQ((*second)->CurrentWrappingKey("tokens")->version, 2);
  EXPECT_EQ((*second)->CurrentWrappingKey("tokens")->material,
            (*first)->CurrentWrappingKey("tokens")->material);

  KR_ASSERT_OK((*second)->SetMinDecryptionVersion("tokens", 2));
  EXPECT_TRUE((*first)->WrappingKeyVersion("tokens", 1).ok());
  KR_ASSERT_OK((*first)->Reload());
  EXPECT_EQ((*first)->WrappingKeyVersion("tokens", 1).status().code(),
            StatusCode::kFailedPrecondition);
}

TEST_F(KeyringTest, SealedSecretsAreMadeOnceAndRewrappedWithoutChangingThem) {
  KR_ASSERT_OK(keyring_->Ensure("secrets", KeyPurpose::kWrapping, "aes-256-gcm"));
  const Envelope envelope(*keyring_);
  int generated = 0;
  const auto generate = [&] {
    ++generated;
    return RandomBytes(32);
  };
  auto secret =
      store::LoadOrCreateSealedSecret(store_, envelope, "guard:master", "secrets", generate);
  ASSERT_TRUE(secret.ok()) << secret.status().ToString();
  auto again =
      store::LoadOrCreateSealedSecret(store_, envelope, "guard:master", "secrets", generate);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *secret);
  EXPECT_EQ(generated, 1);
  auto stored = store_.GetSealedSecret("guard:master");
  ASSERT_TRUE(stored.ok() && stored->has_value());
  EXPECT_EQ((*stored)->envelope.find(*secret), std::string::npos);

  ASSERT_TRUE(keyring_->Rotate("secrets").ok());
  auto summary = store::RewrapSealedSecrets(store_, envelope);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->examined, 1);
  EXPECT_EQ(summary->rewrapped, 1);
  auto header = Envelope::Inspect((*store_.GetSealedSecret("guard:master"))->envelope);
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->key_version, 2);
  KR_ASSERT_OK(keyring_->SetMinDecryptionVersion("secrets", 2));
  auto after =
      store::LoadOrCreateSealedSecret(store_, envelope, "guard:master", "secrets", generate);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(*after, *secret);
  EXPECT_EQ(store::RewrapSealedSecrets(store_, envelope)->rewrapped, 0);
}

}  // namespace
}  // namespace rampart::crypto
