#include "store/postgres_audit.h"

#include <array>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "crypto/digest.h"
#include "store/audit_batches.h"
#include "store/audit_rows.h"
#include "store/row_readers.h"

namespace rampart::store::internal {
namespace {

constexpr std::string_view kUniqueViolation = "23505";

#define RAMPART_AUDIT_ROW_COLUMNS                                                                \
  "sequence, time_unix_ns, tenant, principal, trace_id, request_id, action, record, leaf_hash, " \
  "chain_hash"
#define RAMPART_AUDIT_CHECKPOINT_COLUMNS \
  "tree_size, root_hash, time_unix_ns, key_id, algorithm, signature, frontier, chain_hash"
#define RAMPART_AUDIT_EPOCH_COLUMNS \
  "epoch, first_sequence, last_sequence, start_unix_ns, end_unix_ns, pruned"

constexpr PgQuery kLastSequence = {
    "rampart_audit_last_sequence",
    "SELECT GREATEST(COALESCE((SELECT MAX(sequence) FROM audit_records), 0), "
    "COALESCE((SELECT last_sequence FROM audit_batches ORDER BY first_sequence DESC LIMIT 1), 0), "
    "COALESCE((SELECT MAX(last_sequence) FROM audit_epochs WHERE pruned = 1), 0))"};
// A whole batch as one row (store/audit_batches.h); the blob travels as bytea's hex text.
constexpr PgQuery kAppend = {
    "rampart_audit_append_batch",
    "INSERT INTO audit_batches (first_sequence, last_sequence, min_time_unix_ns, "
    "max_time_unix_ns, records) VALUES ($1::bigint, $2::bigint, $3::bigint, $4::bigint, "
    "$5::bytea)"};
#define RAMPART_AUDIT_BATCHES_AFTER                                                             \
  "SELECT first_sequence, records FROM audit_batches WHERE first_sequence >= COALESCE((SELECT " \
  "MAX(first_sequence) FROM audit_batches WHERE first_sequence <= $1::bigint), 0)"
// A page of the batches in a time range (the query's; the other filters apply to the records),
// after the batch starting at $2 (the previous page's last).
constexpr PgQuery kReadBatches = {"rampart_audit_read_batches", RAMPART_AUDIT_BATCHES_AFTER
                                  " AND first_sequence > $2::bigint AND max_time_unix_ns >= "
                                  "$3::bigint AND min_time_unix_ns < $4::bigint ORDER BY "
                                  "first_sequence LIMIT 8"};
constexpr PgQuery kStraddlingBatch = {
    "rampart_audit_straddling_batch",
    "SELECT first_sequence, records FROM audit_batches WHERE first_sequence <= $1::bigint AND "
    "last_sequence > $1::bigint"};
constexpr PgQuery kDeleteEpochBatches = {
    "rampart_audit_delete_epoch_batches",
    "DELETE FROM audit_batches WHERE first_sequence <= $1::bigint"};
constexpr PgQuery kPutCheckpoint = {
    "rampart_audit_put_checkpoint",
    "INSERT INTO audit_checkpoints (" RAMPART_AUDIT_CHECKPOINT_COLUMNS
    ") VALUES ($1::bigint, $2, $3::bigint, $4, $5, $6, $7, $8) "
    "ON CONFLICT (tree_size) DO NOTHING"};
constexpr PgQuery kPutEpoch = {
    "rampart_audit_put_epoch",
    "INSERT INTO audit_epochs (" RAMPART_AUDIT_EPOCH_COLUMNS
    ") VALUES ($1::bigint, $2::bigint, $3::bigint, $4::bigint, $5::bigint, 0) "
    "ON CONFLICT (epoch) DO NOTHING"};
constexpr PgQuery kFindEpoch = {
    "rampart_audit_find_epoch",
    "SELECT first_sequence, last_sequence, pruned, (SELECT COUNT(*) FROM audit_epochs WHERE "
    "epoch < $1::bigint AND pruned = 0) FROM audit_epochs WHERE epoch = $1::bigint FOR UPDATE"};
constexpr PgQuery kDeleteEpochRecords = {
    "rampart_audit_delete_epoch_records",
    "DELETE FROM audit_records WHERE sequence >= $1::bigint AND sequence <= $2::bigint"};
constexpr PgQuery kMarkPruned = {"rampart_audit_mark_pruned",
                                 "UPDATE audit_epochs SET pruned = 1 WHERE epoch = $1::bigint"};
constexpr PgQuery kReadRows = {"rampart_audit_read_rows",
                               "SELECT " RAMPART_AUDIT_ROW_COLUMNS
                               " FROM audit_records WHERE sequence > $1::bigint "
                               "ORDER BY sequence LIMIT $2::bigint"};
constexpr PgQuery kListCheckpoints = {"rampart_audit_list_checkpoints",
                                      "SELECT " RAMPART_AUDIT_CHECKPOINT_COLUMNS
                                      " FROM audit_checkpoints WHERE tree_size >= $1::bigint "
                                      "ORDER BY tree_size"};
constexpr PgQuery kLastCheckpoint = {"rampart_audit_last_checkpoint",
                                     "SELECT " RAMPART_AUDIT_CHECKPOINT_COLUMNS
                                     " FROM audit_checkpoints ORDER BY tree_size DESC LIMIT 1"};
constexpr PgQuery kListEpochs = {"rampart_audit_list_epochs", "SELECT " RAMPART_AUDIT_EPOCH_COLUMNS
                                                              " FROM audit_epochs ORDER BY epoch"};

std::string Number(int64_t value) { return std::to_string(value); }

// One prepared statement per set of filters (32), named by the set.
const PgQuery& QueryFor(int mask) {
  struct Table {
    std::array<std::string, 32> names;
    std::array<std::string, 32> sql;
    std::array<PgQuery, 32> queries;
  };
  static const Table* const table = [] {
    auto* built = new Table;
    for (int m = 0; m < 32; ++m) {
      built->names[m] = fmt::format("rampart_audit_query_{}", m);
      built->sql[m] = AuditQuerySql(m, [](int n, bool numeric) {
        return fmt::format("${}{}", n, numeric ? "::bigint" : "");
      });
      built->queries[m] = {built->names[m].c_str(), built->sql[m].c_str()};
    }
    return built;
  }();
  return table->queries[mask];
}

std::vector<AuditRow> Rows(const PgResult& result) {
  std::vector<AuditRow> rows;
  rows.reserve(static_cast<size_t>(result.rows()));
  for (int i = 0; i < result.rows(); ++i) rows.push_back(internal::ReadAuditRow(PgRow{result, i}));
  return rows;
}

std::vector<AuditCheckpointRow> Checkpoints(const PgResult& result) {
  std::vector<AuditCheckpointRow> rows;
  for (int i = 0; i < result.rows(); ++i) {
    rows.push_back(internal::ReadAuditCheckpoint(PgRow{result, i}));
  }
  return rows;
}

// bytea's text form (hex: "\\x" and two digits a byte) and back.
std::string ByteaText(std::string_view bytes) { return "\\x" + crypto::ToHex(bytes); }
std::string FromByteaText(std::string_view text) {
  if (text.size() < 2 || text.substr(0, 2) != "\\x") return {};
  auto bytes = crypto::FromHex(text.substr(2));
  return bytes.ok() ? std::move(*bytes) : std::string();
}

Status InsertBatch(PgConnection& connection, const AuditBatch& batch, std::string* sqlstate) {
  return connection
      .Run(kAppend,
           {Number(batch.first_sequence), Number(batch.last_sequence),
            Number(batch.min_time_unix_ns), Number(batch.max_time_unix_ns),
            ByteaText(batch.records)},
           sqlstate)
      .status();
}

// Unpacks batches page by page until `limit` records after `after_sequence` matching `query`
// (when given) are read.
Result<std::vector<AuditRow>> ReadBatches(PgConnection& connection, int64_t after_sequence,
                                          int64_t limit, const AuditQuery* query) {
  const int64_t from = query != nullptr ? query->from_unix_ns : 0;
  const int64_t to = query != nullptr && query->to_unix_ns != 0
                         ? query->to_unix_ns
                         : std::numeric_limits<int64_t>::max();
  std::vector<AuditRow> rows;
  std::vector<AuditRow> unpacked;
  int64_t previous = -1;
  while (static_cast<int64_t>(rows.size()) < limit) {
    ASSIGN_OR_RETURN(const PgResult page,
                     connection.Run(kReadBatches, {Number(after_sequence), Number(previous),
                                                   Number(from), Number(to)}));
    if (page.rows() == 0) break;
    for (int i = 0; i < page.rows() && static_cast<int64_t>(rows.size()) < limit; ++i) {
      previous = page.Int(i, 0);
      unpacked.clear();
      UnpackAuditBatch(previous, FromByteaText(page.Text(i, 1)), after_sequence, unpacked,
                       query == nullptr ? limit - static_cast<int64_t>(rows.size()) : INT64_MAX);
      for (AuditRow& record : unpacked) {
        if (static_cast<int64_t>(rows.size()) >= limit) break;
        if (query == nullptr || MatchesAuditQuery(record, *query)) {
          rows.push_back(std::move(record));
        }
      }
    }
  }
  return rows;
}

}  // namespace

Result<int64_t> PgLastAuditSequence(PgConnection& connection) {
  ASSIGN_OR_RETURN(const PgResult result, connection.Run(kLastSequence, {}));
  return result.rows() == 1 ? result.Int(0, 0) : 0;
}

Status PgAppendAuditBatch(PgConnection& connection, const AuditBatch& batch) {
  RETURN_IF_ERROR(ValidateAuditBatch(batch));
  ASSIGN_OR_RETURN(const int64_t last, PgLastAuditSequence(connection));
  if (batch.first_sequence != last + 1) {
    return AlreadyExists("audit sequence {} is taken or out of order: the log's last is {}",
                         batch.first_sequence, last);
  }
  // Another replica appending the same sequences inserts the same first_sequence: the second
  // insert waits on the primary key until the first commits, then fails here.
  std::string sqlstate;
  const Status inserted = InsertBatch(connection, batch, &sqlstate);
  if (!inserted.ok() && sqlstate == kUniqueViolation) {
    return AlreadyExists("audit sequence {} was taken by another writer", batch.first_sequence);
  }
  RETURN_IF_ERROR(inserted);
  if (!batch.checkpoint.has_value()) return Status::Ok();
  return PgPutAuditCheckpoint(connection, *batch.checkpoint, batch.closes);
}

Status PgAppendAuditRows(PgConnection& connection, const std::vector<AuditRow>& rows) {
  RETURN_IF_ERROR(ValidateAuditRows(rows));
  ASSIGN_OR_RETURN(const AuditBatch batch, PackAuditBatch(rows.data(), rows.size()));
  return PgAppendAuditBatch(connection, batch);
}

Status PgPutAuditCheckpoint(PgConnection& connection, const AuditCheckpointRow& checkpoint,
                            const std::optional<AuditEpochRow>& closes) {
  RETURN_IF_ERROR(connection
                      .Run(kPutCheckpoint, {Number(checkpoint.tree_size), checkpoint.root_hash,
                                            Number(checkpoint.time_unix_ns), checkpoint.key_id,
                                            checkpoint.algorithm, checkpoint.signature,
                                            checkpoint.frontier, checkpoint.chain_hash})
                      .status());
  if (!closes.has_value()) return Status::Ok();
  return connection
      .Run(kPutEpoch,
           {Number(closes->epoch), Number(closes->first_sequence), Number(closes->last_sequence),
            Number(closes->start_unix_ns), Number(closes->end_unix_ns)})
      .status();
}

Status PgPruneAuditEpoch(PgConnection& connection, int64_t epoch) {
  ASSIGN_OR_RETURN(const PgResult found, connection.Run(kFindEpoch, {Number(epoch)}));
  if (found.rows() == 0) return NotFound("audit epoch {} does not exist", epoch);
  if (found.Int(0, 2) != 0) return Status::Ok();
  if (found.Int(0, 3) > 0) {
    return FailedPrecondition("audit epoch {}: earlier epochs must be pruned first", epoch);
  }
  const int64_t last = found.Int(0, 1);
  RETURN_IF_ERROR(
      connection.Run(kDeleteEpochRecords, {Number(found.Int(0, 0)), Number(last)}).status());
  // As SqlitePruneAuditEpoch: a batch running past the epoch's end is packed again without it.
  ASSIGN_OR_RETURN(const PgResult straddling, connection.Run(kStraddlingBatch, {Number(last)}));
  std::vector<AuditRow> kept;
  if (straddling.rows() > 0) {
    UnpackAuditBatch(straddling.Int(0, 0), FromByteaText(straddling.Text(0, 1)), last, kept);
  }
  RETURN_IF_ERROR(connection.Run(kDeleteEpochBatches, {Number(last)}).status());
  if (!kept.empty()) {
    ASSIGN_OR_RETURN(const AuditBatch batch, PackAuditBatch(kept.data(), kept.size()));
    RETURN_IF_ERROR(InsertBatch(connection, batch, nullptr));
  }
  return connection.Run(kMarkPruned, {Number(epoch)}).status();
}

Result<std::vector<AuditRow>> PgReadAuditRows(PgConnection& connection, int64_t after_sequence,
                                              int64_t limit) {
  ASSIGN_OR_RETURN(const PgResult result,
                   connection.Run(kReadRows, {Number(after_sequence), Number(limit)}));
  ASSIGN_OR_RETURN(std::vector<AuditRow> batched,
                   ReadBatches(connection, after_sequence, limit, nullptr));
  return MergeAuditRows(Rows(result), std::move(batched), limit);
}

Result<std::vector<AuditRow>> PgQueryAuditRows(PgConnection& connection, const AuditQuery& query) {
  RETURN_IF_ERROR(ValidateAuditQuery(query));
  AuditQueryShape shape = ShapeAuditQuery(query);
  std::vector<std::string> parameters;
  parameters.push_back(Number(query.after_sequence));
  for (std::string& parameter : shape.parameters) parameters.push_back(std::move(parameter));
  parameters.push_back(Number(query.limit));
  ASSIGN_OR_RETURN(const PgResult result, connection.Run(QueryFor(shape.mask), parameters));
  ASSIGN_OR_RETURN(std::vector<AuditRow> batched,
                   ReadBatches(connection, query.after_sequence, query.limit, &query));
  return MergeAuditRows(Rows(result), std::move(batched), query.limit);
}

Result<std::vector<AuditCheckpointRow>> PgListAuditCheckpoints(PgConnection& connection,
                                                               int64_t from_size, bool last) {
  if (last) {
    ASSIGN_OR_RETURN(const PgResult result, connection.Run(kLastCheckpoint, {}));
    return Checkpoints(result);
  }
  ASSIGN_OR_RETURN(const PgResult result, connection.Run(kListCheckpoints, {Number(from_size)}));
  return Checkpoints(result);
}

Result<std::vector<AuditEpochRow>> PgListAuditEpochs(PgConnection& connection) {
  ASSIGN_OR_RETURN(const PgResult result, connection.Run(kListEpochs, {}));
  std::vector<AuditEpochRow> epochs;
  for (int i = 0; i < result.rows(); ++i) {
    AuditEpochRow epoch;
    epoch.epoch = result.Int(i, 0);
    epoch.first_sequence = result.Int(i, 1);
    epoch.last_sequence = result.Int(i, 2);
    epoch.start_unix_ns = result.Int(i, 3);
    epoch.end_unix_ns = result.Int(i, 4);
    epoch.pruned = result.Int(i, 5) != 0;
    epochs.push_back(epoch);
  }
  return epochs;
}

}  // namespace rampart::store::internal
