// The shared store: PostgreSQL through libpq, so that several replicas see one state. Every write
// is one transaction that also bumps the generation row (which serialises writers, so the
// generation moves in commit order); reads are single statements, retried once on a fresh
// connection when the old one turns out to be lost (a server restart, a failover).

#include <charconv>

#include "store/postgres_audit.h"
#include "store/postgres_connection.h"
#include "store/records.h"
#include "store/row_readers.h"
#include "store/schema.h"
#include "store/sql_runner.h"
#include "store/store.h"

namespace rampart::store {
namespace {

using internal::PgConnection;
using internal::PgQuery;
using internal::PgResult;
using internal::PgRow;

constexpr size_t kPoolSize = 4;
// pg_advisory_xact_lock's key for migrations: "RAMP" in ASCII.
constexpr std::string_view kMigrationLock = "SELECT pg_advisory_xact_lock(1380011344)";

constexpr std::string_view kUniqueViolation = "23505";
constexpr std::string_view kForeignKeyViolation = "23503";

#define RAMPART_TENANT_COLUMNS "name, attributes, created_unix"
#define RAMPART_PRINCIPAL_COLUMNS "tenant, name, roles, attributes, disabled, created_unix"
#define RAMPART_KEY_COLUMNS                                                                    \
  "id, tenant, principal, name, roles, salt, hash, created_unix, expires_unix, revoked_unix, " \
  "last_used_unix"

// Names are unique in the process: each connection prepares a statement once under its name.
constexpr PgQuery kInsertTenant = {
    "rampart_insert_tenant",
    "INSERT INTO tenants (name, attributes, created_unix) VALUES ($1, $2, $3::bigint)"};
constexpr PgQuery kGetTenant = {"rampart_get_tenant",
                                "SELECT " RAMPART_TENANT_COLUMNS " FROM tenants WHERE name = $1"};
constexpr PgQuery kListTenants = {"rampart_list_tenants",
                                  "SELECT " RAMPART_TENANT_COLUMNS
                                  " FROM tenants ORDER BY name COLLATE \"C\""};
constexpr PgQuery kLockTenant = {"rampart_lock_tenant",
                                 "SELECT 1 FROM tenants WHERE name = $1 FOR UPDATE"};
constexpr PgQuery kTenantInUse = {
    "rampart_tenant_in_use",
    "SELECT EXISTS (SELECT 1 FROM principals WHERE tenant = $1) OR "
    "EXISTS (SELECT 1 FROM api_keys WHERE tenant = $1 AND revoked_unix = 0)"};
constexpr PgQuery kDeleteTenantKeys = {"rampart_delete_tenant_keys",
                                       "DELETE FROM api_keys WHERE tenant = $1"};
constexpr PgQuery kDeleteTenant = {"rampart_delete_tenant", "DELETE FROM tenants WHERE name = $1"};

constexpr PgQuery kPutPrincipal = {
    "rampart_put_principal",
    "INSERT INTO principals (" RAMPART_PRINCIPAL_COLUMNS
    ") "
    "VALUES ($1, $2, $3, $4, $5::integer, $6::bigint) ON CONFLICT (tenant, name) DO UPDATE SET "
    "roles = excluded.roles, attributes = excluded.attributes, disabled = excluded.disabled"};
constexpr PgQuery kGetPrincipal = {"rampart_get_principal",
                                   "SELECT " RAMPART_PRINCIPAL_COLUMNS
                                   " FROM principals WHERE tenant = $1 AND name = $2"};
constexpr PgQuery kListPrincipals = {"rampart_list_principals",
                                     "SELECT " RAMPART_PRINCIPAL_COLUMNS
                                     " FROM principals "
                                     "ORDER BY tenant COLLATE \"C\", name COLLATE \"C\""};
constexpr PgQuery kListTenantPrincipals = {"rampart_list_tenant_principals",
                                           "SELECT " RAMPART_PRINCIPAL_COLUMNS
                                           " FROM principals "
                                           "WHERE tenant = $1 ORDER BY name COLLATE \"C\""};
constexpr PgQuery kDeletePrincipal = {"rampart_delete_principal",
                                      "DELETE FROM principals WHERE tenant = $1 AND name = $2"};
constexpr PgQuery kRevokePrincipalKeys = {
    "rampart_revoke_principal_keys",
    "UPDATE api_keys SET revoked_unix = $3::bigint "
    "WHERE tenant = $1 AND principal = $2 AND revoked_unix = 0"};

constexpr PgQuery kEnsurePrincipal = {
    "rampart_ensure_principal",
    "INSERT INTO principals (" RAMPART_PRINCIPAL_COLUMNS
    ") "
    "VALUES ($1, $2, '[]', '{}', 0, $3::bigint) ON CONFLICT (tenant, name) DO NOTHING"};
constexpr PgQuery kInsertKey = {"rampart_insert_key",
                                "INSERT INTO api_keys (" RAMPART_KEY_COLUMNS
                                ") VALUES ($1, $2, $3, $4, $5, $6, $7, "
                                "$8::bigint, $9::bigint, $10::bigint, $11::bigint)"};
constexpr PgQuery kGetKey = {"rampart_get_key",
                             "SELECT " RAMPART_KEY_COLUMNS " FROM api_keys WHERE id = $1"};
constexpr PgQuery kListKeys = {"rampart_list_keys",
                               "SELECT " RAMPART_KEY_COLUMNS
                               " FROM api_keys ORDER BY created_unix, id COLLATE \"C\""};
constexpr PgQuery kListTenantKeys = {"rampart_list_tenant_keys",
                                     "SELECT " RAMPART_KEY_COLUMNS
                                     " FROM api_keys WHERE tenant = "
                                     "$1 ORDER BY created_unix, id COLLATE \"C\""};
constexpr PgQuery kRevokeKey = {
    "rampart_revoke_key",
    "UPDATE api_keys SET revoked_unix = $2::bigint WHERE id = $1 AND revoked_unix = 0"};
constexpr PgQuery kKeyExists = {"rampart_key_exists", "SELECT 1 FROM api_keys WHERE id = $1"};
constexpr PgQuery kTouchKey = {"rampart_touch_key",
                               "UPDATE api_keys SET last_used_unix = $2::bigint "
                               "WHERE id = $1 AND last_used_unix < $2::bigint"};

// One statement: drops the windows before the previous one (a replica whose clock lags may still
// lease from the previous window and must find it as it was), then grants and counts. ON CONFLICT
// DO UPDATE locks the window's row and reads its newest version, so concurrent leases from any
// number of replicas serialise on it and never grant past the limit.
constexpr PgQuery kLeaseBudget = {
    "rampart_lease_budget",
    "WITH dropped AS (DELETE FROM budgets WHERE budget_key = $1 AND window_start_unix < "
    "(SELECT MAX(window_start_unix) FROM budgets WHERE budget_key = $1 "
    "AND window_start_unix < $2::bigint)) "
    "INSERT INTO budgets (budget_key, window_start_unix, used, last_grant) "
    "VALUES ($1, $2::bigint, LEAST($4::bigint, $3::bigint), LEAST($4::bigint, $3::bigint)) "
    "ON CONFLICT (budget_key, window_start_unix) DO UPDATE SET "
    "used = budgets.used + GREATEST(0, LEAST($4::bigint, $3::bigint - budgets.used)), "
    "last_grant = GREATEST(0, LEAST($4::bigint, $3::bigint - budgets.used)) "
    "RETURNING used, last_grant"};

constexpr PgQuery kBumpGeneration = {"rampart_bump_generation",
                                     "UPDATE generation SET value = value + 1 WHERE id = 1"};
constexpr PgQuery kGeneration = {"rampart_generation", "SELECT value FROM generation WHERE id = 1"};
constexpr PgQuery kListKeyVersions = {
    "rampart_list_key_versions",
    "SELECT name, version, purpose, algorithm, wrapped_material, created_unix FROM key_versions "
    "ORDER BY name COLLATE \"C\", version"};
constexpr PgQuery kAddKeyVersion = {
    "rampart_add_key_version",
    "INSERT INTO key_versions (name, version, purpose, algorithm, wrapped_material, created_unix) "
    "VALUES ($1, $2::integer, $3, $4, $5, $6::bigint) ON CONFLICT (name, version) DO NOTHING"};
constexpr PgQuery kListMinVersions = {
    "rampart_list_min_versions",
    "SELECT name, min_decryption_version FROM key_min_versions ORDER BY name COLLATE \"C\""};
constexpr PgQuery kRaiseMinVersion = {
    "rampart_raise_min_version",
    "INSERT INTO key_min_versions (name, min_decryption_version) VALUES ($1, $2::integer) "
    "ON CONFLICT (name) DO UPDATE SET min_decryption_version = "
    "GREATEST(key_min_versions.min_decryption_version, excluded.min_decryption_version)"};
constexpr PgQuery kCreateSealedSecret = {
    "rampart_create_sealed_secret",
    "INSERT INTO sealed_secrets (name, envelope, updated_unix) VALUES ($1, $2, $3::bigint) "
    "ON CONFLICT (name) DO NOTHING"};
constexpr PgQuery kGetSealedSecret = {
    "rampart_get_sealed_secret",
    "SELECT name, envelope, updated_unix FROM sealed_secrets WHERE name = $1"};
constexpr PgQuery kListSealedSecrets = {
    "rampart_list_sealed_secrets",
    "SELECT name, envelope, updated_unix FROM sealed_secrets ORDER BY name COLLATE \"C\""};
constexpr PgQuery kReplaceSealedSecret = {
    "rampart_replace_sealed_secret",
    "UPDATE sealed_secrets SET envelope = $3, updated_unix = $4::bigint "
    "WHERE name = $1 AND envelope = $2"};
constexpr PgQuery kSealedSecretExists = {"rampart_sealed_secret_exists",
                                         "SELECT 1 FROM sealed_secrets WHERE name = $1"};

#define RAMPART_FILE_COLUMNS "id, tenant, filename, purpose, bytes, created_unix, sealing"
constexpr PgQuery kCreateFile = {
    "rampart_create_file",
    "INSERT INTO files (" RAMPART_FILE_COLUMNS
    ") VALUES ($1, $2, $3, $4, $5::bigint, $6::bigint, $7) ON CONFLICT (id) DO NOTHING"};
constexpr PgQuery kGetFile = {
    "rampart_get_file", "SELECT " RAMPART_FILE_COLUMNS " FROM files WHERE id = $1 AND tenant = $2"};
#define RAMPART_LIST_FILES(compare, order)                                       \
  "SELECT " RAMPART_FILE_COLUMNS                                                 \
  " FROM files WHERE tenant = $1 AND ($2 = '' OR purpose = $2) AND ($3 = '' OR " \
  "(created_unix, id) " compare                                                  \
  " (SELECT created_unix, id FROM files WHERE tenant = $1 AND "                  \
  "id = $3)) ORDER BY created_unix " order ", id " order " LIMIT $4::bigint"
constexpr PgQuery kListFilesAscending = {"rampart_list_files_asc", RAMPART_LIST_FILES(">", "ASC")};
constexpr PgQuery kListFilesDescending = {"rampart_list_files_desc",
                                          RAMPART_LIST_FILES("<", "DESC")};
#undef RAMPART_LIST_FILES
#undef RAMPART_FILE_COLUMNS
constexpr PgQuery kDeleteFile = {"rampart_delete_file",
                                 "DELETE FROM files WHERE id = $1 AND tenant = $2"};

constexpr PgQuery kRecordMigration = {
    "rampart_record_migration",
    "INSERT INTO schema_version (version, description, applied_unix) "
    "VALUES ($1::integer, $2, $3::bigint)"};

std::string Number(int64_t value) { return std::to_string(value); }

constexpr auto* ReadTenant = &internal::ReadTenant<PgRow>;
constexpr auto* ReadPrincipal = &internal::ReadPrincipal<PgRow>;
constexpr auto* ReadKey = &internal::ReadKey<PgRow>;
constexpr auto* ReadKeyVersion = &internal::ReadKeyVersion<PgRow>;
constexpr auto* ReadSealedSecret = &internal::ReadSealedSecret<PgRow>;
constexpr auto* ReadStoredFile = &internal::ReadStoredFile<PgRow>;

template <typename T, typename Read>
Result<std::vector<T>> ReadAll(const PgResult& result, Read read) {
  std::vector<T> rows;
  rows.reserve(static_cast<size_t>(result.rows()));
  for (int row = 0; row < result.rows(); ++row) {
    ASSIGN_OR_RETURN(T value, read(PgRow{result, row}));
    rows.push_back(std::move(value));
  }
  return rows;
}

template <typename T, typename Read>
Result<std::optional<T>> ReadOne(const PgResult& result, Read read) {
  if (result.rows() == 0) return std::optional<T>();
  ASSIGN_OR_RETURN(T value, read(PgRow{result, 0}));
  return std::optional<T>(std::move(value));
}

Status BumpGeneration(PgConnection& connection) {
  return connection.Run(kBumpGeneration, {}).status();
}

Status Migrate(PgConnection& connection) {
  RETURN_IF_ERROR(connection.Execute("BEGIN").status());
  const auto migrate = [&]() -> Status {
    RETURN_IF_ERROR(connection.Execute(kMigrationLock).status());
    RETURN_IF_ERROR(connection.Execute("CREATE SCHEMA IF NOT EXISTS rampart").status());
    RETURN_IF_ERROR(connection.Execute(internal::kCreateSchemaVersionTable).status());
    ASSIGN_OR_RETURN(const PgResult current,
                     connection.Execute("SELECT COALESCE(MAX(version), 0) FROM schema_version"));
    const int64_t version = current.Int(0, 0);
    if (version > internal::LatestSchemaVersion()) {
      return FailedPrecondition(
          "the store's schema is version {}, newer than this build knows ({}): run a newer "
          "Rampart",
          version, internal::LatestSchemaVersion());
    }
    for (const internal::Migration& migration : internal::Migrations()) {
      if (migration.version <= version) continue;
      RETURN_IF_ERROR(connection.Execute(migration.sql)
                          .status()
                          .WithContext(fmt::format("schema migration {}", migration.version)));
      RETURN_IF_ERROR(
          connection
              .Run(kRecordMigration, {Number(migration.version), std::string(migration.description),
                                      Number(internal::NowUnix())})
              .status());
    }
    return connection.Execute("COMMIT").status();
  };
  Status status = migrate();
  if (!status.ok() && !connection.broken()) (void)connection.Execute("ROLLBACK");
  return status;
}

class PostgresStore final : public Store {
 public:
  PostgresStore(std::string description, const std::string& conninfo)
      : description_(std::move(description)), pool_(conninfo, kPoolSize) {}

