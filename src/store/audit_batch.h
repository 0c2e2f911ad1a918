#pragma once

// Packing audit records into one AuditBatch (store.h), the blob of one audit_batches row (schema
// migration 7; docs/audit.md, "Storage"): a version byte (1), then per record, in sequence order,
// its time (8 bytes, little-endian), then tenant, principal, trace id, request id, action, the
// record's encoding, the leaf hash and the chain hash, each as a length (LEB128) and its bytes;
// hashes raw. Record i is sequence first_sequence + i.
//
// Not thread-safe; one builder per writer, reused from batch to batch (its buffer is kept).

#include <cstdint>
#include <string_view>

#include "store/store.h"

namespace rampart::store {

class AuditBatchBuilder {
 public:
  // Starts a batch whose first record is `first_sequence`.
  void Start(int64_t first_sequence);
  // Appends the next record. `leaf_hash` and `chain_hash` are raw digests.
  void Add(int64_t time_unix_ns, std::string_view tenant, std::string_view principal,
           std::string_view trace_id, std::string_view request_id, std::string_view action,
           std::string_view record, std::string_view leaf_hash, std::string_view chain_hash);
  int64_t count() const { return count_; }
  // The batch so far (valid until the next Start).
  const AuditBatch& batch() const { return batch_; }

 private:
  AuditBatch batch_;
  int64_t count_ = 0;
};

}  // namespace rampart::store
