#pragma once

// Store: Rampart's persistent state behind one small interface (tenants, principals, API keys,
// shared quota budgets, the keyring's wrapped key versions and sealed secrets, the audit log;
// later documents), with two implementations:
//
//   OpenSqliteStore(dir)        the embedded default: <dir>/rampart.db, WAL mode, one writer
//   OpenPostgresStore(conninfo)  PostgreSQL through libpq, shared by several replicas
//
// Both apply the same schema migrations (a `schema_version` table records the last one applied;
// migrations run in one transaction at open, so a store is never half-migrated) and pass the
// same tests (tests/unit/store).
//
// Threads: every method is thread-safe and blocking (a disk write or a network round trip):
// never call one on an I/O thread. Callers on hot paths keep an in-memory snapshot and refresh it
// when Generation() moves.
//
// Errors: NotFound / AlreadyExists for the obvious cases, InvalidArgument for a record that
// breaks a rule (empty name), Unavailable when the database cannot be reached or is locked for
// too long, Internal for anything else (the database's message included).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace rampart::store {

namespace internal {
class SqlRunner;  // store/sql_runner.h
}  // namespace internal

// Free-form attributes (department, clearance, region, ...): name -> value. A value that holds a
// list (groups) is its items joined by ','.
using Attributes = std::map<std::string, std::string>;

struct Tenant {
  std::string name;  // unique; [A-Za-z0-9_.-]{1,64}
  Attributes attributes;
  int64_t created_unix = 0;  // seconds; set by the store on create
};

// A named identity inside a tenant (a person, a service). Keys, JWT subjects and certificates
// map to principals.
struct Principal {
  std::string tenant;
  std::string name;  // unique within the tenant; [A-Za-z0-9_.@:/-]{1,128}
  std::vector<std::string> roles;
  Attributes attributes;
  bool disabled = false;
  int64_t created_unix = 0;
};

// An API key as stored: never the secret, only its salted hash.
struct ApiKey {
  std::string id;         // the public part the key starts with ("rk_live_3fX9..."); unique
  std::string tenant;     // the tenant must exist
  std::string principal;  // the principal it acts as (within the tenant); created if missing
  std::string name;       // a label for people ("ci-pipeline")
  std::vector<std::string> roles;  // granted on top of the principal's
  std::string salt;                // random bytes, hex
  std::string hash;                // SHA-256(salt bytes || the whole key text), hex
  int64_t created_unix = 0;
  int64_t expires_unix = 0;    // 0 = never
  int64_t revoked_unix = 0;    // 0 = not revoked
  int64_t last_used_unix = 0;  // 0 = never used
};

// A budget shared by the replicas of one store (quotas): `limit` units per window that starts at
// `window_start_unix`; replicas take leases of it. Identified by (key, window_start_unix).
struct BudgetLease {
  int64_t granted = 0;  // units granted to this caller now (0..want)
  int64_t used = 0;     // units granted to everyone in this window so far, this grant included
};

// One version of a keyring key as stored (crypto/keyring.h gives it meaning; the store only keeps
// it): its material wrapped by the master key. Identified by (name, version); never changed once
// written.
struct KeyVersion {
  std::string name;              // [A-Za-z0-9_.-]{1,64}
  int version = 0;               // 1, 2, ...
  std::string purpose;           // "wrapping" or "signing"
  std::string algorithm;         // "aes-256-gcm", "sm4-ctr-hmac-sm3", "sm2-sm3", "ed25519"
  std::string wrapped_material;  // bytes (any); at most kMaxSealedBytes
  int64_t created_unix = 0;      // kept as given; the store sets it when 0
};

// A secret kept sealed in an envelope (crypto/envelope.h) under the keyring: the guard's key,
// later others. The store never sees the plaintext.
struct SealedSecret {
  std::string name;          // [A-Za-z0-9_.:-]{1,128}, e.g. "guard:master"
  std::string envelope;      // bytes (any); at most kMaxSealedBytes
  int64_t updated_unix = 0;  // set by the store
};

