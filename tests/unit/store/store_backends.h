#pragma once

// The two backends the store tests run against, behind one shape so that the suite is typed:
//   Open()              a Store on this test's database (call it again for a second process's
//                       view of the same database: a reopen, or another replica)
//   Execute(sql)        SQL run directly on the database, as another build or an operator would
//   QueryText(sql)      the first column of the first row of `sql`
// SQLite uses a fresh temporary directory per test; PostgreSQL a fresh database on the binary's
// shared server (testing/postgres_server.h).

#include <sqlite3.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include "core/status.h"
#include "store/store.h"
#include "testing/postgres_server.h"

namespace rampart::store::testing {

class SqliteBackend {
 public:
  static constexpr bool kShared = false;  // one host's file, not a server replicas share

  Status SetUp() {
    char pattern[] = "/tmp/rampart-store-XXXXXX";
    if (mkdtemp(pattern) == nullptr) return Internal("mkdtemp failed");
    root_ = pattern;
    dir_ = root_ + "/data";  // not there yet: opening creates it
    return Status::Ok();
  }
  ~SqliteBackend() {
    std::error_code ignored;
    if (!root_.empty()) std::filesystem::remove_all(root_, ignored);
  }

  Result<std::unique_ptr<Store>> Open() const { return OpenSqliteStore(dir_); }
  const std::string& dir() const { return dir_; }
  std::string path() const { return dir_ + "/rampart.db"; }

  Status Execute(const std::string& sql) const {
    return WithDatabase([&](sqlite3* db) -> Status {
      char* error = nullptr;
      if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
        Status status = Internal("'{}' failed: {}", sql, error != nullptr ? error : "");
        sqlite3_free(error);
        return status;
      }
      return Status::Ok();
    });
  }

  Result<std::string> QueryText(const std::string& sql) const {
    std::string text;
    RETURN_IF_ERROR(WithDatabase([&](sqlite3* db) -> Status {
      sqlite3_stmt* statement = nullptr;
      if (sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr) != SQLITE_OK) {
        return Internal("'{}': {}", sql, sqlite3_errmsg(db));
      }
      const bool row = sqlite3_step(statement) == SQLITE_ROW;
      if (row) text = reinterpret_cast<const char*>(sqlite3_column_text(statement, 0));
      sqlite3_finalize(statement);
      return row ? Status::Ok() : Internal("'{}' answered no row", sql);
    }));
    return text;
  }

 private:
  template <typename Body>
  Status WithDatabase(Body body) const {
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(path().c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
      sqlite3_close(db);
      return Internal("cannot open {}", path());
    }
    sqlite3_busy_timeout(db, 10000);
    Status status = body(db);
    sqlite3_close(db);
    return status;
  }

  std::string root_;
  std::string dir_;
};

class PostgresBackend {
 public:
  static constexpr bool kShared = true;

  Status SetUp() {
    ASSIGN_OR_RETURN(rampart::testing::PostgresServer * server,
                     rampart::testing::PostgresServer::Shared());
    ASSIGN_OR_RETURN(conninfo_, server->CreateDatabase());
    return Status::Ok();
  }

  Result<std::unique_ptr<Store>> Open() const { return OpenPostgresStore(conninfo_); }
  const std::string& conninfo() const { return conninfo_; }

  Status Execute(const std::string& sql) const {
    return rampart::testing::PostgresServer::Execute(conninfo_,
                                                     "SET search_path TO rampart; " + sql);
  }
  Result<std::string> QueryText(const std::string& sql) const {
    return rampart::testing::PostgresServer::QueryText(conninfo_,
                                                       "SET search_path TO rampart; " + sql);
  }

 private:
  std::string conninfo_;
};

}  // namespace rampart::store::testing