  Status Open() {
    ASSIGN_OR_RETURN(auto lease, pool_.Acquire());
    return Migrate(*lease);
  }

  std::string Describe() const override { return description_; }

  Status CreateTenant(const Tenant& tenant) override {
    RETURN_IF_ERROR(internal::ValidateTenant(tenant));
    return Write([&](PgConnection& connection) -> Status {
      std::string sqlstate;
      auto inserted = connection.Run(
          kInsertTenant,
          {tenant.name, internal::EncodeAttributes(tenant.attributes), Number(internal::NowUnix())},
          &sqlstate);
      if (sqlstate == kUniqueViolation) {
        return AlreadyExists("tenant '{}' already exists", tenant.name);
      }
      RETURN_IF_ERROR(inserted.status());
      return BumpGeneration(connection);
    });
  }

  Result<std::optional<Tenant>> GetTenant(const std::string& name) override {
    return Read<std::optional<Tenant>>(
        [&](PgConnection& connection) -> Result<std::optional<Tenant>> {
          ASSIGN_OR_RETURN(const PgResult result, connection.Run(kGetTenant, {name}));
          return ReadOne<Tenant>(result, ReadTenant);
        });
  }

  Result<std::vector<Tenant>> ListTenants() override {
    return Read<std::vector<Tenant>>([&](PgConnection& connection) -> Result<std::vector<Tenant>> {
      ASSIGN_OR_RETURN(const PgResult result, connection.Run(kListTenants, {}));
      return ReadAll<Tenant>(result, ReadTenant);
    });
  }