// The largest wrapped key or envelope the store keeps (bytes).
inline constexpr size_t kMaxSealedBytes = 1 << 20;

// The audit log's rows (audit/audit_log.h writes them; docs/audit.md describes them). Hashes are
// lower-case hex; the store keeps what it is given and never recomputes them: verification is
// the audit module's (audit/log_reader.h).
struct AuditRow {
  int64_t sequence = 0;  // 1, 2, ... with no gaps (the primary key)
  int64_t time_unix_ns = 0;
  // Copies of the record's fields, for queries; the record itself is authoritative.
  std::string tenant;
  std::string principal;
  std::string trace_id;
  std::string request_id;
  std::string action;
  std::string record;      // the canonical encoding (audit/record_codec.h), unless `compact`
  std::string leaf_hash;   // H(0x00 || leaf input): see `compact_leaf`
  std::string chain_hash;  // H(chain of sequence - 1 || leaf hash)
  // Rows of version-2 and 3 batches (store/audit_batch.h): `record` holds the rest of the record
  // in its compact form (audit/record_compact.h), and the five fields above are the record's own
  // values, not copies. The audit log's readers (verification, proofs, export, the admin query)
  // read the record through audit/record_compact.h (audit::ExpandAuditRow makes the row a
  // canonical one again). AppendAuditRows packs such rows into a batch of their version again
  // (all rows of one call must be compact, or none).
  bool compact = false;
  // Rows of version-3 batches (compact too): the leaf hash covers the record's compact leaf input
  // (audit/record_compact.h), rebuilt from `record` and the five fields above, not its canonical
  // encoding. All rows of one AppendAuditRows call must agree on this as well.
  bool compact_leaf = false;
};

// A signed tree head. One per tree size: the first written for a size is kept.
struct AuditCheckpointRow {
  int64_t tree_size = 0;
  std::string root_hash;
  int64_t time_unix_ns = 0;
  std::string key_id;
  std::string algorithm;  // the signature's: "ed25519", "sm2-sm3"
  std::string signature;  // base64, over the checkpoint's text (audit/checkpoint.h)
  // The tree's compact range at tree_size (hashes joined by ','), and the chain hash of record
  // tree_size: where a writer resumes and, once older records are pruned, where verification
  // starts from.
  std::string frontier;
  std::string chain_hash;
};

// A retention epoch: records first_sequence..last_sequence, closed by the checkpoint at tree
// size last_sequence. Pruning deletes an epoch's records and keeps its row and checkpoints.
struct AuditEpochRow {
  int64_t epoch = 0;  // 1, 2, ...
  int64_t first_sequence = 0;
  int64_t last_sequence = 0;
  int64_t start_unix_ns = 0;
  int64_t end_unix_ns = 0;
  bool pruned = false;
};

// Consecutive audit records packed as one blob, as schema migration 7 stores them (one row per
// batch): store/audit_batch.h's AuditBatchBuilder makes it and describes the layout.
struct AuditBatch {
  int64_t first_sequence = 0;
  int64_t last_sequence = 0;
  int64_t min_time_unix_ns = 0;
  int64_t max_time_unix_ns = 0;
  std::string records;
  // A checkpoint at tree size last_sequence, and the epoch it closes, written in the batch's
  // transaction (the log's writer signs the tree its batch completes: one commit, one sync, for
  // both); as PutAuditCheckpoint would write them.
  std::optional<AuditCheckpointRow> checkpoint;
  std::optional<AuditEpochRow> closes;
};

// Records matching every non-empty field, by sequence, after `after_sequence` (paging), at most
// `limit` (1..10000).
struct AuditQuery {
  int64_t from_unix_ns = 0;  // time >= from; 0: no bound
  int64_t to_unix_ns = 0;    // time < to; 0: no bound
  std::string tenant;
  std::string principal;
  std::string trace_id;
  int64_t after_sequence = 0;
  int64_t limit = 100;
};

