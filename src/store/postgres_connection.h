#pragma once

// libpq underneath the PostgreSQL store: connections with Rampart's session settings, prepared
// statements prepared once per connection, SQLSTATEs mapped to Status, and a small blocking pool.
// Internal to src/store; the only place besides postgres_store.cc that includes libpq-fe.h.

#include <libpq-fe.h>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "core/status.h"

namespace rampart::store::internal {

// A statement with a name unique in the process, prepared on each connection at its first use.
// Parameters are $1, $2, ... sent as text (cast in the SQL where the type matters).
struct PgQuery {
  const char* name;
  const char* sql;
};

// One result; Text/Int read row `row`, column `column` (from 0).
class PgResult {
 public:
  explicit PgResult(PGresult* result) : result_(result, &PQclear) {}
  int rows() const { return PQntuples(result_.get()); }
  int columns() const { return PQnfields(result_.get()); }
  std::string Text(int row, int column) const;
  int64_t Int(int row, int column) const;  // 0 for text that is not a number
  int64_t affected() const;                // rows an INSERT/UPDATE/DELETE changed

 private:
  std::unique_ptr<PGresult, decltype(&PQclear)> result_;
};

// One row of a result, as the row readers (store/row_readers.h) read it.
struct PgRow {
  const PgResult& result;
  int row;
  std::string Text(int column) const { return result.Text(row, column); }
  int64_t Int(int column) const { return result.Int(row, column); }
};

// The SQLSTATE of a failed statement, kept so callers can tell a unique violation (23505) or a
// foreign-key violation (23503) from other failures.
struct PgError {
  Status status;
  std::string sqlstate;
};

class PgConnection {
 public:
  // Connects and sets search_path to the `rampart` schema. Errors: Unavailable with libpq's
  // reason (which never holds the password).
  static Result<std::unique_ptr<PgConnection>> Connect(const std::string& conninfo);
  ~PgConnection();
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  // Runs `query` with `parameters` (prepared here on first use). On failure, `error` (if given)
  // receives the SQLSTATE.
  Result<PgResult> Run(const PgQuery& query, const std::vector<std::string>& parameters,
                       std::string* sqlstate = nullptr);
  // Runs statements without parameters (BEGIN, COMMIT, migrations).
  Result<PgResult> Execute(std::string_view sql, std::string* sqlstate = nullptr);
  // Whether the connection is lost (it is then dropped, not pooled).
  bool broken() const { return PQstatus(connection_) != CONNECTION_OK; }

 private:
  explicit PgConnection(PGconn* connection) : connection_(connection) {}
  Result<PgResult> Check(PGresult* result, std::string* sqlstate);

  PGconn* connection_;
  std::unordered_set<std::string> prepared_;
};

// Up to `size` connections, made on demand; Acquire blocks while all are in use.
// Thread-safe.
class PgPool {
 public:
  class Lease {
   public:
    Lease(PgPool* pool, std::unique_ptr<PgConnection> connection)
        : pool_(pool), connection_(std::move(connection)) {}
    Lease(Lease&&) = default;
    ~Lease() {
      if (connection_ != nullptr) pool_->Release(std::move(connection_));
    }
    PgConnection& operator*() { return *connection_; }
    PgConnection* operator->() { return connection_.get(); }

   private:
    PgPool* pool_;
    std::unique_ptr<PgConnection> connection_;
  };

  PgPool(std::string conninfo, size_t size) : conninfo_(std::move(conninfo)), size_(size) {}
  // An idle connection, or a new one; Unavailable when a new one cannot connect.
  Result<Lease> Acquire();
  // Closes the idle connections: called when one was found lost, since that usually means the
  // server restarted or failed over and the others are lost too.
  void DropIdle();

 private:
  void Release(std::unique_ptr<PgConnection> connection);

  const std::string conninfo_;
  const size_t size_;
  std::mutex mutex_;
  std::condition_variable released_;
  std::vector<std::unique_ptr<PgConnection>> idle_;  // guarded by mutex_
  size_t open_ = 0;                                  // idle or leased; guarded by mutex_
};

// "postgresql://user@host:port/dbname" from a connection string or URI: every part but the
// password, for logs; nullopt for a string libpq cannot parse.
std::optional<std::string> DescribeConninfo(const std::string& conninfo);

}  // namespace rampart::store::internal