  Status DeleteTenant(const std::string& name) override {
    return Write([&](PgConnection& connection) -> Status {
      // FOR UPDATE conflicts with the key-share lock a concurrent insert of a principal or key
      // takes on the tenant's row, so the check below cannot miss one.
      ASSIGN_OR_RETURN(const PgResult locked, connection.Run(kLockTenant, {name}));
      if (locked.rows() == 0) return NotFound("tenant '{}' does not exist", name);
      ASSIGN_OR_RETURN(const PgResult in_use, connection.Run(kTenantInUse, {name}));
      if (in_use.Text(0, 0) == "t") {
        return FailedPrecondition("tenant '{}' still has principals or live API keys", name);
      }
      RETURN_IF_ERROR(connection.Run(kDeleteTenantKeys, {name}).status());
      std::string sqlstate;
      auto deleted = connection.Run(kDeleteTenant, {name}, &sqlstate);
      if (sqlstate == kForeignKeyViolation) {
        return FailedPrecondition("tenant '{}' still has principals or live API keys", name);
      }
      RETURN_IF_ERROR(deleted.status());
      return BumpGeneration(connection);
    });
  }

  Status PutPrincipal(const Principal& principal) override {
    RETURN_IF_ERROR(internal::ValidatePrincipal(principal));
    return Write([&](PgConnection& connection) -> Status {
      std::string sqlstate;
      auto put =
          connection.Run(kPutPrincipal,
                         {principal.tenant, principal.name, internal::EncodeRoles(principal.roles),
                          internal::EncodeAttributes(principal.attributes),
                          principal.disabled ? "1" : "0", Number(internal::NowUnix())},
                         &sqlstate);
      if (sqlstate == kForeignKeyViolation) {
        return NotFound("tenant '{}' does not exist", principal.tenant);
      }
      RETURN_IF_ERROR(put.status());
      return BumpGeneration(connection);
    });
  }

