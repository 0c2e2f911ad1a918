#include "store/sqlite_audit.h"

#include <limits>

#include <fmt/format.h>

#include "store/audit_batches.h"
#include "store/audit_rows.h"
#include "store/row_readers.h"

namespace rampart::store::internal {
namespace {

// The last sequence the log has had: its last record's (in a batch, or in a row of migration
// 3), or, when every record was pruned, the last pruned epoch's end.
constexpr std::string_view kLastSequence =
    "SELECT MAX(COALESCE((SELECT MAX(sequence) FROM audit_records), 0), "
    "COALESCE((SELECT last_sequence FROM audit_batches ORDER BY first_sequence DESC LIMIT 1), 0), "
    "COALESCE((SELECT MAX(last_sequence) FROM audit_epochs WHERE pruned = 1), 0))";
// The batches holding records after ?1: from the one holding ?1 + 1 (the last starting at or
// before it) on, by sequence.
#define RAMPART_BATCHES_AFTER                                                                   \
  "SELECT first_sequence, records FROM audit_batches WHERE first_sequence >= COALESCE((SELECT " \
  "MAX(first_sequence) FROM audit_batches WHERE first_sequence <= ?1), 0)"
constexpr std::string_view kBatchesAfterWhere = RAMPART_BATCHES_AFTER;
constexpr std::string_view kBatchesAfter = RAMPART_BATCHES_AFTER " ORDER BY first_sequence";
#undef RAMPART_BATCHES_AFTER

// Unpacks batches from `batches` (first_sequence, records) until `limit` records after
// `after_sequence` matching `query` (when given) are read.
Result<std::vector<AuditRow>> ReadBatches(Statement& batches, int64_t after_sequence, int64_t limit,
                                          const AuditQuery* query) {
  std::vector<AuditRow> rows;
  std::vector<AuditRow> unpacked;
  while (static_cast<int64_t>(rows.size()) < limit) {
    ASSIGN_OR_RETURN(const bool row, batches.Step());
    if (!row) break;
    unpacked.clear();
    UnpackAuditBatch(batches.Int(0), batches.Bytes(1), after_sequence, unpacked,
                     query == nullptr ? limit - static_cast<int64_t>(rows.size()) : INT64_MAX);
    for (AuditRow& record : unpacked) {
      if (static_cast<int64_t>(rows.size()) >= limit) break;
      if (query == nullptr || MatchesAuditQuery(record, *query)) rows.push_back(std::move(record));
    }
  }
  return rows;
}

// The shared row readers (store/row_readers.h) for SQLite's rows.
constexpr auto* ReadRow = &internal::ReadAuditRow<Statement>;
constexpr auto* ReadCheckpoint = &internal::ReadAuditCheckpoint<Statement>;

template <typename T, typename Read>
Result<std::vector<T>> Collect(Statement& statement, Read read) {
  std::vector<T> rows;
  while (true) {
    ASSIGN_OR_RETURN(const bool row, statement.Step());
    if (!row) return rows;
    rows.push_back(read(statement));
  }
}

// Writes `batch` as one audit_batches row; the blob outlives the step, so it is bound without
// SQLite copying it.
Status InsertAuditBatch(SqliteConnection& connection, const AuditBatch& batch) {
  ASSIGN_OR_RETURN(auto insert, connection.Prepare(fmt::format(
                                    "INSERT INTO audit_batches ({}) VALUES (?1, ?2, ?3, ?4, ?5)",
                                    kAuditBatchColumns)));
  return insert->Bind(1, batch.first_sequence)
      .Bind(2, batch.last_sequence)
      .Bind(3, batch.min_time_unix_ns)
      .Bind(4, batch.max_time_unix_ns)
      .BindBlobBorrowed(5, batch.records)
      .Run();
}

}  // namespace

Result<int64_t> SqliteLastAuditSequence(SqliteConnection& connection) {
  ASSIGN_OR_RETURN(auto last, connection.Prepare(kLastSequence));
  ASSIGN_OR_RETURN(const bool row, last->Step());
  return row ? last->Int(0) : 0;
}

Status SqliteAppendAuditBatch(SqliteConnection& connection, const AuditBatch& batch) {
  RETURN_IF_ERROR(ValidateAuditBatch(batch));
  // The write lock is held (BEGIN IMMEDIATE): no other writer can move the head meanwhile.
  ASSIGN_OR_RETURN(const int64_t last, SqliteLastAuditSequence(connection));
  if (batch.first_sequence != last + 1) {
    return AlreadyExists("audit sequence {} is taken or out of order: the log's last is {}",
                         batch.first_sequence, last);
  }
  RETURN_IF_ERROR(InsertAuditBatch(connection, batch));
  if (!batch.checkpoint.has_value()) return Status::Ok();
  return SqlitePutAuditCheckpoint(connection, *batch.checkpoint, batch.closes);
}

Status SqliteAppendAuditRows(SqliteConnection& connection, const std::vector<AuditRow>& rows) {
  RETURN_IF_ERROR(ValidateAuditRows(rows));
  ASSIGN_OR_RETURN(const AuditBatch batch, PackAuditBatch(rows.data(), rows.size()));
  return SqliteAppendAuditBatch(connection, batch);
}

Status SqlitePutAuditCheckpoint(SqliteConnection& connection, const AuditCheckpointRow& checkpoint,
                                const std::optional<AuditEpochRow>& closes) {
  ASSIGN_OR_RETURN(auto insert, connection.Prepare(fmt::format(
                                    "INSERT INTO audit_checkpoints ({}) VALUES (?1, ?2, ?3, ?4, "
                                    "?5, ?6, ?7, ?8) ON CONFLICT (tree_size) DO NOTHING",
                                    kAuditCheckpointColumns)));
  RETURN_IF_ERROR(insert->Bind(1, checkpoint.tree_size)
                      .Bind(2, checkpoint.root_hash)
                      .Bind(3, checkpoint.time_unix_ns)
                      .Bind(4, checkpoint.key_id)
                      .Bind(5, checkpoint.algorithm)
                      .Bind(6, checkpoint.signature)
                      .Bind(7, checkpoint.frontier)
                      .Bind(8, checkpoint.chain_hash)
                      .Run());
  if (!closes.has_value()) return Status::Ok();
  ASSIGN_OR_RETURN(auto epoch, connection.Prepare(fmt::format(
                                   "INSERT INTO audit_epochs ({}) VALUES (?1, ?2, ?3, ?4, ?5, 0) "
                                   "ON CONFLICT (epoch) DO NOTHING",
                                   kAuditEpochColumns)));
  return epoch->Bind(1, closes->epoch)
      .Bind(2, closes->first_sequence)
      .Bind(3, closes->last_sequence)
      .Bind(4, closes->start_unix_ns)
      .Bind(5, closes->end_unix_ns)
      .Run();
}

Status SqlitePruneAuditEpoch(SqliteConnection& connection, int64_t epoch) {
  ASSIGN_OR_RETURN(auto find,
                   connection.Prepare("SELECT first_sequence, last_sequence, pruned, (SELECT "
                                      "COUNT(*) FROM audit_epochs WHERE epoch < ?1 AND pruned = 0) "
                                      "FROM audit_epochs WHERE epoch = ?1"));
  find->Bind(1, epoch);
  ASSIGN_OR_RETURN(const bool found, find->Step());
  if (!found) return NotFound("audit epoch {} does not exist", epoch);
  const int64_t first = find->Int(0);
  const int64_t last = find->Int(1);
  const bool pruned = find->Int(2) != 0;
  const int64_t earlier_kept = find->Int(3);
  find.reset();
  if (pruned) return Status::Ok();
  if (earlier_kept > 0) {
    return FailedPrecondition("audit epoch {}: earlier epochs must be pruned first", epoch);
  }
  ASSIGN_OR_RETURN(auto erase, connection.Prepare("DELETE FROM audit_records WHERE sequence >= ?1 "
                                                  "AND sequence <= ?2"));
  RETURN_IF_ERROR(erase->Bind(1, first).Bind(2, last).Run());
  // Batches wholly inside the epoch go; one that runs past its end (a checkpoint inside a batch,
  // which the log's writer never makes, but another writer could) is packed again without the
  // epoch's records, so that the records kept are still exactly those after `last`.
  ASSIGN_OR_RETURN(auto straddling, connection.Prepare("SELECT first_sequence, records FROM "
                                                       "audit_batches WHERE first_sequence <= ?1 "
                                                       "AND last_sequence > ?1"));
  straddling->Bind(1, last);
  std::vector<AuditRow> kept;
  ASSIGN_OR_RETURN(const bool straddles, straddling->Step());
  if (straddles) UnpackAuditBatch(straddling->Int(0), straddling->Bytes(1), last, kept);
  straddling.reset();
  ASSIGN_OR_RETURN(auto erase_batches, connection.Prepare("DELETE FROM audit_batches WHERE "
                                                          "first_sequence <= ?1"));
  RETURN_IF_ERROR(erase_batches->Bind(1, last).Run());
  if (!kept.empty()) {
    ASSIGN_OR_RETURN(const AuditBatch batch, PackAuditBatch(kept.data(), kept.size()));
    RETURN_IF_ERROR(InsertAuditBatch(connection, batch));
  }
  ASSIGN_OR_RETURN(auto mark, connection.Prepare("UPDATE audit_epochs SET pruned = 1 "
                                                 "WHERE epoch = ?1"));
  return mark->Bind(1, epoch).Run();
}

Result<std::vector<AuditRow>> SqliteReadAuditRows(SqliteConnection& connection,
                                                  int64_t after_sequence, int64_t limit) {
  ASSIGN_OR_RETURN(
      auto read, connection.Prepare(fmt::format("SELECT {} FROM audit_records WHERE sequence > ?1 "
                                                "ORDER BY sequence LIMIT ?2",
                                                kAuditRowColumns)));
  read->Bind(1, after_sequence).Bind(2, limit);
  ASSIGN_OR_RETURN(std::vector<AuditRow> older, Collect<AuditRow>(*read, ReadRow));
  read.reset();
  ASSIGN_OR_RETURN(auto batches, connection.Prepare(kBatchesAfter));
  batches->Bind(1, after_sequence);
  ASSIGN_OR_RETURN(std::vector<AuditRow> batched,
                   ReadBatches(*batches, after_sequence, limit, nullptr));
  return MergeAuditRows(std::move(older), std::move(batched), limit);
}

Result<std::vector<AuditRow>> SqliteQueryAuditRows(SqliteConnection& connection,
                                                   const AuditQuery& query) {
  RETURN_IF_ERROR(ValidateAuditQuery(query));
  const AuditQueryShape shape = ShapeAuditQuery(query);
  const std::string sql =
      AuditQuerySql(shape.mask, [](int n, bool) { return fmt::format("?{}", n); });
  ASSIGN_OR_RETURN(auto read, connection.Prepare(sql));
  read->Bind(1, query.after_sequence);
  int index = 2;
  const auto numeric = [&](int bit) { return bit < 2; };
  int bit = 0;
  for (const std::string& parameter : shape.parameters) {
    while ((shape.mask & (1 << bit)) == 0) ++bit;
    if (numeric(bit)) {
      read->Bind(index++, bit == 0 ? query.from_unix_ns : query.to_unix_ns);
    } else {
      read->Bind(index++, parameter);
    }
    ++bit;
  }
  read->Bind(index, query.limit);
  ASSIGN_OR_RETURN(std::vector<AuditRow> older, Collect<AuditRow>(*read, ReadRow));
  read.reset();
  // Batches: their time range narrows the rows read; the other filters apply to the records.
  ASSIGN_OR_RETURN(auto batches, connection.Prepare(fmt::format(
                                     "{} AND max_time_unix_ns >= ?2 AND min_time_unix_ns < ?3 "
                                     "ORDER BY first_sequence",
                                     kBatchesAfterWhere)));
  batches->Bind(1, query.after_sequence)
      .Bind(2, query.from_unix_ns)
      .Bind(3, query.to_unix_ns != 0 ? query.to_unix_ns : std::numeric_limits<int64_t>::max());
  ASSIGN_OR_RETURN(std::vector<AuditRow> batched,
                   ReadBatches(*batches, query.after_sequence, query.limit, &query));
  return MergeAuditRows(std::move(older), std::move(batched), query.limit);
}

Result<std::vector<AuditCheckpointRow>> SqliteListAuditCheckpoints(SqliteConnection& connection,
                                                                   int64_t from_size, bool last) {
  ASSIGN_OR_RETURN(
      auto read,
      connection.Prepare(last ? fmt::format("SELECT {} FROM audit_checkpoints ORDER BY tree_size "
                                            "DESC LIMIT 1",
                                            kAuditCheckpointColumns)
                              : fmt::format("SELECT {} FROM audit_checkpoints WHERE tree_size >= "
                                            "?1 ORDER BY tree_size",
                                            kAuditCheckpointColumns)));
  if (!last) read->Bind(1, from_size);
  return Collect<AuditCheckpointRow>(*read, ReadCheckpoint);
}

Result<std::vector<AuditEpochRow>> SqliteListAuditEpochs(SqliteConnection& connection) {
  ASSIGN_OR_RETURN(auto read,
                   connection.Prepare(fmt::format("SELECT {} FROM audit_epochs ORDER BY epoch",
                                                  kAuditEpochColumns)));
  return Collect<AuditEpochRow>(*read, [](const Statement& row) {
    AuditEpochRow epoch;
    epoch.epoch = row.Int(0);
    epoch.first_sequence = row.Int(1);
    epoch.last_sequence = row.Int(2);
    epoch.start_unix_ns = row.Int(3);
    epoch.end_unix_ns = row.Int(4);
    epoch.pruned = row.Int(5) != 0;
    return epoch;
  });
}

}  // namespace rampart::store::internal
