#include "app/audit_config.h"
#include "app/keyring_cli.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace rampart::app {
namespace {

std::string WriteTemp(const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("rampart_audit_" + std::to_string(getpid()) + "_" +
                     ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".yaml");
  std::ofstream(path) << text;
  return path.string();
}

TEST(AuditConfig, ReadsEveryKey) {
  const std::string path = WriteTemp(R"(
keyring: {master_key_file: /var/lib/rampart/master.key}
audit:
  enabled: true
  sync: true
  max_delay_ms: 5
  digest: sm3
  checkpoint_every_records: 500
  checkpoint_every_seconds: 30
  retention_days: 365
  signing_key: log-signer
  signing_algorithm: sm2-sm3
  envelope_key: sealed-content
  region: cn-north
)");
  Result<std::optional<AuditConfig>> audit = LoadAuditConfig(path);
  ASSERT_TRUE(audit.ok()) << audit.status().ToString();
  ASSERT_TRUE(audit->has_value());
  const AuditConfig& config = **audit;
  EXPECT_TRUE(config.enabled);
  EXPECT_TRUE(config.log.sync);
  EXPECT_EQ(config.log.max_delay, std::chrono::milliseconds(5));
  EXPECT_EQ(config.log.digest, crypto::DigestAlgorithm::kSm3);
  EXPECT_EQ(config.log.checkpoint_every_records, 500);
  EXPECT_EQ(config.log.checkpoint_every, std::chrono::seconds(30));
  EXPECT_EQ(config.log.retention, std::chrono::hours(24 * 365));
  EXPECT_EQ(config.signing_key, "log-signer");
  EXPECT_EQ(config.signing_algorithm, crypto::SignatureAlgorithm::kSm2Sm3);
  EXPECT_EQ(config.envelope_key, "sealed-content");
  EXPECT_EQ(config.region, "cn-north");

  Result<std::optional<KeyringConfig>> keyring = LoadKeyringConfig(path);
  ASSERT_TRUE(keyring.ok()) << keyring.status().ToString();
  ASSERT_TRUE(keyring->has_value());
  EXPECT_EQ((*keyring)->master_key_file, "/var/lib/rampart/master.key");
  EXPECT_TRUE((*keyring)->master_key_env.empty());
  std::filesystem::remove(path);
}

TEST(AuditConfig, DefaultsAreBatchedSha256Ed25519AndSixMonthsOfRetention) {
  const std::string path = WriteTemp("audit: {}\n");
  Result<std::optional<AuditConfig>> audit = LoadAuditConfig(path);
  ASSERT_TRUE(audit.ok() && audit->has_value());
  EXPECT_TRUE((*audit)->enabled);
  EXPECT_FALSE((*audit)->log.sync);
  EXPECT_EQ((*audit)->log.digest, crypto::DigestAlgorithm::kSha256);
  EXPECT_EQ((*audit)->signing_algorithm, crypto::SignatureAlgorithm::kEd25519);
  EXPECT_EQ((*audit)->log.retention, std::chrono::hours(24 * 180));
  Result<std::optional<KeyringConfig>> keyring = LoadKeyringConfig(path);
  ASSERT_TRUE(keyring.ok());
  EXPECT_FALSE(keyring->has_value());
  std::filesystem::remove(path);
}

TEST(AuditConfig, NoSectionMeansNoLog) {
  const std::string path = WriteTemp("server: {model_repository: /models}\n");
  Result<std::optional<AuditConfig>> audit = LoadAuditConfig(path);
  ASSERT_TRUE(audit.ok());
  EXPECT_FALSE(audit->has_value());
  std::filesystem::remove(path);
}

TEST(AuditConfig, ErrorsNameTheKey) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"audit: {digest: md5}", "'audit.digest': 'md5'"},
      {"audit: {signing_algorithm: rsa}", "'audit.signing_algorithm': 'rsa'"},
      {"audit: {retention_days: 0}", "'audit.retention_days' must be positive"},
      {"audit: {max_delay_ms: -1}", "'audit.max_delay_ms' must be positive"},
      {"audit: {sync: sometimes}", "'audit.sync' has the wrong type"},
      {"audit: {syncc: true}", "unknown key 'audit.syncc'"},
      {"audit: {region: ''}", "must not be empty"},
      {"audit: [1]", "'audit' must be a map"},
  };
  for (const auto& [text, expected] : cases) {
    const std::string path = WriteTemp(text + "\n");
    Result<std::optional<AuditConfig>> audit = LoadAuditConfig(path);
    ASSERT_FALSE(audit.ok()) << text;
    EXPECT_EQ(audit.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(audit.status().message().find(expected), std::string::npos)
        << text << ": " << audit.status().message();
    std::filesystem::remove(path);
  }
  for (const std::string text :
       {"keyring: {}", "keyring: {master_key_file: a, master_key_env: B}"}) {
    const std::string path = WriteTemp(text + "\n");
    Result<std::optional<KeyringConfig>> keyring = LoadKeyringConfig(path);
    ASSERT_FALSE(keyring.ok()) << text;
    EXPECT_NE(keyring.status().message().find("exactly one of"), std::string::npos)
        << keyring.status().message();
    std::filesystem::remove(path);
  }
  EXPECT_EQ(LoadAuditConfig("/nonexistent/rampart.yaml").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace rampart::app

namespace rampart::app {
namespace {

// The keyring CLI and the server find the master key the same way: the flag, then the config's
// keyring: section, then RAMPART_MASTER_KEY.
TEST(ResolveMasterKey, TakesTheFlagThenTheConfigThenTheEnvironment) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("rampart_master_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto write_key = [&](const std::string& name) {
    const std::string path = (dir / name).string();
    std::ofstream(path) << std::string(64, 'a');
    std::filesystem::permissions(
        path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    return path;
  };
  const std::string flag_file = write_key("flag.key");
  const std::string config_file = write_key("config.key");
  ::unsetenv("RAMPART_MASTER_KEY");
  ::unsetenv("RAMPART_TEST_MASTER_KEY");

  const KeyringConfig from_file{.master_key_file = config_file};
  auto master = ResolveMasterKey(flag_file, from_file);
  ASSERT_TRUE(master.ok()) << master.status().ToString();
  EXPECT_NE((*master)->Describe().find("flag.key"), std::string::npos);

  master = ResolveMasterKey("", from_file);
  ASSERT_TRUE(master.ok()) << master.status().ToString();
  EXPECT_NE((*master)->Describe().find("config.key"), std::string::npos);

  ::setenv("RAMPART_TEST_MASTER_KEY", std::string(64, 'b').c_str(), 1);
  master = ResolveMasterKey("", KeyringConfig{.master_key_env = "RAMPART_TEST_MASTER_KEY"});
  ASSERT_TRUE(master.ok()) << master.status().ToString();
  EXPECT_NE((*master)->Describe().find("RAMPART_TEST_MASTER_KEY"), std::string::npos);

  master = ResolveMasterKey("", std::nullopt);
  ASSERT_FALSE(master.ok());
  EXPECT_EQ(master.status().code(), StatusCode::kNotFound);
  EXPECT_NE(master.status().message().find("keyring: section"), std::string::npos);

  ::setenv("RAMPART_MASTER_KEY", std::string(64, 'c').c_str(), 1);
  master = ResolveMasterKey("", std::nullopt);
  ASSERT_TRUE(master.ok()) << master.status().ToString();
  ::unsetenv("RAMPART_MASTER_KEY");
  ::unsetenv("RAMPART_TEST_MASTER_KEY");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rampart::app