// An uploaded file's metadata (the OpenAI Files API; its bytes live on disk, see
// api/files_http.h). Identified by id; belongs to one tenant.
struct StoredFile {
  std::string tenant;        // the owner's tenant; a file is invisible to every other tenant
  std::string id;            // "file-" and 24 of [0-9a-z]; unique
  std::string filename;      // as uploaded: 1 to 1024 bytes, no NUL
  std::string purpose;       // "assistants", "user_data", ...: 1 to 64 of [a-z_-]
  int64_t bytes = 0;         // the content's length (not its sealed length)
  int64_t created_unix = 0;  // kept as given; the store sets it when 0
  // How the bytes are kept at rest: "" (plain) or "envelope" (sealed with the keyring).
  std::string sealing;
};

// One page of a tenant's files (OpenAI's list paging): by (created_unix, id), ascending or
// descending, after the file with id `after` (none when empty; an unknown id gives an empty
// page), optionally only those with `purpose`, at most `limit` (1..10000).
struct FileQuery {
  std::string tenant;
  std::string purpose;
  std::string after;
  bool descending = true;
  int64_t limit = 20;
};

// Vector stores (knowledge/hub/vector_stores.h gives them meaning; schema migration 6): the
// store keeps rows, the knowledge hub encodes what is inside them. Ids and tenants as the hub
// makes them; times in Unix seconds.
struct VectorStoreRow {
  std::string tenant;
  std::string id;
  std::string name;
  std::string metadata;  // the hub's JSON text
  int64_t created_unix = 0;
  int64_t last_active_unix = 0;
  int64_t expires_days = 0;  // 0: never expires
  std::string embedder;      // the embedder's name the chunks were made with
};

// A file of a vector store, with its ingestion state. A worker takes a file in progress by
// claiming it (claimed_by, lease_until_unix), so that replicas never ingest one file at once.
struct VectorStoreFileRow {
  std::string tenant;
  std::string store_id;
  std::string file_id;
  std::string filename;
  int64_t created_unix = 0;
  std::string status;  // "in_progress", "completed", "failed", "cancelled"
  std::string error_code;
  std::string error_message;
  std::string attributes;  // the hub's JSON text
  std::string chunking;    // the hub's JSON text
  std::string batch_id;    // "" when added alone
  std::string claimed_by;  // "" when no worker holds it
  int64_t lease_until_unix = 0;
  int64_t usage_bytes = 0;
  bool redact_pii = false;  // the text is redacted (the hub's redact hook) before chunking
};

struct VectorStoreBatchRow {
  std::string tenant;
  std::string store_id;
  std::string id;
  int64_t created_unix = 0;
};

// One chunk of a file. `text` is the chunk's text or, when `sealing` is "envelope", its envelope
// (bytes); `embedding` is the vector's float32s, little-endian (bytes).
struct VectorStoreChunkRow {
  std::string store_id;
  std::string file_id;
  int64_t chunk_index = 0;
  std::string text;
  std::string sealing;
  std::string heading_path;
  int64_t page = 0;
  int64_t begin = 0;
  int64_t end = 0;
  std::string embedding;
};

// An entry of the vector stores' change sequence, which replicas follow to keep their in-memory
// indexes in step: `kind` "chunks" (the file's chunks and state were replaced), "attributes"
// (the file's attributes changed), "removed" (the file left the store, chunks and all) or
// "store_removed" (file_id empty). Sequences increase in commit order, without gaps.
struct VectorStoreChange {
  int64_t sequence = 0;
  std::string store_id;
  std::string file_id;
  std::string kind;
};

class Store {
 public:
  virtual ~Store() = default;

  // "sqlite:/path/rampart.db" or "postgresql://host:port/db" (password elided): for logs.
  virtual std::string Describe() const = 0;

  // Tenants. CreateTenant: AlreadyExists if the name is taken.
  virtual Status CreateTenant(const Tenant& tenant) = 0;
  virtual Result<std::optional<Tenant>> GetTenant(const std::string& name) = 0;
  virtual Result<std::vector<Tenant>> ListTenants() = 0;  // by name
  // NotFound if absent; FailedPrecondition while principals or keys still belong to it. Revoked
  // keys do not hold a tenant back: they are deleted with it.
  virtual Status DeleteTenant(const std::string& name) = 0;