  Result<std::optional<Principal>> GetPrincipal(const std::string& tenant,
                                                const std::string& name) override {
    return Read<std::optional<Principal>>(
        [&](PgConnection& connection) -> Result<std::optional<Principal>> {
          ASSIGN_OR_RETURN(const PgResult result, connection.Run(kGetPrincipal, {tenant, name}));
          return ReadOne<Principal>(result, ReadPrincipal);
        });
  }

  Result<std::vector<Principal>> ListPrincipals(const std::string& tenant) override {
    return Read<std::vector<Principal>>(
        [&](PgConnection& connection) -> Result<std::vector<Principal>> {
          ASSIGN_OR_RETURN(const PgResult result,
                           tenant.empty() ? connection.Run(kListPrincipals, {})
                                          : connection.Run(kListTenantPrincipals, {tenant}));
          return ReadAll<Principal>(result, ReadPrincipal);
        });
  }

  Status DeletePrincipal(const std::string& tenant, const std::string& name) override {
    const std::string now = Number(internal::NowUnix());
    return Write([&](PgConnection& connection) -> Status {
      ASSIGN_OR_RETURN(const PgResult deleted, connection.Run(kDeletePrincipal, {tenant, name}));
      if (deleted.affected() == 0) {
        return NotFound("principal '{}' of tenant '{}' does not exist", name, tenant);
      }
      RETURN_IF_ERROR(connection.Run(kRevokePrincipalKeys, {tenant, name, now}).status());
      return BumpGeneration(connection);
    });
  }

