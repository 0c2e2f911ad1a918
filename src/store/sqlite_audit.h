#pragma once

// The audit log's tables on SQLite: what SqliteStore's audit methods run, on the connection it
// hands over (the writer inside a transaction for writes, the reader for reads). Internal to
// src/store.

#include <cstdint>
#include <optional>
#include <vector>

#include "core/status.h"
#include "store/sqlite_connection.h"
#include "store/store.h"

namespace rampart::store::internal {

// Inside a write transaction.
Status SqliteAppendAuditRows(SqliteConnection& connection, const std::vector<AuditRow>& rows);
Status SqliteAppendAuditBatch(SqliteConnection& connection, const AuditBatch& batch);
Status SqlitePutAuditCheckpoint(SqliteConnection& connection, const AuditCheckpointRow& checkpoint,
                                const std::optional<AuditEpochRow>& closes);
Status SqlitePruneAuditEpoch(SqliteConnection& connection, int64_t epoch);

Result<std::vector<AuditRow>> SqliteReadAuditRows(SqliteConnection& connection,
                                                  int64_t after_sequence, int64_t limit);
Result<std::vector<AuditRow>> SqliteQueryAuditRows(SqliteConnection& connection,
                                                   const AuditQuery& query);
Result<int64_t> SqliteLastAuditSequence(SqliteConnection& connection);
Result<std::vector<AuditCheckpointRow>> SqliteListAuditCheckpoints(SqliteConnection& connection,
                                                                   int64_t from_size, bool last);
Result<std::vector<AuditEpochRow>> SqliteListAuditEpochs(SqliteConnection& connection);

}  // namespace rampart::store::internal