  // Principals. PutPrincipal creates or replaces (roles, attributes, disabled; a replaced
  // principal keeps its created_unix, which the store sets); NotFound if the tenant does not
  // exist.
  virtual Status PutPrincipal(const Principal& principal) = 0;
  virtual Result<std::optional<Principal>> GetPrincipal(const std::string& tenant,
                                                        const std::string& name) = 0;
  // One tenant's, or every tenant's when `tenant` is empty; by (tenant, name).
  virtual Result<std::vector<Principal>> ListPrincipals(const std::string& tenant) = 0;
  // NotFound if absent; also revokes the principal's keys.
  virtual Status DeletePrincipal(const std::string& tenant, const std::string& name) = 0;

  // API keys. CreateApiKey: AlreadyExists on a repeated id; NotFound for a missing tenant; the
  // principal is created (no roles, no attributes) if the tenant has none of that name. The
  // key's created_unix is kept as given (the store sets it when 0).
  virtual Status CreateApiKey(const ApiKey& key) = 0;
  virtual Result<std::optional<ApiKey>> GetApiKey(const std::string& id) = 0;
  // One tenant's, or all when `tenant` is empty; by creation time, then id.
  virtual Result<std::vector<ApiKey>> ListApiKeys(const std::string& tenant) = 0;
  // NotFound if absent; revoking a revoked key keeps its first revocation time.
  virtual Status RevokeApiKey(const std::string& id, int64_t now_unix) = 0;
  // Records uses (id -> last use); unknown ids are ignored, and a last use never moves back.
  // One transaction for all.
  virtual Status TouchApiKeys(const std::map<std::string, int64_t>& last_used_unix) = 0;

  // Grants up to `want` units of the shared budget (key, window_start_unix) whose limit is
  // `limit`, atomically: the units granted to all callers in one window never add up to more
  // than `limit`. Windows older than `window_start_unix` of the same key may be dropped.
  virtual Result<BudgetLease> LeaseBudget(const std::string& key, int64_t window_start_unix,
                                          int64_t limit, int64_t want) = 0;

  // A number that changes whenever tenants, principals or keys change (by any process sharing
  // this store; touches excepted), so readers can keep a snapshot and reload it only when needed.
  // Cheap: one small query.
  virtual Result<int64_t> Generation() = 0;

  // The keyring's versions, by (name, version). AddKeyVersion: AlreadyExists when (name,
  // version) is taken (another replica or the CLI rotated first: reload and retry).
  virtual Result<std::vector<KeyVersion>> ListKeyVersions() = 0;
  virtual Status AddKeyVersion(const KeyVersion& version) = 0;
  // Each key's minimum decryption version (keys never raised are absent), by name. Raise sets it
  // to `version` unless it is already that high: it never moves down, whoever writes.
  virtual Result<std::vector<std::pair<std::string, int>>> ListMinDecryptionVersions() = 0;
  virtual Status RaiseMinDecryptionVersion(const std::string& name, int version) = 0;

  // Sealed secrets. CreateSealedSecret: AlreadyExists if the name is taken (another replica
  // created it first: read theirs). ReplaceSealedSecret swaps the envelope only while it still is
  // `expected` (a compare-and-set, so two rewraps never lose a write): FailedPrecondition when it
  // changed meanwhile, NotFound when absent. ListSealedSecrets is by name.
  virtual Status CreateSealedSecret(const SealedSecret& secret) = 0;
  virtual Result<std::optional<SealedSecret>> GetSealedSecret(const std::string& name) = 0;
  virtual Result<std::vector<SealedSecret>> ListSealedSecrets() = 0;
  virtual Status ReplaceSealedSecret(const std::string& name, const std::string& expected,
                                     const std::string& envelope) = 0;

