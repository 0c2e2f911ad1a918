#pragma once

// What both backends share for the audit log's tables: the checks on rows and queries, and the
// SQL text of a query for a set of filters. Internal to src/store.

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "store/store.h"

namespace rampart::store::internal {

inline constexpr int64_t kMaxAuditQueryLimit = 10000;

// InvalidArgument when `rows` is empty or its sequences are not consecutive from >= 1.
Status ValidateAuditRows(const std::vector<AuditRow>& rows);
// InvalidArgument for a limit outside 1..kMaxAuditQueryLimit or a negative bound.
Status ValidateAuditQuery(const AuditQuery& query);

// Which of a query's filters are set, as bits (time from, time to, tenant, principal, trace id),
// and the parameters to bind after the first (after_sequence) and before the last (limit), in
// that order.
struct AuditQueryShape {
  int mask = 0;
  std::vector<std::string> parameters;
};
AuditQueryShape ShapeAuditQuery(const AuditQuery& query);

// "SELECT <columns> FROM audit_records WHERE sequence > P1 [AND ...] ORDER BY sequence LIMIT Pn"
// with placeholders written by `placeholder(n)` (SQLite's ?n, PostgreSQL's $n::type).
template <typename Placeholder>
std::string AuditQuerySql(int mask, Placeholder placeholder);

// The columns every read of audit_records selects, in AuditRow's order.
inline constexpr const char* kAuditRowColumns =
    "sequence, time_unix_ns, tenant, principal, trace_id, request_id, action, record, leaf_hash, "
    "chain_hash";
inline constexpr const char* kAuditCheckpointColumns =
    "tree_size, root_hash, time_unix_ns, key_id, algorithm, signature, frontier, chain_hash";
inline constexpr const char* kAuditEpochColumns =
    "epoch, first_sequence, last_sequence, start_unix_ns, end_unix_ns, pruned";

// ---- template definitions

template <typename Placeholder>
std::string AuditQuerySql(int mask, Placeholder placeholder) {
  std::string sql = std::string("SELECT ") + kAuditRowColumns +
                    " FROM audit_records WHERE sequence > " + placeholder(1, true);
  int next = 2;
  const char* const kFilters[] = {" AND time_unix_ns >= ", " AND time_unix_ns < ",
                                  " AND tenant = ", " AND principal = ", " AND trace_id = "};
  for (int bit = 0; bit < 5; ++bit) {
    if ((mask & (1 << bit)) == 0) continue;
    sql += kFilters[bit];
    sql += placeholder(next++, bit < 2);
  }
  sql += " ORDER BY sequence LIMIT " + placeholder(next, true);
  return sql;
}

}  // namespace rampart::store::internal
