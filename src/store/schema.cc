#include "store/schema.h"

namespace rampart::store::internal {
namespace {

// Roles are a JSON array of strings and attributes a JSON object of strings (records.h), kept as
// TEXT so that both dialects store them alike and an operator can read them with sqlite3 or psql.
// Booleans are INTEGER 0/1. Times are Unix seconds; 0 means "never" / "not yet".
constexpr std::string_view kInitialSchema = R"sql(
CREATE TABLE tenants (
  name TEXT NOT NULL PRIMARY KEY,
  attributes TEXT NOT NULL,
  created_unix BIGINT NOT NULL
);
CREATE TABLE principals (
  tenant TEXT NOT NULL REFERENCES tenants (name),
  name TEXT NOT NULL,
  roles TEXT NOT NULL,
  attributes TEXT NOT NULL,
  disabled INTEGER NOT NULL,
  created_unix BIGINT NOT NULL,
  PRIMARY KEY (tenant, name)
);
CREATE TABLE api_keys (
  id TEXT NOT NULL PRIMARY KEY,
  tenant TEXT NOT NULL REFERENCES tenants (name),
  principal TEXT NOT NULL,
  name TEXT NOT NULL,
  roles TEXT NOT NULL,
  salt TEXT NOT NULL,
  hash TEXT NOT NULL,
  created_unix BIGINT NOT NULL,
  expires_unix BIGINT NOT NULL,
  revoked_unix BIGINT NOT NULL,
  last_used_unix BIGINT NOT NULL
);
CREATE INDEX api_keys_by_tenant ON api_keys (tenant, created_unix, id);
CREATE INDEX api_keys_by_principal ON api_keys (tenant, principal);
CREATE TABLE budgets (
  budget_key TEXT NOT NULL,
  window_start_unix BIGINT NOT NULL,
  used BIGINT NOT NULL,
  last_grant BIGINT NOT NULL,
  PRIMARY KEY (budget_key, window_start_unix)
);
CREATE TABLE generation (
  id INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
  value BIGINT NOT NULL
);
INSERT INTO generation (id, value) VALUES (1, 0)
)sql";

// The keyring (crypto/keyring.h): every version of every key, its material wrapped by the master
// key (hex), and each key's minimum decryption version; and the secrets Rampart keeps sealed in
// envelopes under the keyring (the guard's key; hex). A version row is never updated or deleted:
// a rotation inserts one, and the primary key makes two replicas rotating at once collide.
constexpr std::string_view kKeyringSchema = R"sql(
CREATE TABLE key_versions (
  name TEXT NOT NULL,
  version INTEGER NOT NULL,
  purpose TEXT NOT NULL,
  algorithm TEXT NOT NULL,
  wrapped_material TEXT NOT NULL,
  created_unix BIGINT NOT NULL,
  PRIMARY KEY (name, version)
);
CREATE TABLE key_min_versions (
  name TEXT NOT NULL PRIMARY KEY,
  min_decryption_version INTEGER NOT NULL
);
CREATE TABLE sealed_secrets (
  name TEXT NOT NULL PRIMARY KEY,
  envelope TEXT NOT NULL,
  updated_unix BIGINT NOT NULL
)
)sql";

// The audit log (docs/audit.md). Hashes are lower-case hex TEXT. Records are append-only: the
// sequence is the primary key, so two replicas cannot both write record N, and the indexes serve
// the admin API's queries (by time, by tenant and principal, by trace id).
constexpr std::string_view kAuditSchema = R"sql(
CREATE TABLE audit_records (
  sequence BIGINT NOT NULL PRIMARY KEY,
  time_unix_ns BIGINT NOT NULL,
  tenant TEXT NOT NULL,
  principal TEXT NOT NULL,
  trace_id TEXT NOT NULL,
  request_id TEXT NOT NULL,
  action TEXT NOT NULL,
  record TEXT NOT NULL,
  leaf_hash TEXT NOT NULL,
  chain_hash TEXT NOT NULL
);
CREATE INDEX audit_records_by_time ON audit_records (time_unix_ns);
CREATE INDEX audit_records_by_principal ON audit_records (tenant, principal, time_unix_ns);
CREATE INDEX audit_records_by_trace ON audit_records (trace_id);
CREATE TABLE audit_checkpoints (
  tree_size BIGINT NOT NULL PRIMARY KEY,
  root_hash TEXT NOT NULL,
  time_unix_ns BIGINT NOT NULL,
  key_id TEXT NOT NULL,
  algorithm TEXT NOT NULL,
  signature TEXT NOT NULL,
  frontier TEXT NOT NULL,
  chain_hash TEXT NOT NULL
);
CREATE TABLE audit_epochs (
  epoch BIGINT NOT NULL PRIMARY KEY,
  first_sequence BIGINT NOT NULL,
  last_sequence BIGINT NOT NULL,
  start_unix_ns BIGINT NOT NULL,
  end_unix_ns BIGINT NOT NULL,
  pruned INTEGER NOT NULL
)
)sql";

// Two of migration 3's indexes cost the log's writer more than they give: each is a B-tree
// updated on every insert (with the table, its primary key and the time index: five), and the
// queries they served (by tenant and principal, by trace id) are rare admin reads, answered in
// sequence order from the time index or the primary key with the other filters applied to the
// rows read (docs/benchmarks.md, "The audit log on infer throughput").
constexpr std::string_view kAuditLeanerIndexes = R"sql(
DROP INDEX IF EXISTS audit_records_by_principal;
DROP INDEX IF EXISTS audit_records_by_trace
)sql";