  // The audit log. Nothing in Rampart updates or deletes its records except PruneAuditEpoch.
  //
  // Appends `rows` (consecutive sequences starting right after the log's last) in one
  // transaction: all or none. AlreadyExists when the first sequence is not the next one (another
  // writer appended first; nothing is written): the caller reads the new rows, advances and
  // retries. InvalidArgument when `rows` is empty or not consecutive.
  virtual Status AppendAuditRows(const std::vector<AuditRow>& rows) = 0;
  // The same for records already packed (the log's writer: no row object per record), with the
  // batch's checkpoint, if it carries one, in the same transaction. The base implementation
  // unpacks the batch and calls AppendAuditRows, then PutAuditCheckpoint (two transactions);
  // InvalidArgument when the blob does not hold exactly first_sequence..last_sequence, or the
  // checkpoint's tree size is not last_sequence (or it closes an epoch without one).
  virtual Status AppendAuditBatch(const AuditBatch& batch);
  // Rows with sequence > after_sequence, by sequence, at most `limit`.
  virtual Result<std::vector<AuditRow>> ReadAuditRows(int64_t after_sequence, int64_t limit) = 0;
  virtual Result<std::vector<AuditRow>> QueryAuditRows(const AuditQuery& query) = 0;
  // The last record's sequence; 0 when the log is empty.
  virtual Result<int64_t> LastAuditSequence() = 0;
  // Writes `checkpoint` (kept as it was if one of that size exists) and, in the same
  // transaction, `closes` (an epoch ending at this checkpoint; kept as it was if that epoch
  // exists).
  virtual Status PutAuditCheckpoint(const AuditCheckpointRow& checkpoint,
                                    const std::optional<AuditEpochRow>& closes) = 0;
  // By tree size; only those with tree_size >= `from_size`.
  virtual Result<std::vector<AuditCheckpointRow>> ListAuditCheckpoints(int64_t from_size) = 0;
  virtual Result<std::optional<AuditCheckpointRow>> LastAuditCheckpoint() = 0;
  virtual Result<std::vector<AuditEpochRow>> ListAuditEpochs() = 0;  // by epoch
  // Deletes epoch `epoch`'s records and marks it pruned, in one transaction. NotFound for an
  // unknown epoch; FailedPrecondition while an earlier epoch is not pruned (pruning goes
  // oldest first, so the records kept are always one suffix of the log). Pruning a pruned
  // epoch is OK.
  virtual Status PruneAuditEpoch(int64_t epoch) = 0;

  // Uploaded files' metadata (schema migration 5). CreateFile: AlreadyExists if the id is taken,
  // InvalidArgument for a field out of its rules. GetFile / DeleteFile see only `tenant`'s files:
  // another tenant's is absent (nullopt, NotFound). A store that keeps no files (a test's)
  // answers Unimplemented.
  virtual Status CreateFile(const StoredFile& file);
  virtual Result<std::optional<StoredFile>> GetFile(const std::string& tenant,
                                                    const std::string& id);
  virtual Result<std::vector<StoredFile>> ListFiles(const FileQuery& query);
  virtual Status DeleteFile(const std::string& tenant, const std::string& id);

  // Vector stores (schema migration 6; store/vector_store_tables.cc, the same SQL on both
  // backends). Every read and write sees only `tenant`'s rows (another tenant's are absent).
  // A store that keeps none (a test's) answers Unimplemented.
  //
  // CreateVectorStore: the store and its first files in one transaction; AlreadyExists for a
  // taken id.
  Status CreateVectorStore(const VectorStoreRow& row, const std::vector<VectorStoreFileRow>& files);
  Result<std::optional<VectorStoreRow>> GetVectorStore(const std::string& tenant,
                                                       const std::string& id);
  // By (created_unix, id); every tenant's when `tenant` is empty.
  Result<std::vector<VectorStoreRow>> ListVectorStores(const std::string& tenant);
  // Name, metadata, last_active_unix and expires_days. NotFound when absent.
  Status UpdateVectorStore(const VectorStoreRow& row);
  // The store, its files, batches and chunks, and a "store_removed" change. NotFound when absent.
  Status DeleteVectorStore(const std::string& tenant, const std::string& id);

