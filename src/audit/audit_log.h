#pragma once

// The audit log: every request's AuditRecord, appended durably, hash-chained and committed into
// an RFC 6962 Merkle tree, with signed checkpoints (tree size, root hash, time, key id; SM2 or
// Ed25519) every N records or T seconds. docs/audit.md describes the format, verification and
// retention.
//
// Appends are group-committed by one writer thread: a batch of records is written in one
// transaction and fsynced. In sync mode, Append's callback runs once the record is durable, and
// front ends release the request's answer only then; in batched mode the callback runs at once
// and the write follows within `max_delay`.
//
// Threads: Append is thread-safe and never blocks (the queue is bounded: when it is full, Append
// answers Unavailable at once and the front end answers 503). Each record is encoded on the
// appending thread into the queue's one buffer; the writer only numbers, hashes and writes.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "audit/record.h"
#include "core/status.h"
#include "core/unique_function.h"
#include "crypto/digest.h"
#include "crypto/signature.h"

namespace rampart::store {
class Store;
}

namespace rampart::audit {

struct AuditOptions {
  bool sync = false;                        // fsync before the answer is released
  std::chrono::milliseconds max_delay{10};  // batched mode: the longest a record waits
  size_t max_batch = 1024;
  size_t max_queue = 65536;
  // The bytes of encoded records the queue holds at most (records sealed under `audit:full`
  // carry whole requests): beyond it Append refuses, as beyond max_queue records.
  size_t max_queue_bytes = size_t{256} << 20;
  crypto::DigestAlgorithm digest = crypto::DigestAlgorithm::kSha256;  // content, chain and tree
  int64_t checkpoint_every_records = 1000;
  std::chrono::seconds checkpoint_every{60};
  std::chrono::hours retention{24 * 180};  // epochs older than this may be pruned
  // An epoch ends at the first checkpoint written once it has lasted this long (0: every
  // checkpoint ends one). When an epoch ends, the epochs that ended more than `retention` ago are
  // pruned (audit/log_reader.h: PruneExpiredEpochs).
  std::chrono::seconds epoch_length{24 * 3600};
  // Leaves over each record's canonical (JSON) encoding, in version-2 batches, as the log was
  // written before compact leaves (docs/audit.md, "The record encoding"): for a verifier that
  // reads only that form, and for tests that build such a log. Costs the writer the JSON
  // encoding of every record.
  bool canonical_leaves = false;
};

class AuditLog {
 public:
  // `store` and the signing key's keyring must outlive the log. Reads the log's head from the
  // store (the last record's chain hash and the tree's frontier) and starts the writer thread.
  // Several logs (replicas) may append to one shared store: each appends from its view of the
  // head and, when another has taken those sequence numbers, reads what was appended and tries
  // again, so the store holds one gap-free sequence and one tree (docs/audit.md). Errors: the
  // store's; InvalidArgument for options out of range (max_batch or max_queue 0);
  // FailedPrecondition when records a checkpoint covers are missing (a truncated log).
  static Result<std::unique_ptr<AuditLog>> Open(store::Store& store, AuditOptions options,
                                                crypto::SigningKey signing_key,
                                                std::string signing_key_id);
  ~AuditLog();  // writes what is queued, a final checkpoint, and stops

  // Queues `record`; `done` (may be empty) runs (on the writer thread in sync mode: it must not
  // block) with OK once the record is durable (sync) or queued (batched), or with the error.
  // The record is encoded here, on the calling thread, and not kept: the caller's own memory
  // never crosses to the writer. With `digests`, its content digests are those (raw) rather
  // than its `request_digest` and `response_digest` text.
  void Append(const AuditRecord& record, UniqueFunction<void(Status)> done,
              const ContentDigests* digests = nullptr);

  // Blocks until every record queued before the call is durable and, with `checkpoint`, covered
  // by a signed checkpoint. For shutdown paths, the CLI and tests; never on an I/O thread.
  // Errors: the store's.
  Status Flush(bool checkpoint);

 private:
  struct Impl;
  explicit AuditLog(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rampart::audit
