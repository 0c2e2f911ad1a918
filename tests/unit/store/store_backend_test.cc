// What only one backend has: SQLite's file (mode, WAL, bad files), PostgreSQL's connection
// strings (no password in any text) and its reconnects.

#include <sys/stat.h>

#include <fstream>

#include "store/store_fixture.h"

namespace rampart::store::testing {
namespace {

using SqliteStoreTest = StoreTest<SqliteBackend>;
using PostgresStoreTest = StoreTest<PostgresBackend>;

TEST_F(SqliteStoreTest, TheDatabaseIsAWalFileOnlyItsOwnerCanRead) {
  EXPECT_EQ(store_->Describe(), "sqlite:" + backend_.path());
  struct stat info {};
  ASSERT_EQ(stat(backend_.path().c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);  // it holds key hashes
  STORE_ASSERT_OK(store_->CreateTenant({.name = "acme"}));
  ASSERT_EQ(stat((backend_.path() + "-wal").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  // Bytes 18 and 19 of a SQLite file are its write and read versions: 2 in WAL mode.
  std::ifstream file(backend_.path(), std::ios::binary);
  char header[20] = {};
  file.read(header, sizeof(header));
  EXPECT_EQ(header[18], 2);
  EXPECT_EQ(header[19], 2);
}

TEST_F(SqliteStoreTest, AFileThatIsNotADatabaseIsUnavailableWithItsPath) {
  store_.reset();
  {
    std::ofstream garbage(backend_.path(), std::ios::binary | std::ios::trunc);
    garbage << std::string(4096, 'x');
  }
  auto opened = backend_.Open();
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(opened.status().message().find(backend_.path()), std::string::npos)
      << opened.status().ToString();
}

TEST_F(SqliteStoreTest, ADirectoryThatCannotBeMadeIsUnavailable) {
  auto opened = OpenSqliteStore(backend_.path() + "/below-a-file");
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kUnavailable) << opened.status().ToString();
}

TEST_F(PostgresStoreTest, NoPasswordAppearsInDescriptionsOrErrors) {
  EXPECT_TRUE(store_->Describe().starts_with("postgresql://rampart@127.0.0.1:"))
      << store_->Describe();
  // The test server trusts loopback, so a password is accepted and ignored.
  auto with_password = OpenPostgresStore(backend_.conninfo() + " password=hunter2");
  ASSERT_TRUE(with_password.ok()) << with_password.status().ToString();
  EXPECT_EQ((*with_password)->Describe().find("hunter2"), std::string::npos);

  auto refused = OpenPostgresStore("postgresql://rampart:hunter2@127.0.0.1:1/rampart");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(refused.status().message().find("hunter2"), std::string::npos)
      << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("postgresql://rampart@127.0.0.1:1/rampart"),
            std::string::npos)
      << refused.status().ToString();

  auto malformed = OpenPostgresStore("host=x password='hunter2");
  ASSERT_FALSE(malformed.ok());
  EXPECT_EQ(malformed.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(malformed.status().message().find("hunter2"), std::string::npos)
      << malformed.status().ToString();
}

TEST_F(PostgresStoreTest, LostConnectionsAreReplaced) {
  STORE_ASSERT_OK(store_->CreateTenant({.name = "acme"}));
  const auto terminate_all = [&] {
    // What a server restart or a failover does to the pool's connections.
    STORE_ASSERT_OK(
        backend_.Execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE datname = current_database() AND pid <> pg_backend_pid()"));
  };
  terminate_all();
  auto tenant = store_->GetTenant("acme");  // a read: retried on a fresh connection
  ASSERT_TRUE(tenant.ok()) << tenant.status().ToString();
  EXPECT_TRUE(tenant->has_value());
  terminate_all();
  STORE_EXPECT_OK(store_->CreateTenant({.name = "beta"}));  // a write: lost at BEGIN, replaced
  auto generation = store_->Generation();
  EXPECT_TRUE(generation.ok()) << generation.status().ToString();
}

}  // namespace
}  // namespace rampart::store::testing
