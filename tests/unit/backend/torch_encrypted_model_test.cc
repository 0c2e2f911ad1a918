// Encrypted TorchScript models: model.pt.rpe (an envelope) is decrypted in memory and loaded from
// a stream; a wrong region, data class or keyring, a damaged file, or no master key at all each
// fail to load with an error that says so.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "backend/model_decryptor.h"
#include "backend/torch/torch_backend.h"
#include "crypto/digest.h"
#include "crypto/keyring.h"
#include "model/config.h"
#include "testing/memory_keyring_storage.h"

namespace rampart::backend {
namespace {

namespace fs = std::filesystem;

using MemoryKeyringStorage = rampart::testing::MemoryKeyringStorage;

class EncryptedModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("rampart_sealed_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(root_ / "1");
    keyring_ = MakeKeyring(storage_, 'a');
    other_keyring_ = MakeKeyring(other_storage_, 'b');
  }
  void TearDown() override { fs::remove_all(root_); }

  std::unique_ptr<crypto::Keyring> MakeKeyring(crypto::KeyringStorage& storage, char fill) {
    const fs::path key_file = root_ / (std::string("master-") + fill);
    std::ofstream(key_file) << std::string(64, fill);
    fs::permissions(key_file, fs::perms::owner_read | fs::perms::owner_write);
    auto master = crypto::MasterKeyFromFile(key_file.string());
    EXPECT_TRUE(master.ok()) << master.status().ToString();
    auto keyring = crypto::Keyring::Open(storage, std::move(*master));
    EXPECT_TRUE(keyring.ok()) << keyring.status().ToString();
    const Status ensured =
        (*keyring)->Ensure("models", crypto::KeyPurpose::kWrapping, "aes-256-gcm");
    EXPECT_TRUE(ensured.ok()) << ensured.ToString();
    return std::move(*keyring);
  }

  // Seals the identity fixture as <root>/1/model.pt.rpe for region `region`.
  void SealFixture(const std::string& region) {
    std::ifstream fixture(fs::path(RAMPART_FIXTURE_DIR) / "identity.pt", std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(fixture)),
                            std::istreambuf_iterator<char>());
    ASSERT_FALSE(bytes.empty());
    auto sealed = crypto::Envelope(*keyring_).Seal(
        "models", bytes, {.tenant = kModelTenant, .region = region, .data_class = "CONFIDENTIAL"});
    ASSERT_TRUE(sealed.ok()) << sealed.status().ToString();
    std::ofstream(root_ / "1" / "model.pt.rpe", std::ios::binary | std::ios::trunc) << *sealed;
  }

  Result<std::unique_ptr<ModelInstance>> Load(std::shared_ptr<const ModelDecryptor> decryptor) {
    auto parsed = model::ParseConfigText(
        "name: \"m\" backend: \"pytorch\" max_batch_size: 4 "
        "input [ { name: \"x\" data_type: TYPE_FP32 dims: [ 3 ] } ] "
        "output [ { name: \"y\" data_type: TYPE_FP32 dims: [ 3 ] } ]",
        "config.pbtxt");
    EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
    config_ = parsed->config;
    const Status valid = model::CompleteAndValidate(config_, "m", "config.pbtxt");
    EXPECT_TRUE(valid.ok()) << valid.ToString();
    InstanceSpec spec;
    spec.config = &config_;
    spec.version_directory = root_ / "1";
    spec.version = 1;
    return MakeTorchBackend(std::move(decryptor))->CreateInstance(spec);
  }

  std::shared_ptr<const ModelDecryptor> Decryptor(const crypto::Keyring& keyring,
                                                  std::string region,
                                                  std::string data_class = "CONFIDENTIAL") {
    return std::make_shared<const ModelDecryptor>(keyring, std::move(region),
                                                  std::move(data_class));
  }

  fs::path root_;
  MemoryKeyringStorage storage_, other_storage_;
  std::unique_ptr<crypto::Keyring> keyring_, other_keyring_;
  model::ModelConfig config_;
};

TEST_F(EncryptedModelTest, AnEncryptedModelLoadsAndRuns) {
  SealFixture("eu-west");
  ASSERT_FALSE(fs::exists(root_ / "1" / "model.pt"));
  auto instance = Load(Decryptor(*keyring_, "eu-west"));
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  (*instance)->PrepareThread();
  const std::string data(2 * 3 * sizeof(float), '\x3f');
  std::vector<tensor::Tensor> inputs = {{"x", tensor::DataType::kFp32, {2, 3}, data}};
  auto result = (*instance)->Execute(inputs);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->outputs.size(), 1u);
  EXPECT_EQ(result->outputs[0].data, data);
}

TEST_F(EncryptedModelTest, AWrongRegionDataClassOrKeyringIsAClearLoadError) {
  SealFixture("eu-west");
  for (const auto& decryptor :
       {Decryptor(*keyring_, "us-east"), Decryptor(*keyring_, "eu-west", "PUBLIC")}) {
    auto instance = Load(decryptor);
    ASSERT_FALSE(instance.ok());
    EXPECT_EQ(instance.status().code(), StatusCode::kInvalidArgument);
    const std::string& message = instance.status().message();
    EXPECT_NE(message.find("cannot load encrypted model file"), std::string::npos) << message;
    EXPECT_NE(message.find("model.pt.rpe"), std::string::npos) << message;
    EXPECT_NE(message.find("tenant, region or data class"), std::string::npos) << message;
  }
  auto other = Load(Decryptor(*other_keyring_, "eu-west"));
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("data key does not unwrap"), std::string::npos)
      << other.status().ToString();
}

TEST_F(EncryptedModelTest, WithoutAMasterKeyOrWithADamagedFileItFailsCleanly) {
  SealFixture("eu-west");
  auto no_key = Load(nullptr);
  ASSERT_FALSE(no_key.ok());
  EXPECT_EQ(no_key.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(no_key.status().message().find("no master key is configured"), std::string::npos)
      << no_key.status().ToString();

  const fs::path sealed = root_ / "1" / "model.pt.rpe";
  fs::resize_file(sealed, fs::file_size(sealed) / 2);
  auto damaged = Load(Decryptor(*keyring_, "eu-west"));
  ASSERT_FALSE(damaged.ok());
  EXPECT_NE(damaged.status().message().find("malformed envelope"), std::string::npos)
      << damaged.status().ToString();
}

}  // namespace
}  // namespace rampart::backend