  Status CreateApiKey(const ApiKey& key) override {
    RETURN_IF_ERROR(internal::ValidateApiKey(key));
    const int64_t now = internal::NowUnix();
    return Write([&](PgConnection& connection) -> Status {
      std::string sqlstate;
      auto principal =
          connection.Run(kEnsurePrincipal, {key.tenant, key.principal, Number(now)}, &sqlstate);
      if (sqlstate == kForeignKeyViolation) {
        return NotFound("tenant '{}' does not exist", key.tenant);
      }
      RETURN_IF_ERROR(principal.status());
      auto inserted = connection.Run(
          kInsertKey,
          {key.id, key.tenant, key.principal, key.name, internal::EncodeRoles(key.roles), key.salt,
           key.hash, Number(key.created_unix != 0 ? key.created_unix : now),
           Number(key.expires_unix), Number(key.revoked_unix), Number(key.last_used_unix)},
          &sqlstate);
      if (sqlstate == kUniqueViolation) return AlreadyExists("API key '{}' already exists", key.id);
      if (sqlstate == kForeignKeyViolation) {
        return NotFound("tenant '{}' does not exist", key.tenant);
      }
      RETURN_IF_ERROR(inserted.status());
      return BumpGeneration(connection);
    });
  }

  Result<std::optional<ApiKey>> GetApiKey(const std::string& id) override {
    return Read<std::optional<ApiKey>>(
        [&](PgConnection& connection) -> Result<std::optional<ApiKey>> {
          ASSIGN_OR_RETURN(const PgResult result, connection.Run(kGetKey, {id}));
          return ReadOne<ApiKey>(result, ReadKey);
        });
  }

  Result<std::vector<ApiKey>> ListApiKeys(const std::string& tenant) override {
    return Read<std::vector<ApiKey>>([&](PgConnection& connection) -> Result<std::vector<ApiKey>> {
      ASSIGN_OR_RETURN(const PgResult result, tenant.empty()
                                                  ? connection.Run(kListKeys, {})
                                                  : connection.Run(kListTenantKeys, {tenant}));
      return ReadAll<ApiKey>(result, ReadKey);
    });
  }

