#pragma once

// Packing audit records into one AuditBatch (store.h), the blob of one audit_batches row (schema
// migration 7; docs/audit.md, "Storage"). Two layouts, told apart by the blob's first byte:
//
//   version 1: per record, in sequence order, its time (8 bytes, little-endian), then tenant,
//     principal, trace id, request id, action, the record's canonical encoding, the leaf hash
//     and the chain hash, each as a length (LEB128) and its bytes; hashes raw.
//   version 2 (what the log's writer writes): per record, its time as the zigzag LEB128
//     difference from the previous record's (from 0 for the first), then tenant, principal,
//     trace id, request id and action (the record's own values: they are not repeated in what
//     follows), the rest of the record in its compact form (audit/record_compact.h), the leaf
//     hash and the chain hash, each as a length and its bytes. The canonical encoding is not
//     stored: readers rebuild it from the compact form (audit::ExpandAuditRow).
//   version 3 (what the log's writer writes): version 2's layout, but each record's compact form
//     is that of a compact leaf (audit/record_compact.h), starting with its own version byte, and
//     the leaf hash covers the compact leaf input rebuilt from the record's fields, not the
//     canonical encoding.
//
// Record i is sequence first_sequence + i.
//
// Not thread-safe; one builder per writer, reused from batch to batch (its buffer is kept).

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include "store/store.h"

namespace rampart::store {

inline constexpr char kAuditBatchVersion1 = 1;
inline constexpr char kAuditBatchVersion2 = 2;
inline constexpr char kAuditBatchVersion3 = 3;

class AuditBatchBuilder {
 public:
  // Starts a batch whose first record is `first_sequence`, in layout `version`.
  void Start(int64_t first_sequence, char version = kAuditBatchVersion3);
  // Appends the next record. `record` is its canonical encoding (version 1) or the rest of it in
  // compact form (versions 2 and 3); `leaf_hash` and `chain_hash` are raw digests.
  void Add(int64_t time_unix_ns, std::string_view tenant, std::string_view principal,
           std::string_view trace_id, std::string_view request_id, std::string_view action,
           std::string_view record, std::string_view leaf_hash, std::string_view chain_hash);
  // Has the batch carry a checkpoint at its last record (and the epoch it closes), written in its
  // transaction (AuditBatch::checkpoint); until the next Start.
  void SetCheckpoint(AuditCheckpointRow checkpoint, std::optional<AuditEpochRow> closes) {
    batch_.checkpoint = std::move(checkpoint);
    batch_.closes = std::move(closes);
  }
  int64_t count() const { return count_; }
  // The batch so far (valid until the next Start).
  const AuditBatch& batch() const { return batch_; }

 private:
  AuditBatch batch_;
  char version_ = kAuditBatchVersion3;
  int64_t previous_time_ = 0;
  int64_t count_ = 0;
};

}  // namespace rampart::store
