#pragma once

// The store's schema: one list of migrations that both backends apply (SQLite and PostgreSQL
// accept the same SQL: TEXT, BIGINT, INTEGER, primary and foreign keys, indexes), so their
// schemas cannot drift. Internal to src/store.
//
// Rules for a new migration: append it (never edit one that has shipped), give it the next
// version, use only SQL both dialects accept (no AUTOINCREMENT, SERIAL, BOOLEAN, JSON types or
// dialect functions). A migration runs exactly once, inside the transaction that records its
// version in `schema_version`, so its statements need no IF NOT EXISTS.

#include <span>
#include <string_view>

namespace rampart::store::internal {

struct Migration {
  int version;                   // 1, 2, ... in order
  std::string_view description;  // recorded in schema_version
  std::string_view sql;          // one or more statements separated by ';'
};

// Creates the version table itself (both dialects; run before reading the version).
inline constexpr std::string_view kCreateSchemaVersionTable =
    "CREATE TABLE IF NOT EXISTS schema_version ("
    " version INTEGER NOT NULL PRIMARY KEY,"
    " description TEXT NOT NULL,"
    " applied_unix BIGINT NOT NULL)";

// Every migration, in version order.
std::span<const Migration> Migrations();

// The newest schema version this build knows (the last migration's).
int LatestSchemaVersion();

}  // namespace rampart::store::internal