  Status RevokeApiKey(const std::string& id, int64_t now_unix) override {
    return Write([&](PgConnection& connection) -> Status {
      ASSIGN_OR_RETURN(const PgResult revoked, connection.Run(kRevokeKey, {id, Number(now_unix)}));
      if (revoked.affected() > 0) return BumpGeneration(connection);
      ASSIGN_OR_RETURN(const PgResult found, connection.Run(kKeyExists, {id}));
      if (found.rows() == 0) return NotFound("API key '{}' does not exist", id);
      return Status::Ok();  // revoked before: the first time stays
    });
  }

  Status TouchApiKeys(const std::map<std::string, int64_t>& last_used_unix) override {
    if (last_used_unix.empty()) return Status::Ok();
    return Write([&](PgConnection& connection) -> Status {
      for (const auto& [id, used] : last_used_unix) {
        RETURN_IF_ERROR(connection.Run(kTouchKey, {id, Number(used)}).status());
      }
      return Status::Ok();
    });
  }

  Result<BudgetLease> LeaseBudget(const std::string& key, int64_t window_start_unix, int64_t limit,
                                  int64_t want) override {
    RETURN_IF_ERROR(internal::ValidateLease(key, limit, want));
    // One statement in its own implicit transaction: not retried, since a lost connection leaves
    // unknown whether the grant was counted.
    ASSIGN_OR_RETURN(auto lease, pool_.Acquire());
    ASSIGN_OR_RETURN(
        const PgResult result,
        lease->Run(kLeaseBudget, {key, Number(window_start_unix), Number(limit), Number(want)}));
    if (result.rows() != 1) return Internal("budget '{}': the lease returned no row", key);
    return BudgetLease{.granted = result.Int(0, 1), .used = result.Int(0, 0)};
  }

  Result<int64_t> Generation() override {
    return Read<int64_t>([&](PgConnection& connection) -> Result<int64_t> {
      ASSIGN_OR_RETURN(const PgResult result, connection.Run(kGeneration, {}));
      if (result.rows() != 1) return Internal("the store has no generation row");
      return result.Int(0, 0);
    });
  }

  Result<std::vector<KeyVersion>> ListKeyVersions() override {
    return Read<std::vector<KeyVersion>>(
        [&](PgConnection& connection) -> Result<std::vector<KeyVersion>> {
          ASSIGN_OR_RETURN(const PgResult result, connection.Run(kListKeyVersions, {}));
          return ReadAll<KeyVersion>(result, ReadKeyVersion);
        });
  }

  Status AddKeyVersion(const KeyVersion& version) override {
    RETURN_IF_ERROR(internal::ValidateKeyVersion(version));
    const int64_t now = internal::NowUnix();
    return Write([&](PgConnection& connection) -> Status {
      ASSIGN_OR_RETURN(
          const PgResult inserted,
          connection.Run(kAddKeyVersion,
                         {version.name, Number(version.version), version.purpose, version.algorithm,
                          internal::EncodeBytes(version.wrapped_material),
                          Number(version.created_unix != 0 ? version.created_unix : now)}));
      if (inserted.affected() == 0) {
        return AlreadyExists("key '{}' version {} already exists", version.name, version.version);
      }
      return Status::Ok();
    });
  }

  Result<std::vector<std::pair<std::string, int>>> ListMinDecryptionVersions() override {
    using Rows = std::vector<std::pair<std::string, int>>;
    return Read<Rows>([&](PgConnection& connection) -> Result<Rows> {
      ASSIGN_OR_RETURN(const PgResult result, connection.Run(kListMinVersions, {}));
      Rows rows;
      for (int row = 0; row < result.rows(); ++row) {
        rows.emplace_back(result.Text(row, 0), static_cast<int>(result.Int(row, 1)));
      }
      return rows;
    });
  }

  Status RaiseMinDecryptionVersion(const std::string& name, int version) override {
    if (version < 1) return InvalidArgument("a minimum decryption version is >= 1");
    return Write([&](PgConnection& connection) -> Status {
      return connection.Run(kRaiseMinVersion, {name, Number(version)}).status();
    });
  }

  Status CreateSealedSecret(const SealedSecret& secret) override {
    RETURN_IF_ERROR(internal::ValidateSealedSecretName(secret.name));
    RETURN_IF_ERROR(internal::ValidateSealedBytes("the envelope", secret.envelope));
    const int64_t now = internal::NowUnix();
    return Write([&](PgConnection& connection) -> Status {
      ASSIGN_OR_RETURN(
          const PgResult inserted,
          connection.Run(kCreateSealedSecret,
                         {secret.name, internal::EncodeBytes(secret.envelope), Number(now)}));
      if (inserted.affected() == 0) {
        return AlreadyExists("sealed secret '{}' already exists", secret.name);
      }
      return Status::Ok();
    });
  }