  // Adds `files` (and `batch` when given) in one transaction; a file already in its store is
  // kept as it is. NotFound when the store is absent.
  Status AddVectorStoreFiles(const std::optional<VectorStoreBatchRow>& batch,
                             const std::vector<VectorStoreFileRow>& files);
  Result<std::optional<VectorStoreFileRow>> GetVectorStoreFile(const std::string& tenant,
                                                               const std::string& store_id,
                                                               const std::string& file_id);
  // By (created_unix, file_id).
  Result<std::vector<VectorStoreFileRow>> ListVectorStoreFiles(const std::string& tenant,
                                                               const std::string& store_id);
  // With an "attributes" change. NotFound when absent.
  Status UpdateVectorStoreFileAttributes(const std::string& tenant, const std::string& store_id,
                                         const std::string& file_id, const std::string& attributes);
  // Removes the file and its chunks from the store (from every store of the tenant when
  // `store_id` is empty), with a "removed" change each. NotFound when it was in none.
  Status RemoveVectorStoreFile(const std::string& tenant, const std::string& store_id,
                               const std::string& file_id);
  Result<std::optional<VectorStoreBatchRow>> GetVectorStoreBatch(const std::string& tenant,
                                                                 const std::string& store_id,
                                                                 const std::string& batch_id);
  // The batch's files still in progress become "cancelled" (a worker holding one then fails
  // to finish it). NotFound when the batch is absent.
  Status CancelVectorStoreBatch(const std::string& tenant, const std::string& store_id,
                                const std::string& batch_id);

  // Ingestion. Claims one file in progress that no live lease holds (the oldest first) for
  // `worker` until `lease_until_unix`; nullopt when there is none. Atomic across replicas: two
  // claimers never both get one file while its lease lasts.
  Result<std::optional<VectorStoreFileRow>> ClaimVectorStoreFile(const std::string& worker,
                                                                 int64_t now_unix,
                                                                 int64_t lease_until_unix);
  // In one transaction: replaces the file's chunks with `chunks`, sets its status, error and
  // usage_bytes from `file`, releases the claim and appends a "chunks" change.
  // FailedPrecondition when `worker` no longer holds the file in progress (removed, cancelled,
  // or its lease taken by another worker): nothing is written.
  Status FinishVectorStoreFile(const VectorStoreFileRow& file, const std::string& worker,
                               const std::vector<VectorStoreChunkRow>& chunks);
  // Gives a claim up (a worker stopping mid-file): the file waits for the next claimer. A file
  // `worker` no longer holds is left alone.
  Status ReleaseVectorStoreFile(const std::string& store_id, const std::string& file_id,
                                const std::string& worker);
  // A file's chunks by index, or the whole store's (by file, then index) when `file_id` is "".
  Result<std::vector<VectorStoreChunkRow>> ReadVectorStoreChunks(const std::string& store_id,
                                                                 const std::string& file_id);
  // Changes with sequence > `after`, by sequence, at most `limit`.
  Result<std::vector<VectorStoreChange>> ReadVectorStoreChanges(int64_t after, int64_t limit);
  // The last change's sequence; 0 when none.
  Result<int64_t> LastVectorStoreChange();

 protected:
  // The backend's SQL under the vector store tables: runs `body` with a runner on one
  // connection, inside one transaction when `write` (rolled back when `body` fails).
  // Unimplemented by default.
  virtual Status WithSql(bool write, const std::function<Status(internal::SqlRunner&)>& body);
};

// Opens (creating the directory and the database if needed) `<dir>/rampart.db` and migrates it.
// Errors: Unavailable "cannot open the store at <path>: <reason>"; FailedPrecondition when the
// database's schema is newer than this build knows.
Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& dir);

// Connects to PostgreSQL (a libpq connection string or URI), creating Rampart's tables in the
// `rampart` schema or migrating them. Several processes may share one database: migrations take
// an advisory lock. Errors: Unavailable with libpq's reason (the password never appears).
Result<std::unique_ptr<Store>> OpenPostgresStore(const std::string& conninfo);

}  // namespace rampart::store
