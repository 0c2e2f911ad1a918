#pragma once

// The store's rows read back into its records, once for both backends: `Row` is any row with
// `Text(column)` and `Int(column)` (SQLite's Statement, PostgreSQL's result row). The columns
// are in the order of each backend's column lists for the table.

#include <string>

#include "core/status.h"
#include "store/records.h"
#include "store/store.h"

namespace rampart::store::internal {

template <typename Row>
Result<Tenant> ReadTenant(const Row& row) {
  Tenant tenant;
  tenant.name = row.Text(0);
  ASSIGN_OR_RETURN(tenant.attributes, DecodeAttributes(row.Text(1)));
  tenant.created_unix = row.Int(2);
  return tenant;
}

template <typename Row>
Result<Principal> ReadPrincipal(const Row& row) {
  Principal principal;
  principal.tenant = row.Text(0);
  principal.name = row.Text(1);
  ASSIGN_OR_RETURN(principal.roles, DecodeRoles(row.Text(2)));
  ASSIGN_OR_RETURN(principal.attributes, DecodeAttributes(row.Text(3)));
  principal.disabled = row.Int(4) != 0;
  principal.created_unix = row.Int(5);
  return principal;
}

template <typename Row>
Result<ApiKey> ReadKey(const Row& row) {
  ApiKey key;
  key.id = row.Text(0);
  key.tenant = row.Text(1);
  key.principal = row.Text(2);
  key.name = row.Text(3);
  ASSIGN_OR_RETURN(key.roles, DecodeRoles(row.Text(4)));
  key.salt = row.Text(5);
  key.hash = row.Text(6);
  key.created_unix = row.Int(7);
  key.expires_unix = row.Int(8);
  key.revoked_unix = row.Int(9);
  key.last_used_unix = row.Int(10);
  return key;
}

template <typename Row>
Result<KeyVersion> ReadKeyVersion(const Row& row) {
  KeyVersion version;
  version.name = row.Text(0);
  version.version = static_cast<int>(row.Int(1));
  version.purpose = row.Text(2);
  version.algorithm = row.Text(3);
  ASSIGN_OR_RETURN(version.wrapped_material, DecodeBytes(row.Text(4)));
  version.created_unix = row.Int(5);
  return version;
}

template <typename Row>
Result<SealedSecret> ReadSealedSecret(const Row& row) {
  SealedSecret secret;
  secret.name = row.Text(0);
  ASSIGN_OR_RETURN(secret.envelope, DecodeBytes(row.Text(1)));
  secret.updated_unix = row.Int(2);
  return secret;
}

template <typename Row>
Result<StoredFile> ReadStoredFile(const Row& row) {
  StoredFile file;
  file.id = row.Text(0);
  file.tenant = row.Text(1);
  file.filename = row.Text(2);
  file.purpose = row.Text(3);
  file.bytes = row.Int(4);
  file.created_unix = row.Int(5);
  file.sealing = row.Text(6);
  return file;
}

// The audit log's per-record rows (`audit_records`; records since schema migration 7 are in batch
// rows, store/audit_batches.h) and its checkpoints.
template <typename Row>
AuditRow ReadAuditRow(const Row& row) {
  AuditRow audit;
  audit.sequence = row.Int(0);
  audit.time_unix_ns = row.Int(1);
  audit.tenant = row.Text(2);
  audit.principal = row.Text(3);
  audit.trace_id = row.Text(4);
  audit.request_id = row.Text(5);
  audit.action = row.Text(6);
  audit.record = row.Text(7);
  audit.leaf_hash = row.Text(8);
  audit.chain_hash = row.Text(9);
  return audit;
}

template <typename Row>
AuditCheckpointRow ReadAuditCheckpoint(const Row& row) {
  AuditCheckpointRow checkpoint;
  checkpoint.tree_size = row.Int(0);
  checkpoint.root_hash = row.Text(1);
  checkpoint.time_unix_ns = row.Int(2);
  checkpoint.key_id = row.Text(3);
  checkpoint.algorithm = row.Text(4);
  checkpoint.signature = row.Text(5);
  checkpoint.frontier = row.Text(6);
  checkpoint.chain_hash = row.Text(7);
  return checkpoint;
}

}  // namespace rampart::store::internal
