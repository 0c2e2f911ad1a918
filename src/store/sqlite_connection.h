#pragma once

// A thin RAII layer over one SQLite connection: opening with Rampart's settings, a cache of
// prepared statements, and SQLite's result codes mapped to Status. Internal to src/store; the
// only place besides sqlite_store.cc that includes sqlite3.h.
//
// Threads: a connection is not synchronised; its owner serialises every use (SqliteStore holds a
// mutex per connection). A Statement borrows its connection's cached statement until it goes.

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/status.h"

namespace rampart::store::internal {

// Maps a SQLite result code to a Status: BUSY/LOCKED (another writer held the lock past the
// busy timeout), I/O, full-disk and not-a-database errors are Unavailable; constraint
// violations FailedPrecondition (callers map the ones they expect first); the rest Internal.
Status SqliteError(int code, std::string_view what, std::string_view message);

class Statement {
 public:
  Statement(sqlite3_stmt* statement, sqlite3* db) : statement_(statement), db_(db) {}
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();  // resets the statement and clears its bindings for the next user

  // Parameters are numbered from 1, as in the SQL's ?1, ?2, ...
  Statement& Bind(int index, std::string_view text);
  Statement& Bind(int index, int64_t value);
  // As Bind(text) without SQLite copying the text: `text` must stay valid and unchanged until
  // the statement is stepped to its end and Reset (or destroyed). For hot inserts.
  Statement& BindBorrowed(int index, std::string_view text);
  // As BindBorrowed, as a BLOB (bytes, not text: SQLite never reads them as UTF-8).
  Statement& BindBlobBorrowed(int index, std::string_view bytes);
  // Makes the statement ready to run again (its bindings are kept until bound anew).
  void Reset();

  // Advances: true with a row to read, false when done. The error's code is SQLite's mapped by
  // SqliteError; `last_result()` holds the raw extended code (e.g. to tell a unique violation).
  Result<bool> Step();
  // Steps to the end (statements without rows).
  Status Run();
  int last_result() const { return last_result_; }

  // Columns of the current row, from 0.
  int64_t Int(int column) const;
  std::string Text(int column) const;
  int columns() const;
  // A BLOB (or text) column's bytes, valid until the next Step or Reset.
  std::string_view Bytes(int column) const;

 private:
  sqlite3_stmt* statement_;
  sqlite3* db_;
  int last_result_ = SQLITE_OK;
};

class SqliteConnection {
 public:
  // Opens (creating if needed) the database at `path` in WAL mode with synchronous=FULL, foreign
  // keys on and a busy timeout of `busy_timeout_ms`. Errors: Unavailable with SQLite's reason.
  static Result<std::unique_ptr<SqliteConnection>> Open(const std::string& path,
                                                        int busy_timeout_ms);
  ~SqliteConnection();
  SqliteConnection(const SqliteConnection&) = delete;
  SqliteConnection& operator=(const SqliteConnection&) = delete;

  // The cached prepared statement for `sql` (prepared on first use), ready to bind.
  Result<std::unique_ptr<Statement>> Prepare(std::string_view sql);
  // Runs one or more statements without parameters (migrations, BEGIN, COMMIT).
  Status Execute(std::string_view sql);
  // Rows changed by the last INSERT, UPDATE or DELETE.
  int64_t Changes() const;

 private:
  explicit SqliteConnection(sqlite3* db) : db_(db) {}

  sqlite3* db_;
  std::unordered_map<std::string, sqlite3_stmt*> statements_;
};

// Runs `body` between BEGIN IMMEDIATE and COMMIT (taking the write lock at the start, so the
// busy timeout applies and a transaction never fails to upgrade a read lock); rolls back when
// `body` or the commit fails.
template <typename Body>
Status InTransaction(SqliteConnection& connection, Body&& body) {
  RETURN_IF_ERROR(connection.Execute("BEGIN IMMEDIATE"));
  Status status = body();
  if (status.ok()) status = connection.Execute("COMMIT");
  if (!status.ok()) (void)connection.Execute("ROLLBACK");
  return status;
}

}  // namespace rampart::store::internal
