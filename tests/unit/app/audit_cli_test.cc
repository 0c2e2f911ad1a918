// `rampart audit ...` on a real SQLite data directory: verify (sound, then a tampered record
// named), prove and check-proof round trip, export as JSON lines, and bad arguments.

#include "app/audit_cli.h"

#include <sqlite3.h>
#include <stdlib.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "audit/audit_log.h"
#include "store/store.h"

namespace rampart::app {
namespace {

class AuditCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/rampart-audit-cli-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    auto key = crypto::SigningKey::Generate(crypto::SignatureAlgorithm::kSm2Sm3);
    ASSERT_TRUE(key.ok());
    std::ofstream(dir_ + "/audit.pub.pem") << key->Public().PublicPem();
    auto store = store::OpenSqliteStore(dir_ + "/data");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    audit::AuditOptions options;
    options.sync = true;
    auto log = audit::AuditLog::Open(**store, options, *key, "cli-test");
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    for (int i = 1; i <= 12; ++i) {
      audit::AuditRecord record;
      record.time_unix_ns = int64_t{1'800'000'000 + i} * 1'000'000'000;
      record.tenant = "acme";
      record.principal = "alice";
      record.request_id = "r" + std::to_string(i);
      (*log)->Append(std::move(record), [](Status) {});
    }
    ASSERT_TRUE((*log)->Flush(/*checkpoint=*/true).ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs `rampart audit <args>`, returning the exit status; standard output in `out`.
  int Run(std::vector<std::string> args, std::string* out = nullptr) {
    CLI::App app("rampart");
    AuditCli cli;
    cli.AddTo(app);
    args.insert(args.begin(), {"rampart", "audit"});
    std::vector<const char*> argv;
    for (const std::string& arg : args) argv.push_back(arg.c_str());
    try {
      app.parse(int(argv.size()), argv.data());
    } catch (const CLI::ParseError& error) {
      return app.exit(error) == 0 ? 0 : 2;
    }
    ::testing::internal::CaptureStdout();
    const std::optional<int> status = cli.RunIfChosen();
    const std::string output = ::testing::internal::GetCapturedStdout();
    if (out != nullptr) *out = output;
    return status.value_or(-1);
  }

  std::string dir_;
};

TEST_F(AuditCliTest, VerifyProveCheckAndExport) {
  const std::string key = dir_ + "/audit.pub.pem";
  std::string out;
  EXPECT_EQ(Run({"verify", "--data-dir", dir_ + "/data", "--public-key", key}, &out), 0);
  EXPECT_NE(out.find("audit log sound: 12 records"), std::string::npos) << out;

  ASSERT_EQ(Run({"prove", "5", "--data-dir", dir_ + "/data"}, &out), 0);
  std::ofstream(dir_ + "/proof.json") << out;
  EXPECT_EQ(Run({"check-proof", dir_ + "/proof.json", "--public-key", key}, &out), 0);
  EXPECT_NE(out.find("record 5 is in the signed tree of size 12"), std::string::npos) << out;

  ASSERT_EQ(
      Run({"export", "--data-dir", dir_ + "/data", "--from", "1800000003", "--to", "1800000006"},
          &out),
      0);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 3) << out;
  EXPECT_EQ(out.find("{\"action\":"), 0u) << out;

  // A deletion made in the file (the batch holding record 9) is found, with exit status 1.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ + "/data/rampart.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(
      sqlite3_exec(db, "DELETE FROM audit_batches WHERE first_sequence <= 9 AND last_sequence >= 9",
                   nullptr, nullptr, nullptr),
      SQLITE_OK);
  sqlite3_close(db);
  EXPECT_EQ(Run({"verify", "--data-dir", dir_ + "/data", "--public-key", key}), 1);
}

TEST_F(AuditCliTest, TheDigestComesFromTheConfigUnlessGiven) {
  const std::string key = dir_ + "/audit.pub.pem";
  std::ofstream(dir_ + "/sm3.yaml") << "audit:\n  digest: sm3\n";
  std::ofstream(dir_ + "/sha256.yaml") << "audit:\n  digest: sha256\n";
  // The log was written with SHA-256: read as SM3, no leaf matches.
  EXPECT_EQ(Run({"verify", "--config", dir_ + "/sm3.yaml", "--data-dir", dir_ + "/data",
                 "--public-key", key}),
            1);
  EXPECT_EQ(Run({"verify", "--config", dir_ + "/sha256.yaml", "--data-dir", dir_ + "/data",
                 "--public-key", key}),
            0);
  EXPECT_EQ(Run({"verify", "--config", dir_ + "/sm3.yaml", "--digest", "sha256", "--data-dir",
                 dir_ + "/data", "--public-key", key}),
            0);
}

TEST_F(AuditCliTest, VerifyFindsTheServersKeyFileInTheDataDirectory) {
  // As the server writes it: every version of the signing key in one file (an older one first).
  auto older = crypto::SigningKey::Generate(crypto::SignatureAlgorithm::kEd25519);
  ASSERT_TRUE(older.ok());
  std::ifstream current(dir_ + "/audit.pub.pem");
  std::stringstream current_pem;
  current_pem << current.rdbuf();
  std::ofstream(dir_ + "/data/audit-signing-key.pem")
      << older->Public().PublicPem() << current_pem.str();
  std::string out;
  EXPECT_EQ(Run({"verify", "--data-dir", dir_ + "/data"}, &out), 0);
  EXPECT_NE(out.find("audit log sound"), std::string::npos) << out;
  ASSERT_EQ(Run({"prove", "5", "--data-dir", dir_ + "/data"}, &out), 0);
  std::ofstream(dir_ + "/proof.json") << out;
  EXPECT_EQ(Run({"check-proof", dir_ + "/proof.json", "--data-dir", dir_ + "/data"}), 0);
  // Only the older key: the checkpoints do not verify.
  std::ofstream(dir_ + "/data/audit-signing-key.pem") << older->Public().PublicPem();
  EXPECT_EQ(Run({"verify", "--data-dir", dir_ + "/data"}), 1);
}

TEST_F(AuditCliTest, BadArgumentsAreRefused) {
  EXPECT_EQ(Run({"verify", "--data-dir", dir_ + "/data"}), 2);  // no key
  EXPECT_EQ(Run({"verify", "--data-dir", dir_ + "/data", "--public-key", dir_ + "/none"}), 2);
  std::ofstream(dir_ + "/garbage.pem") << "not a key";
  EXPECT_EQ(Run({"verify", "--data-dir", dir_ + "/data", "--public-key", dir_ + "/garbage.pem"}),
            2);
  EXPECT_EQ(Run({"export", "--data-dir", dir_ + "/data", "--from", "yesterday"}), 2);
  EXPECT_EQ(Run({"prove", "99", "--data-dir", dir_ + "/data"}), 1);
  EXPECT_EQ(Run({"verify", "--digest", "md5", "--data-dir", dir_ + "/data", "--public-key",
                 dir_ + "/audit.pub.pem"}),
            2);
}

}  // namespace
}  // namespace rampart::app
