#include "store/sqlite_connection.h"

namespace rampart::store::internal {

Status SqliteError(int code, std::string_view what, std::string_view message) {
  switch (code & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Unavailable("{}: the store is locked by another writer ({})", what, message);
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_CANTOPEN:
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
    case SQLITE_READONLY:
    case SQLITE_PERM: return Unavailable("{}: {}", what, message);
    case SQLITE_CONSTRAINT: return FailedPrecondition("{}: {}", what, message);
    default: return Internal("{}: {}", what, message);
  }
}

Statement::~Statement() {
  sqlite3_reset(statement_);
  sqlite3_clear_bindings(statement_);
}

Statement& Statement::Bind(int index, std::string_view text) {
  // SQLITE_TRANSIENT: SQLite copies the text, so the caller's buffer may go before the step.
  sqlite3_bind_text(statement_, index, text.data(), static_cast<int>(text.size()),
                    SQLITE_TRANSIENT);
  return *this;
}

Statement& Statement::BindBorrowed(int index, std::string_view text) {
  sqlite3_bind_text(statement_, index, text.data(), static_cast<int>(text.size()), SQLITE_STATIC);
  return *this;
}

Statement& Statement::BindBlobBorrowed(int index, std::string_view bytes) {
  sqlite3_bind_blob(statement_, index, bytes.data(), static_cast<int>(bytes.size()), SQLITE_STATIC);
  return *this;
}

void Statement::Reset() { sqlite3_reset(statement_); }

Statement& Statement::Bind(int index, int64_t value) {
  sqlite3_bind_int64(statement_, index, value);
  return *this;
}

Result<bool> Statement::Step() {
  last_result_ = sqlite3_step(statement_);
  if (last_result_ == SQLITE_ROW) return true;
  if (last_result_ == SQLITE_DONE) return false;
  last_result_ = sqlite3_extended_errcode(db_);
  return SqliteError(last_result_, "store query failed", sqlite3_errmsg(db_));
}

Status Statement::Run() {
  while (true) {
    ASSIGN_OR_RETURN(const bool row, Step());
    if (!row) return Status::Ok();
  }
}

int64_t Statement::Int(int column) const { return sqlite3_column_int64(statement_, column); }

std::string Statement::Text(int column) const {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(statement_, column));
  if (text == nullptr) return {};
  return std::string(text, static_cast<size_t>(sqlite3_column_bytes(statement_, column)));
}

int Statement::columns() const { return sqlite3_column_count(statement_); }
std::string_view Statement::Bytes(int column) const {
  const void* bytes = sqlite3_column_blob(statement_, column);
  if (bytes == nullptr) return {};
  return std::string_view(static_cast<const char*>(bytes),
                          static_cast<size_t>(sqlite3_column_bytes(statement_, column)));
}

Result<std::unique_ptr<SqliteConnection>> SqliteConnection::Open(const std::string& path,
                                                                 int busy_timeout_ms) {
  sqlite3* db = nullptr;
  const int opened = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (opened != SQLITE_OK) {
    const std::string reason = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(opened);
    sqlite3_close(db);
    return Unavailable("{}", reason);
  }
  std::unique_ptr<SqliteConnection> connection(new SqliteConnection(db));
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, busy_timeout_ms);
  // journal_mode answers the mode in force: anything but "wal" (a read-only medium, a VFS
  // without shared memory) would silently lose the one-writer-many-readers guarantee.
  ASSIGN_OR_RETURN(auto journal, connection->Prepare("PRAGMA journal_mode=WAL"));
  ASSIGN_OR_RETURN(const bool row, journal->Step());
  if (!row || journal->Text(0) != "wal") {
    return Unavailable("SQLite refused WAL mode (journal mode '{}')", row ? journal->Text(0) : "");
  }
  journal.reset();
  // FULL: a commit is acknowledged after the WAL is fsync'ed, so it survives a power loss.
  RETURN_IF_ERROR(connection->Execute("PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON"));
  // A larger page cache (16 MiB rather than 2) and a checkpoint every 4000 WAL pages (16 MiB)
  // rather than 1000: the audit log's appends rewrite the same B-tree tail pages batch after
  // batch, and fewer checkpoints copy each of them to the database file fewer times. Neither
  // changes durability: commits still fsync the WAL.
  RETURN_IF_ERROR(connection->Execute("PRAGMA cache_size=-16384; PRAGMA wal_autocheckpoint=4000"));
  return connection;
}

SqliteConnection::~SqliteConnection() {
  for (auto& [sql, statement] : statements_) sqlite3_finalize(statement);
  sqlite3_close(db_);
}

Result<std::unique_ptr<Statement>> SqliteConnection::Prepare(std::string_view sql) {
  auto it = statements_.find(std::string(sql));
  if (it == statements_.end()) {
    sqlite3_stmt* statement = nullptr;
    const int prepared = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                                            SQLITE_PREPARE_PERSISTENT, &statement, nullptr);
    if (prepared != SQLITE_OK) {
      return SqliteError(sqlite3_extended_errcode(db_), "cannot prepare a store query",
                         sqlite3_errmsg(db_));
    }
    it = statements_.emplace(std::string(sql), statement).first;
  }
  return std::make_unique<Statement>(it->second, db_);
}

Status SqliteConnection::Execute(std::string_view sql) {
  const std::string text(sql);
  char* error = nullptr;
  const int result = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &error);
  if (result == SQLITE_OK) return Status::Ok();
  const std::string message = error != nullptr ? error : sqlite3_errstr(result);
  sqlite3_free(error);
  return SqliteError(sqlite3_extended_errcode(db_), "store statement failed", message);
}

int64_t SqliteConnection::Changes() const { return sqlite3_changes64(db_); }

}  // namespace rampart::store::internal