  Result<std::optional<SealedSecret>> GetSealedSecret(const std::string& name) override {
    return Read<std::optional<SealedSecret>>(
        [&](PgConnection& connection) -> Result<std::optional<SealedSecret>> {
          ASSIGN_OR_RETURN(const PgResult result, connection.Run(kGetSealedSecret, {name}));
          return ReadOne<SealedSecret>(result, ReadSealedSecret);
        });
  }

  Result<std::vector<SealedSecret>> ListSealedSecrets() override {
    return Read<std::vector<SealedSecret>>(
        [&](PgConnection& connection) -> Result<std::vector<SealedSecret>> {
          ASSIGN_OR_RETURN(const PgResult result, connection.Run(kListSealedSecrets, {}));
          return ReadAll<SealedSecret>(result, ReadSealedSecret);
        });
  }

  Status ReplaceSealedSecret(const std::string& name, const std::string& expected,
                             const std::string& envelope) override {
    RETURN_IF_ERROR(internal::ValidateSealedBytes("the envelope", envelope));
    const int64_t now = internal::NowUnix();
    return Write([&](PgConnection& connection) -> Status {
      ASSIGN_OR_RETURN(
          const PgResult updated,
          connection.Run(kReplaceSealedSecret, {name, internal::EncodeBytes(expected),
                                                internal::EncodeBytes(envelope), Number(now)}));
      if (updated.affected() > 0) return Status::Ok();
      ASSIGN_OR_RETURN(const PgResult found, connection.Run(kSealedSecretExists, {name}));
      if (found.rows() == 0) return NotFound("sealed secret '{}' does not exist", name);
      return FailedPrecondition("sealed secret '{}' changed meanwhile", name);
    });
  }

  Status AppendAuditRows(const std::vector<AuditRow>& rows) override {
    return Write([&](PgConnection& c) { return internal::PgAppendAuditRows(c, rows); });
  }
  Status AppendAuditBatch(const AuditBatch& batch) override {
    return Write([&](PgConnection& c) { return internal::PgAppendAuditBatch(c, batch); });
  }
  Result<std::vector<AuditRow>> ReadAuditRows(int64_t after_sequence, int64_t limit) override {
    return Read<std::vector<AuditRow>>(
        [&](PgConnection& c) { return internal::PgReadAuditRows(c, after_sequence, limit); });
  }
  Result<std::vector<AuditRow>> QueryAuditRows(const AuditQuery& query) override {
    return Read<std::vector<AuditRow>>(
        [&](PgConnection& c) { return internal::PgQueryAuditRows(c, query); });
  }
  Result<int64_t> LastAuditSequence() override {
    return Read<int64_t>([&](PgConnection& c) { return internal::PgLastAuditSequence(c); });
  }
  Status PutAuditCheckpoint(const AuditCheckpointRow& checkpoint,
                            const std::optional<AuditEpochRow>& closes) override {
    return Write(
        [&](PgConnection& c) { return internal::PgPutAuditCheckpoint(c, checkpoint, closes); });
  }
  Result<std::vector<AuditCheckpointRow>> ListAuditCheckpoints(int64_t from_size) override {
    return Read<std::vector<AuditCheckpointRow>>([&](PgConnection& c) {
      return internal::PgListAuditCheckpoints(c, from_size, /*last=*/false);
    });
  }
  Result<std::optional<AuditCheckpointRow>> LastAuditCheckpoint() override {
    return Read<std::optional<AuditCheckpointRow>>(
        [&](PgConnection& c) -> Result<std::optional<AuditCheckpointRow>> {
          ASSIGN_OR_RETURN(auto last, internal::PgListAuditCheckpoints(c, 0, /*last=*/true));
          if (last.empty()) return std::optional<AuditCheckpointRow>();
          return std::optional<AuditCheckpointRow>(std::move(last.front()));
        });
  }
  Result<std::vector<AuditEpochRow>> ListAuditEpochs() override {
    return Read<std::vector<AuditEpochRow>>(
        [&](PgConnection& c) { return internal::PgListAuditEpochs(c); });
  }
  Status PruneAuditEpoch(int64_t epoch) override {
    return Write([&](PgConnection& c) { return internal::PgPruneAuditEpoch(c, epoch); });
  }

