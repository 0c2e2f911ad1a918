#pragma once

// One SQL text for both backends: statements written with SQLite's ?1, ?2, ... placeholders (and
// CAST(?n AS BIGINT) wherever a parameter is a number, which both dialects read alike), run on
// SQLite as they are and on PostgreSQL with $1, $2, ..., each prepared once per connection. The
// vector store tables (vector_store_tables.cc) are written once on top of it. Internal to
// src/store.
//
// Threads: a runner wraps one connection its owner holds (inside Store::WithSql).

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/status.h"

namespace rampart::store::internal {

class PgConnection;
class SqliteConnection;

struct SqlRows {
  std::vector<std::vector<std::string>> rows;  // every column as text
  int64_t affected = 0;                        // rows an INSERT/UPDATE/DELETE changed
};

class SqlRunner {
 public:
  using Value = std::variant<int64_t, std::string>;
  virtual ~SqlRunner() = default;
  // Errors as the backend maps them (store.h's).
  virtual Result<SqlRows> Run(std::string_view sql, const std::vector<Value>& parameters) = 0;
};

class SqliteRunner final : public SqlRunner {
 public:
  explicit SqliteRunner(SqliteConnection& connection) : connection_(connection) {}
  Result<SqlRows> Run(std::string_view sql, const std::vector<Value>& parameters) override;

 private:
  SqliteConnection& connection_;
};

class PgRunner final : public SqlRunner {
 public:
  explicit PgRunner(PgConnection& connection) : connection_(connection) {}
  Result<SqlRows> Run(std::string_view sql, const std::vector<Value>& parameters) override;

 private:
  PgConnection& connection_;
};

// A column's text as a number (0 for anything else).
int64_t ToInt(std::string_view text);

}  // namespace rampart::store::internal
