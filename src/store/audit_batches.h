#pragma once

// The audit log's batch rows (schema migration 7): one row per committed batch instead of one
// row per record. What both backends share: packing a batch's rows into the row's one blob,
// unpacking it, filtering and merging with the per-record rows of migrations 3/4. Internal to
// src/store; docs/audit.md ("Storage") describes the layout.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "store/audit_batch.h"
#include "store/store.h"

namespace rampart::store::internal {

inline constexpr const char* kAuditBatchColumns =
    "first_sequence, last_sequence, min_time_unix_ns, max_time_unix_ns, records";

// Packs `rows` (consecutive sequences, ValidateAuditRows) into one batch (store/audit_batch.h's
// layout: version 3 when the rows are compact leaves, 2 when compact, 1 when canonical; hashes
// given as hex, stored raw). InvalidArgument when a hash is not hex or the rows mix forms.
Result<AuditBatch> PackAuditBatch(const AuditRow* rows, size_t count);

// InvalidArgument unless `batch`'s blob holds exactly first_sequence..last_sequence (>= 1).
Status ValidateAuditBatch(const AuditBatch& batch);

// The records of a batch's blob, numbered from `first_sequence`, with hashes as hex again (as
// AuditRow holds them; a version-2 or 3 batch's rows are `compact`, a version-3 one's
// `compact_leaf`). Decoding stops at the first record it cannot read whole (an edited or truncated
// blob): the records it returns are those stored up to there, and the ones missing then show up to
// verification as deleted (a gap) or truncated, at the first one missing. Records with sequence <=
// `after_sequence` are skipped; at most `max_records` are added.
void UnpackAuditBatch(int64_t first_sequence, std::string_view records, int64_t after_sequence,
                      std::vector<AuditRow>& out, int64_t max_records = INT64_MAX);

// Whether `row` matches every filter of `query` except after_sequence and limit.
bool MatchesAuditQuery(const AuditRow& row, const AuditQuery& query);

// Merges `older` (per-record rows) and `batched` (unpacked batches), each by sequence, into one
// list by sequence (a per-record row first where both hold a sequence: verification then sees
// both), at most `limit`.
std::vector<AuditRow> MergeAuditRows(std::vector<AuditRow> older, std::vector<AuditRow> batched,
                                     int64_t limit);

}  // namespace rampart::store::internal