  Status CreateFile(const StoredFile& file) override {
    RETURN_IF_ERROR(internal::ValidateStoredFile(file));
    const int64_t created = file.created_unix != 0 ? file.created_unix : internal::NowUnix();
    return Write([&](PgConnection& connection) -> Status {
      ASSIGN_OR_RETURN(
          const PgResult inserted,
          connection.Run(kCreateFile, {file.id, file.tenant, file.filename, file.purpose,
                                       Number(file.bytes), Number(created), file.sealing}));
      if (inserted.affected() == 0) return AlreadyExists("file '{}' already exists", file.id);
      return Status::Ok();
    });
  }

  Result<std::optional<StoredFile>> GetFile(const std::string& tenant,
                                            const std::string& id) override {
    return Read<std::optional<StoredFile>>(
        [&](PgConnection& connection) -> Result<std::optional<StoredFile>> {
          ASSIGN_OR_RETURN(const PgResult result, connection.Run(kGetFile, {id, tenant}));
          return ReadOne<StoredFile>(result, ReadStoredFile);
        });
  }

  Result<std::vector<StoredFile>> ListFiles(const FileQuery& query) override {
    RETURN_IF_ERROR(internal::ValidateFileQuery(query));
    return Read<std::vector<StoredFile>>(
        [&](PgConnection& connection) -> Result<std::vector<StoredFile>> {
          ASSIGN_OR_RETURN(
              const PgResult result,
              connection.Run(query.descending ? kListFilesDescending : kListFilesAscending,
                             {query.tenant, query.purpose, query.after, Number(query.limit)}));
          return ReadAll<StoredFile>(result, ReadStoredFile);
        });
  }

  Status DeleteFile(const std::string& tenant, const std::string& id) override {
    return Write([&](PgConnection& connection) -> Status {
      ASSIGN_OR_RETURN(const PgResult removed, connection.Run(kDeleteFile, {id, tenant}));
      if (removed.affected() == 0) return NotFound("file '{}' does not exist", id);
      return Status::Ok();
    });
  }

 protected:
  Status WithSql(bool write, const std::function<Status(internal::SqlRunner&)>& body) override {
    if (write) {
      return Write([&](PgConnection& connection) {
        internal::PgRunner runner(connection);
        return body(runner);
      });
    }
    return Read<bool>([&](PgConnection& connection) -> Result<bool> {
             internal::PgRunner runner(connection);
             RETURN_IF_ERROR(body(runner));
             return true;
           })
        .status();
  }

 private:
  // Reads are idempotent: one more try on a fresh connection when the first one was lost.
  template <typename T, typename Body>
  Result<T> Read(Body&& body) {
    for (int attempt = 0;; ++attempt) {
      ASSIGN_OR_RETURN(auto lease, pool_.Acquire());
      Result<T> result = body(*lease);
      if (result.ok() || attempt > 0 || !lease->broken()) return result;
      pool_.DropIdle();
    }
  }

  // Runs `body` in a transaction. A connection found lost at BEGIN (nothing was done yet) is
  // replaced once; a failure later is returned as is (at COMMIT, whether it applied is unknown).
  template <typename Body>
  Status Write(Body&& body) {
    for (int attempt = 0;; ++attempt) {
      ASSIGN_OR_RETURN(auto lease, pool_.Acquire());
      auto begun = lease->Execute("BEGIN");
      if (!begun.ok()) {
        if (attempt == 0 && lease->broken()) {
          pool_.DropIdle();
          continue;
        }
        return begun.status();
      }
      Status status = body(*lease);
      if (status.ok()) status = lease->Execute("COMMIT").status();
      if (!status.ok() && !lease->broken()) (void)lease->Execute("ROLLBACK");
      return status;
    }
  }

  const std::string description_;
  internal::PgPool pool_;
};

}  // namespace

Result<std::unique_ptr<Store>> OpenPostgresStore(const std::string& conninfo) {
  const std::optional<std::string> parsed = internal::DescribeConninfo(conninfo);
  if (!parsed.has_value()) {
    return Unavailable("cannot open the store: the PostgreSQL connection string is malformed");
  }
  const std::string& description = *parsed;
  auto store = std::make_unique<PostgresStore>(description, conninfo);
  if (Status opened = store->Open(); !opened.ok()) {
    return Status(
        opened.code() == StatusCode::kFailedPrecondition ? opened.code() : StatusCode::kUnavailable,
        fmt::format("cannot open the store at {}: {}", description, opened.message()));
  }
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace rampart::store
