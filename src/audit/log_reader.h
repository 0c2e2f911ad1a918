#pragma once

// Reading the audit log back out of the store, independently of any AuditLog writing it: full
// verification, inclusion proofs and their offline check, retention (pruning expired epochs) and
// export. What `rampart audit verify|prove|check-proof|export` run (docs/audit.md).
//
// Threads: free functions; each blocks on the store. Untrusted input (the store's rows, a proof
// file) yields a finding or InvalidArgument, never a crash.

#include <chrono>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "audit/merkle.h"
#include "core/status.h"
#include "crypto/signature.h"

namespace rampart::store {
class Store;
}

namespace rampart::audit {

struct VerifyOptions {
  DigestAlgorithm digest = DigestAlgorithm::kSha256;
  // The checkpoints' verifying keys (a rotated key's successors too): a checkpoint must verify
  // with one of them. At least one.
  std::vector<crypto::VerifyingKey> keys;
};

// The first thing found wrong. `kind` is one of: "edited" (a record's content, hash or column
// changed), "deleted", "inserted", "reordered", "truncated" (records a checkpoint covers are
// gone from the end), "checkpoint" (a checkpoint's signature, text or frontier is wrong), or
// "inconsistent" (a checkpoint's root is not the tree of the records: they were changed and
// re-hashed).
struct Finding {
  std::string kind;
  int64_t sequence = 0;  // the record (or the checkpoint's tree size) where it was found
  std::string message;   // names the record or checkpoint and what is wrong
};

struct VerifyReport {
  int64_t records = 0;             // records checked
  int64_t pruned_through = 0;      // records 1..pruned_through were pruned by retention
  int64_t last_sequence = 0;       // the last record's
  int64_t checkpoints = 0;         // checkpoints whose signature was checked
  int64_t signed_size = 0;         // the last checkpoint's tree size
  std::optional<Finding> problem;  // none: the log is sound
};

// Recomputes every record's leaf hash, the chain, the tree (from the pruned prefix's frontier
// when epochs were pruned) and compares each checkpoint's root with the tree of that size;
// checks every checkpoint's signature. Comparing every signed root with the one tree recomputed
// from the records is at least as strong as checking a consistency proof between consecutive
// checkpoints. Errors: the store's, or InvalidArgument for options without a key; tampering is
// a `problem`, not an error.
Result<VerifyReport> VerifyLog(store::Store& store, const VerifyOptions& options);

// A self-contained inclusion proof (JSON): {"sequence", "leaf_index", "tree_size", "digest",
// "record" (the canonical text), "leaf_input" (base64 of the bytes the leaf hash covers: the
// record's compact leaf, or for records written before compact leaves its canonical text),
// "leaf_hash", "audit_path" (hex, RFC 6962 order), "checkpoint" (the signed note)}. The checkpoint
// is the one of `checkpoint_size`, or the first covering the record. NotFound when the record or
// such a checkpoint does not exist; InvalidArgument when the record is not in that tree or was
// pruned.
Result<std::string> ProveInclusion(store::Store& store, DigestAlgorithm digest, int64_t sequence,
                                   std::optional<int64_t> checkpoint_size);

// Checks a ProveInclusion document offline: the checkpoint's signature with one of `keys`, the
// leaf hash of the leaf input (of the record, for a proof without one) and that the leaf input
// holds the record, and the audit path up to the checkpoint's root. OK, or InvalidArgument /
// PermissionDenied saying what failed. Returns the record's sequence and tree size checked.
struct CheckedProof {
  int64_t sequence = 0;
  int64_t tree_size = 0;
};
Result<CheckedProof> CheckInclusionProof(std::string_view proof,
                                         const std::vector<crypto::VerifyingKey>& keys);

// Prunes, oldest first, every epoch that ended at least `retention` before `now_unix_ns`.
// Returns how many epochs were pruned.
Result<int> PruneExpiredEpochs(store::Store& store, int64_t now_unix_ns,
                               std::chrono::hours retention);

// Writes the records with time in [from, to) (0: unbounded), one per line: its canonical
// encoding with one member appended, "leaf_input" (as in a proof), so that anyone can recompute
// its leaf hash from the line. Returns how many.
Result<int64_t> ExportRecords(store::Store& store, int64_t from_unix_ns, int64_t to_unix_ns,
                              std::ostream& out);

}  // namespace rampart::audit