// Uploaded files (the OpenAI Files API): metadata only, the bytes are files on disk. Listed per
// tenant by creation time, with the id breaking ties (the list's paging order).
constexpr std::string_view kFilesSchema = R"sql(
CREATE TABLE files (
  id TEXT NOT NULL PRIMARY KEY,
  tenant TEXT NOT NULL,
  filename TEXT NOT NULL,
  purpose TEXT NOT NULL,
  bytes BIGINT NOT NULL,
  created_unix BIGINT NOT NULL,
  sealing TEXT NOT NULL
);
CREATE INDEX files_by_tenant ON files (tenant, created_unix, id)
)sql";

// Vector stores (knowledge/hub/vector_stores.h): the stores, their files with ingestion state, a
// claim (claimed_by, lease_until_unix) so that replicas never ingest one file at once and whether
// their text is redacted at ingestion (redact_pii, 0 or 1), batches,
// chunks (their text, sealed or plain, and embedding as hex) and the change sequence replicas
// follow. vector_store_sequence's one row hands out sequences: a writer updates it inside its
// transaction, so sequences are taken in commit order and a follower never skips one.
constexpr std::string_view kVectorStoresSchema = R"sql(
CREATE TABLE vector_stores (
  id TEXT NOT NULL PRIMARY KEY,
  tenant TEXT NOT NULL,
  name TEXT NOT NULL,
  metadata TEXT NOT NULL,
  created_unix BIGINT NOT NULL,
  last_active_unix BIGINT NOT NULL,
  expires_days BIGINT NOT NULL,
  embedder TEXT NOT NULL
);
CREATE INDEX vector_stores_by_tenant ON vector_stores (tenant, created_unix, id);
CREATE TABLE vector_store_files (
  store_id TEXT NOT NULL,
  file_id TEXT NOT NULL,
  tenant TEXT NOT NULL,
  filename TEXT NOT NULL,
  created_unix BIGINT NOT NULL,
  status TEXT NOT NULL,
  error_code TEXT NOT NULL,
  error_message TEXT NOT NULL,
  attributes TEXT NOT NULL,
  chunking TEXT NOT NULL,
  batch_id TEXT NOT NULL,
  claimed_by TEXT NOT NULL,
  lease_until_unix BIGINT NOT NULL,
  usage_bytes BIGINT NOT NULL,
  redact_pii BIGINT NOT NULL,
  PRIMARY KEY (store_id, file_id)
);
CREATE INDEX vector_store_files_by_status ON vector_store_files (status, created_unix);
CREATE INDEX vector_store_files_by_file ON vector_store_files (tenant, file_id);
CREATE TABLE vector_store_batches (
  id TEXT NOT NULL PRIMARY KEY,
  store_id TEXT NOT NULL,
  tenant TEXT NOT NULL,
  created_unix BIGINT NOT NULL
);
CREATE TABLE vector_store_chunks (
  store_id TEXT NOT NULL,
  file_id TEXT NOT NULL,
  chunk_index BIGINT NOT NULL,
  body TEXT NOT NULL,
  sealing TEXT NOT NULL,
  heading_path TEXT NOT NULL,
  page BIGINT NOT NULL,
  begin_byte BIGINT NOT NULL,
  end_byte BIGINT NOT NULL,
  embedding TEXT NOT NULL,
  PRIMARY KEY (store_id, file_id, chunk_index)
);
CREATE TABLE vector_store_changes (
  sequence BIGINT NOT NULL PRIMARY KEY,
  store_id TEXT NOT NULL,
  file_id TEXT NOT NULL,
  kind TEXT NOT NULL
);
CREATE TABLE vector_store_sequence (
  id INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
  value BIGINT NOT NULL
);
INSERT INTO vector_store_sequence (id, value) VALUES (1, 0)
)sql";

// The audit log's records in batches (docs/audit.md, "Storage"): one row per committed batch,
// its records (with their query fields and raw hashes) packed in one blob (store/audit_batches.h),
// instead of one row per record: a fraction of the per-record B-tree, WAL and checkpoint work on
// the log's single writer. The primary key, the first sequence, keeps two replicas from writing
// the same records. Rows of migration 3's audit_records stay where they are and are read before
// these; new records go here only. BYTEA: PostgreSQL's byte string, a BLOB to SQLite.
constexpr std::string_view kAuditBatchesSchema = R"sql(
CREATE TABLE audit_batches (
  first_sequence BIGINT NOT NULL PRIMARY KEY,
  last_sequence BIGINT NOT NULL,
  min_time_unix_ns BIGINT NOT NULL,
  max_time_unix_ns BIGINT NOT NULL,
  records BYTEA NOT NULL
)
)sql";

constexpr Migration kMigrations[] = {
    {1, "tenants, principals, API keys, budgets and the generation counter", kInitialSchema},
    {2, "the keyring's key versions and minimum decryption versions, and sealed secrets",
     kKeyringSchema},
    {3, "the audit log: records, checkpoints and retention epochs", kAuditSchema},
    {4, "the audit log keeps only its time index (fewer B-trees per append)", kAuditLeanerIndexes},
    {5, "uploaded files' metadata (the OpenAI Files API)", kFilesSchema},
    {6, "vector stores: stores, files, batches, chunks and their change sequence",
     kVectorStoresSchema},
    {7, "the audit log's records in batches, one row per committed batch", kAuditBatchesSchema},
};

}  // namespace

std::span<const Migration> Migrations() { return kMigrations; }

int LatestSchemaVersion() { return kMigrations[std::size(kMigrations) - 1].version; }

}  // namespace rampart::store::internal
