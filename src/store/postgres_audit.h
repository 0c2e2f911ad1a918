#pragma once

// The audit log's tables on PostgreSQL: what PostgresStore's audit methods run, on the
// connection it hands over (inside a transaction for writes). Internal to src/store.

#include <cstdint>
#include <optional>
#include <vector>

#include "core/status.h"
#include "store/postgres_connection.h"
#include "store/store.h"

namespace rampart::store::internal {

// Inside a write transaction. Two replicas appending the same sequence: the second blocks on the
// primary key until the first commits, then fails with a unique violation, answered here as
// AlreadyExists like any other taken sequence.
Status PgAppendAuditRows(PgConnection& connection, const std::vector<AuditRow>& rows);
Status PgAppendAuditBatch(PgConnection& connection, const AuditBatch& batch);
Status PgPutAuditCheckpoint(PgConnection& connection, const AuditCheckpointRow& checkpoint,
                            const std::optional<AuditEpochRow>& closes);
Status PgPruneAuditEpoch(PgConnection& connection, int64_t epoch);

Result<std::vector<AuditRow>> PgReadAuditRows(PgConnection& connection, int64_t after_sequence,
                                              int64_t limit);
Result<std::vector<AuditRow>> PgQueryAuditRows(PgConnection& connection, const AuditQuery& query);
Result<int64_t> PgLastAuditSequence(PgConnection& connection);
Result<std::vector<AuditCheckpointRow>> PgListAuditCheckpoints(PgConnection& connection,
                                                               int64_t from_size, bool last);
Result<std::vector<AuditEpochRow>> PgListAuditEpochs(PgConnection& connection);

}  // namespace rampart::store::internal
