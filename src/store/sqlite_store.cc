// The embedded store: SQLite in WAL mode, one write connection behind a mutex (SQLite allows one
// writer at a time anyway; the mutex keeps this process's writers from spinning on the busy
// handler) and one read connection behind its own, so reads never wait for a write's fsync.
// Other processes on the same file (the CLI next to a running server) are serialised by SQLite's
// lock and wait up to the busy timeout.

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "store/records.h"
#include "store/row_readers.h"
#include "store/schema.h"
#include "store/sql_runner.h"
#include "store/sqlite_audit.h"
#include "store/sqlite_connection.h"
#include "store/store.h"

namespace rampart::store {
namespace {

using internal::InTransaction;
using internal::SqliteConnection;
using internal::Statement;

// How long a write waits for another process's transaction before failing with Unavailable.
constexpr int kBusyTimeoutMs = 10000;

constexpr std::string_view kTenantColumns = "name, attributes, created_unix";
constexpr std::string_view kPrincipalColumns =
    "tenant, name, roles, attributes, disabled, created_unix";
constexpr std::string_view kKeyColumns =
    "id, tenant, principal, name, roles, salt, hash, created_unix, expires_unix, revoked_unix, "
    "last_used_unix";

constexpr std::string_view kKeyVersionColumns =
    "name, version, purpose, algorithm, wrapped_material, created_unix";

// The row readers (store/row_readers.h) for SQLite's rows.
constexpr auto* ReadTenant = &internal::ReadTenant<Statement>;
constexpr auto* ReadPrincipal = &internal::ReadPrincipal<Statement>;
constexpr auto* ReadKey = &internal::ReadKey<Statement>;
constexpr auto* ReadKeyVersion = &internal::ReadKeyVersion<Statement>;
constexpr auto* ReadSealedSecret = &internal::ReadSealedSecret<Statement>;
constexpr auto* ReadStoredFile = &internal::ReadStoredFile<Statement>;

// Every row of a query, each read by `read`.
template <typename T, typename Read>
Result<std::vector<T>> ReadAll(Statement& statement, Read read) {
  std::vector<T> rows;
  while (true) {
    ASSIGN_OR_RETURN(const bool row, statement.Step());
    if (!row) return rows;
    ASSIGN_OR_RETURN(T value, read(statement));
    rows.push_back(std::move(value));
  }
}

// At most one row.
template <typename T, typename Read>
Result<std::optional<T>> ReadOne(Statement& statement, Read read) {
  ASSIGN_OR_RETURN(const bool row, statement.Step());
  if (!row) return std::optional<T>();
  ASSIGN_OR_RETURN(T value, read(statement));
  return std::optional<T>(std::move(value));
}

Result<bool> Exists(SqliteConnection& connection, std::string_view sql, std::string_view first,
                    std::string_view second = {}) {
  ASSIGN_OR_RETURN(auto statement, connection.Prepare(sql));
  statement->Bind(1, first);
  if (!second.empty()) statement->Bind(2, second);
  return statement->Step();
}

Status BumpGeneration(SqliteConnection& connection) {
  ASSIGN_OR_RETURN(auto statement,
                   connection.Prepare("UPDATE generation SET value = value + 1 WHERE id = 1"));
  return statement->Run();
}

Status Migrate(SqliteConnection& connection) {
  return InTransaction(connection, [&]() -> Status {
    RETURN_IF_ERROR(connection.Execute(internal::kCreateSchemaVersionTable));
    ASSIGN_OR_RETURN(auto current,
                     connection.Prepare("SELECT COALESCE(MAX(version), 0) FROM schema_version"));
    ASSIGN_OR_RETURN(const bool row, current->Step());
    const int64_t version = row ? current->Int(0) : 0;
    current.reset();
    if (version > internal::LatestSchemaVersion()) {
      return FailedPrecondition(
          "the store's schema is version {}, newer than this build knows ({}): run a newer "
          "Rampart",
          version, internal::LatestSchemaVersion());
    }
    for (const internal::Migration& migration : internal::Migrations()) {
      if (migration.version <= version) continue;
      RETURN_IF_ERROR(connection.Execute(migration.sql)
                          .WithContext(fmt::format("schema migration {}", migration.version)));
      ASSIGN_OR_RETURN(auto record,
                       connection.Prepare("INSERT INTO schema_version (version, description, "
                                          "applied_unix) VALUES (?1, ?2, ?3)"));
      RETURN_IF_ERROR(record->Bind(1, int64_t{migration.version})
                          .Bind(2, migration.description)
                          .Bind(3, internal::NowUnix())
                          .Run());
    }
    return Status::Ok();
  });
}

constexpr std::string_view kFileColumns =
    "id, tenant, filename, purpose, bytes, created_unix, sealing";

class SqliteStore final : public Store {
 public:
  SqliteStore(std::string path, std::unique_ptr<SqliteConnection> writer,
              std::unique_ptr<SqliteConnection> reader)
      : path_(std::move(path)), writer_(std::move(writer)), reader_(std::move(reader)) {}

  std::string Describe() const override { return "sqlite:" + path_; }

  Status CreateTenant(const Tenant& tenant) override {
    RETURN_IF_ERROR(internal::ValidateTenant(tenant));
    return Write([&](SqliteConnection& connection) -> Status {
      ASSIGN_OR_RETURN(const bool taken,
                       Exists(connection, "SELECT 1 FROM tenants WHERE name = ?1", tenant.name));
      if (taken) return AlreadyExists("tenant '{}' already exists", tenant.name);
      ASSIGN_OR_RETURN(auto insert, connection.Prepare("INSERT INTO tenants (name, attributes, "
                                                       "created_unix) VALUES (?1, ?2, ?3)"));
      RETURN_IF_ERROR(insert->Bind(1, tenant.name)
                          .Bind(2, internal::EncodeAttributes(tenant.attributes))
                          .Bind(3, internal::NowUnix())
                          .Run());
      return BumpGeneration(connection);
    });
  }

  Result<std::optional<Tenant>> GetTenant(const std::string& name) override {
    return Read<std::optional<Tenant>>([&](SqliteConnection& connection) {
      return Query(connection,
                   fmt::format("SELECT {} FROM tenants WHERE name = ?1", kTenantColumns), {name},
                   [](Statement& s) { return ReadOne<Tenant>(s, ReadTenant); });
    });
  }

  Result<std::vector<Tenant>> ListTenants() override {
    return Read<std::vector<Tenant>>([&](SqliteConnection& connection) {
      return Query(connection, fmt::format("SELECT {} FROM tenants ORDER BY name", kTenantColumns),
                   {}, [](Statement& s) { return ReadAll<Tenant>(s, ReadTenant); });
    });
  }

  Status DeleteTenant(const std::string& name) override {
    return Write([&](SqliteConnection& connection) -> Status {
      ASSIGN_OR_RETURN(const bool found,
                       Exists(connection, "SELECT 1 FROM tenants WHERE name = ?1", name));
      if (!found) return NotFound("tenant '{}' does not exist", name);
      ASSIGN_OR_RETURN(const bool principals,
                       Exists(connection, "SELECT 1 FROM principals WHERE tenant = ?1", name));
      ASSIGN_OR_RETURN(
          const bool keys,
          Exists(connection, "SELECT 1 FROM api_keys WHERE tenant = ?1 AND revoked_unix = 0",
                 name));
      if (principals || keys) {
        return FailedPrecondition("tenant '{}' still has principals or live API keys", name);
      }
      ASSIGN_OR_RETURN(auto keys_gone,
                       connection.Prepare("DELETE FROM api_keys WHERE tenant = ?1"));
      RETURN_IF_ERROR(keys_gone->Bind(1, name).Run());
      ASSIGN_OR_RETURN(auto erase, connection.Prepare("DELETE FROM tenants WHERE name = ?1"));
      RETURN_IF_ERROR(erase->Bind(1, name).Run());
      return BumpGeneration(connection);
    });
  }

  Status PutPrincipal(const Principal& principal) override {
    RETURN_IF_ERROR(internal::ValidatePrincipal(principal));
    return Write([&](SqliteConnection& connection) -> Status {
      ASSIGN_OR_RETURN(
          const bool tenant,
          Exists(connection, "SELECT 1 FROM tenants WHERE name = ?1", principal.tenant));
      if (!tenant) return NotFound("tenant '{}' does not exist", principal.tenant);
      ASSIGN_OR_RETURN(
          auto upsert,
          connection.Prepare(
              "INSERT INTO principals (tenant, name, roles, attributes, disabled, created_unix) "
              "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (tenant, name) DO UPDATE SET "
              "roles = excluded.roles, attributes = excluded.attributes, "
              "disabled = excluded.disabled"));
      RETURN_IF_ERROR(upsert->Bind(1, principal.tenant)
                          .Bind(2, principal.name)
                          .Bind(3, internal::EncodeRoles(principal.roles))
                          .Bind(4, internal::EncodeAttributes(principal.attributes))
                          .Bind(5, int64_t{principal.disabled ? 1 : 0})
                          .Bind(6, internal::NowUnix())
                          .Run());
      return BumpGeneration(connection);
    });
  }

  Result<std::optional<Principal>> GetPrincipal(const std::string& tenant,
                                                const std::string& name) override {
    return Read<std::optional<Principal>>([&](SqliteConnection& connection) {
      return Query(connection,
                   fmt::format("SELECT {} FROM principals WHERE tenant = ?1 AND name = ?2",
                               kPrincipalColumns),
                   {tenant, name},
                   [](Statement& s) { return ReadOne<Principal>(s, ReadPrincipal); });
    });
  }

  Result<std::vector<Principal>> ListPrincipals(const std::string& tenant) override {
    return Read<std::vector<Principal>>([&](SqliteConnection& connection) {
      const auto read = [](Statement& s) { return ReadAll<Principal>(s, ReadPrincipal); };
      if (tenant.empty()) {
        return Query(
            connection,
            fmt::format("SELECT {} FROM principals ORDER BY tenant, name", kPrincipalColumns), {},
            read);
      }
      return Query(connection,
                   fmt::format("SELECT {} FROM principals WHERE tenant = ?1 ORDER BY name",
                               kPrincipalColumns),
                   {tenant}, read);
    });
  }

  Status DeletePrincipal(const std::string& tenant, const std::string& name) override {
    const int64_t now = internal::NowUnix();
    return Write([&](SqliteConnection& connection) -> Status {
      ASSIGN_OR_RETURN(
          auto erase, connection.Prepare("DELETE FROM principals WHERE tenant = ?1 AND name = ?2"));
      RETURN_IF_ERROR(erase->Bind(1, tenant).Bind(2, name).Run());
      if (connection.Changes() == 0) {
        return NotFound("principal '{}' of tenant '{}' does not exist", name, tenant);
      }
      ASSIGN_OR_RETURN(auto revoke,
                       connection.Prepare("UPDATE api_keys SET revoked_unix = ?3 WHERE tenant = ?1 "
                                          "AND principal = ?2 AND revoked_unix = 0"));
      RETURN_IF_ERROR(revoke->Bind(1, tenant).Bind(2, name).Bind(3, now).Run());
      return BumpGeneration(connection);
    });
  }

  Status CreateApiKey(const ApiKey& key) override {
    RETURN_IF_ERROR(internal::ValidateApiKey(key));
    const int64_t now = internal::NowUnix();
    return Write([&](SqliteConnection& connection) -> Status {
      ASSIGN_OR_RETURN(const bool tenant,
                       Exists(connection, "SELECT 1 FROM tenants WHERE name = ?1", key.tenant));
      if (!tenant) return NotFound("tenant '{}' does not exist", key.tenant);
      ASSIGN_OR_RETURN(const bool taken,
                       Exists(connection, "SELECT 1 FROM api_keys WHERE id = ?1", key.id));
      if (taken) return AlreadyExists("API key '{}' already exists", key.id);
      ASSIGN_OR_RETURN(
          auto principal,
          connection.Prepare("INSERT INTO principals (tenant, name, roles, attributes, disabled, "
                             "created_unix) VALUES (?1, ?2, '[]', '{}', 0, ?3) "
                             "ON CONFLICT (tenant, name) DO NOTHING"));
      RETURN_IF_ERROR(principal->Bind(1, key.tenant).Bind(2, key.principal).Bind(3, now).Run());
      ASSIGN_OR_RETURN(auto insert,
                       connection.Prepare(fmt::format(
                           "INSERT INTO api_keys ({}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
                           "?9, ?10, ?11)",
                           kKeyColumns)));
      RETURN_IF_ERROR(insert->Bind(1, key.id)
                          .Bind(2, key.tenant)
                          .Bind(3, key.principal)
                          .Bind(4, key.name)
                          .Bind(5, internal::EncodeRoles(key.roles))
                          .Bind(6, key.salt)
                          .Bind(7, key.hash)
                          .Bind(8, key.created_unix != 0 ? key.created_unix : now)
                          .Bind(9, key.expires_unix)
                          .Bind(10, key.revoked_unix)
                          .Bind(11, key.last_used_unix)
                          .Run());
      return BumpGeneration(connection);
    });
  }

  Result<std::optional<ApiKey>> GetApiKey(const std::string& id) override {
    return Read<std::optional<ApiKey>>([&](SqliteConnection& connection) {
      return Query(connection, fmt::format("SELECT {} FROM api_keys WHERE id = ?1", kKeyColumns),
                   {id}, [](Statement& s) { return ReadOne<ApiKey>(s, ReadKey); });
    });
  }

  Result<std::vector<ApiKey>> ListApiKeys(const std::string& tenant) override {
    return Read<std::vector<ApiKey>>([&](SqliteConnection& connection) {
      const auto read = [](Statement& s) { return ReadAll<ApiKey>(s, ReadKey); };
      if (tenant.empty()) {
        return Query(connection,
                     fmt::format("SELECT {} FROM api_keys ORDER BY created_unix, id", kKeyColumns),
                     {}, read);
      }
      return Query(connection,
                   fmt::format("SELECT {} FROM api_keys WHERE tenant = ?1 "
                               "ORDER BY created_unix, id",
                               kKeyColumns),
                   {tenant}, read);
    });
  }

  Status RevokeApiKey(const std::string& id, int64_t now_unix) override {
    return Write([&](SqliteConnection& connection) -> Status {
      ASSIGN_OR_RETURN(auto revoke, connection.Prepare("UPDATE api_keys SET revoked_unix = ?2 "
                                                       "WHERE id = ?1 AND revoked_unix = 0"));
      RETURN_IF_ERROR(revoke->Bind(1, id).Bind(2, now_unix).Run());
      if (connection.Changes() > 0) return BumpGeneration(connection);
      ASSIGN_OR_RETURN(const bool found,
                       Exists(connection, "SELECT 1 FROM api_keys WHERE id = ?1", id));
      if (!found) return NotFound("API key '{}' does not exist", id);
      return Status::Ok();  // revoked before: the first time stays
    });
  }

  Status TouchApiKeys(const std::map<std::string, int64_t>& last_used_unix) override {
    if (last_used_unix.empty()) return Status::Ok();
    return Write([&](SqliteConnection& connection) -> Status {
      for (const auto& [id, used] : last_used_unix) {
        ASSIGN_OR_RETURN(auto touch, connection.Prepare("UPDATE api_keys SET last_used_unix = ?2 "
                                                        "WHERE id = ?1 AND last_used_unix < ?2"));
        RETURN_IF_ERROR(touch->Bind(1, id).Bind(2, used).Run());
      }
      return Status::Ok();
    });
  }

  Result<BudgetLease> LeaseBudget(const std::string& key, int64_t window_start_unix, int64_t limit,
                                  int64_t want) override {
    RETURN_IF_ERROR(internal::ValidateLease(key, limit, want));
    BudgetLease lease;
    const Status leased = Write([&](SqliteConnection& connection) -> Status {
      // Keeps the window just before this one: a replica whose clock lags may still lease from
      // it, and must find it as it was rather than start it afresh.
      ASSIGN_OR_RETURN(
          auto drop,
          connection.Prepare("DELETE FROM budgets WHERE budget_key = ?1 AND window_start_unix < "
                             "(SELECT MAX(window_start_unix) FROM budgets WHERE budget_key = ?1 "
                             "AND window_start_unix < ?2)"));
      RETURN_IF_ERROR(drop->Bind(1, key).Bind(2, window_start_unix).Run());
      // The grant and the new total in one statement: SET's right-hand sides read the row as it
      // was, and the write lock is held, so no other lease interleaves.
      ASSIGN_OR_RETURN(auto upsert,
                       connection.Prepare(
                           "INSERT INTO budgets (budget_key, window_start_unix, used, last_grant) "
                           "VALUES (?1, ?2, MIN(?4, ?3), MIN(?4, ?3)) "
                           "ON CONFLICT (budget_key, window_start_unix) DO UPDATE SET "
                           "used = budgets.used + MAX(0, MIN(?4, ?3 - budgets.used)), "
                           "last_grant = MAX(0, MIN(?4, ?3 - budgets.used)) "
                           "RETURNING used, last_grant"));
      upsert->Bind(1, key).Bind(2, window_start_unix).Bind(3, limit).Bind(4, want);
      ASSIGN_OR_RETURN(const bool row, upsert->Step());
      if (!row) return Internal("budget '{}': the lease returned no row", key);
      lease.used = upsert->Int(0);
      lease.granted = upsert->Int(1);
      return upsert->Run();
    });
    if (!leased.ok()) return leased;
    return lease;
  }

  Result<int64_t> Generation() override {
    return Read<int64_t>([&](SqliteConnection& connection) -> Result<int64_t> {
      ASSIGN_OR_RETURN(auto statement,
                       connection.Prepare("SELECT value FROM generation WHERE id = 1"));
      ASSIGN_OR_RETURN(const bool row, statement->Step());
      if (!row) return Internal("the store has no generation row");
      return statement->Int(0);
    });
  }

  Result<std::vector<KeyVersion>> ListKeyVersions() override {
    return Read<std::vector<KeyVersion>>([&](SqliteConnection& connection) {
      return Query(
          connection,
          fmt::format("SELECT {} FROM key_versions ORDER BY name, version", kKeyVersionColumns), {},
          [](Statement& s) { return ReadAll<KeyVersion>(s, ReadKeyVersion); });
    });
  }

  Status AddKeyVersion(const KeyVersion& version) override {
    RETURN_IF_ERROR(internal::ValidateKeyVersion(version));
    const int64_t now = internal::NowUnix();
    return Write([&](SqliteConnection& connection) -> Status {
      ASSIGN_OR_RETURN(auto insert, connection.Prepare(fmt::format(
                                        "INSERT INTO key_versions ({}) VALUES (?1, ?2, ?3, ?4, "
                                        "?5, ?6) ON CONFLICT (name, version) DO NOTHING",
                                        kKeyVersionColumns)));
      RETURN_IF_ERROR(insert->Bind(1, version.name)
                          .Bind(2, int64_t{version.version})
                          .Bind(3, version.purpose)
                          .Bind(4, version.algorithm)
                          .Bind(5, internal::EncodeBytes(version.wrapped_material))
                          .Bind(6, version.created_unix != 0 ? version.created_unix : now)
                          .Run());
      if (connection.Changes() == 0) {
        return AlreadyExists("key '{}' version {} already exists", version.name, version.version);
      }
      return Status::Ok();
    });
  }

  Result<std::vector<std::pair<std::string, int>>> ListMinDecryptionVersions() override {
    using Rows = std::vector<std::pair<std::string, int>>;
    return Read<Rows>([&](SqliteConnection& connection) {
      return Query(connection,
                   "SELECT name, min_decryption_version FROM key_min_versions ORDER BY name", {},
                   [](Statement& s) {
                     return ReadAll<std::pair<std::string, int>>(
                         s, [](const Statement& row) -> Result<std::pair<std::string, int>> {
                           return std::pair(row.Text(0), static_cast<int>(row.Int(1)));
                         });
                   });
    });
  }

  Status RaiseMinDecryptionVersion(const std::string& name, int version) override {
    if (version < 1) return InvalidArgument("a minimum decryption version is >= 1");
    return Write([&](SqliteConnection& connection) -> Status {
      ASSIGN_OR_RETURN(
          auto upsert,
          connection.Prepare("INSERT INTO key_min_versions (name, min_decryption_version) VALUES "
                             "(?1, ?2) ON CONFLICT (name) DO UPDATE SET min_decryption_version = "
                             "MAX(key_min_versions.min_decryption_version, "
                             "excluded.min_decryption_version)"));
      return upsert->Bind(1, name).Bind(2, int64_t{version}).Run();
    });
  }

  Status CreateSealedSecret(const SealedSecret& secret) override {
    RETURN_IF_ERROR(internal::ValidateSealedSecretName(secret.name));
    RETURN_IF_ERROR(internal::ValidateSealedBytes("the envelope", secret.envelope));
    const int64_t now = internal::NowUnix();
    return Write([&](SqliteConnection& connection) -> Status {
      ASSIGN_OR_RETURN(auto insert,
                       connection.Prepare("INSERT INTO sealed_secrets (name, envelope, "
                                          "updated_unix) VALUES (?1, ?2, ?3) "
                                          "ON CONFLICT (name) DO NOTHING"));
      RETURN_IF_ERROR(insert->Bind(1, secret.name)
                          .Bind(2, internal::EncodeBytes(secret.envelope))
                          .Bind(3, now)
                          .Run());
      if (connection.Changes() == 0) {
        return AlreadyExists("sealed secret '{}' already exists", secret.name);
      }
      return Status::Ok();
    });
  }

  Result<std::optional<SealedSecret>> GetSealedSecret(const std::string& name) override {
    return Read<std::optional<SealedSecret>>([&](SqliteConnection& connection) {
      return Query(connection,
                   "SELECT name, envelope, updated_unix FROM sealed_secrets WHERE name = ?1",
                   {name}, [](Statement& s) { return ReadOne<SealedSecret>(s, ReadSealedSecret); });
    });
  }

  Result<std::vector<SealedSecret>> ListSealedSecrets() override {
    return Read<std::vector<SealedSecret>>([&](SqliteConnection& connection) {
      return Query(connection,
                   "SELECT name, envelope, updated_unix FROM sealed_secrets ORDER BY name", {},
                   [](Statement& s) { return ReadAll<SealedSecret>(s, ReadSealedSecret); });
    });
  }

  Status ReplaceSealedSecret(const std::string& name, const std::string& expected,
                             const std::string& envelope) override {
    RETURN_IF_ERROR(internal::ValidateSealedBytes("the envelope", envelope));
    const int64_t now = internal::NowUnix();
    return Write([&](SqliteConnection& connection) -> Status {
      ASSIGN_OR_RETURN(auto update,
                       connection.Prepare("UPDATE sealed_secrets SET envelope = ?3, updated_unix = "
                                          "?4 WHERE name = ?1 AND envelope = ?2"));
      RETURN_IF_ERROR(update->Bind(1, name)
                          .Bind(2, internal::EncodeBytes(expected))
                          .Bind(3, internal::EncodeBytes(envelope))
                          .Bind(4, now)
                          .Run());
      if (connection.Changes() > 0) return Status::Ok();
      ASSIGN_OR_RETURN(const bool found,
                       Exists(connection, "SELECT 1 FROM sealed_secrets WHERE name = ?1", name));
      if (!found) return NotFound("sealed secret '{}' does not exist", name);
      return FailedPrecondition("sealed secret '{}' changed meanwhile", name);
    });
  }

  Status AppendAuditRows(const std::vector<AuditRow>& rows) override {
    return Write([&](SqliteConnection& c) { return internal::SqliteAppendAuditRows(c, rows); });
  }
  Status AppendAuditBatch(const AuditBatch& batch) override {
    return Write([&](SqliteConnection& c) { return internal::SqliteAppendAuditBatch(c, batch); });
  }
  Result<std::vector<AuditRow>> ReadAuditRows(int64_t after_sequence, int64_t limit) override {
    return Read<std::vector<AuditRow>>([&](SqliteConnection& c) {
      return internal::SqliteReadAuditRows(c, after_sequence, limit);
    });
  }
  Result<std::vector<AuditRow>> QueryAuditRows(const AuditQuery& query) override {
    return Read<std::vector<AuditRow>>(
        [&](SqliteConnection& c) { return internal::SqliteQueryAuditRows(c, query); });
  }
  Result<int64_t> LastAuditSequence() override {
    return Read<int64_t>([&](SqliteConnection& c) { return internal::SqliteLastAuditSequence(c); });
  }
  Status PutAuditCheckpoint(const AuditCheckpointRow& checkpoint,
                            const std::optional<AuditEpochRow>& closes) override {
    return Write([&](SqliteConnection& c) {
      return internal::SqlitePutAuditCheckpoint(c, checkpoint, closes);
    });
  }
  Result<std::vector<AuditCheckpointRow>> ListAuditCheckpoints(int64_t from_size) override {
    return Read<std::vector<AuditCheckpointRow>>([&](SqliteConnection& c) {
      return internal::SqliteListAuditCheckpoints(c, from_size, /*last=*/false);
    });
  }
  Result<std::optional<AuditCheckpointRow>> LastAuditCheckpoint() override {
    return Read<std::optional<AuditCheckpointRow>>(
        [&](SqliteConnection& c) -> Result<std::optional<AuditCheckpointRow>> {
          ASSIGN_OR_RETURN(auto last, internal::SqliteListAuditCheckpoints(c, 0, /*last=*/true));
          if (last.empty()) return std::optional<AuditCheckpointRow>();
          return std::optional<AuditCheckpointRow>(std::move(last.front()));
        });
  }
  Result<std::vector<AuditEpochRow>> ListAuditEpochs() override {
    return Read<std::vector<AuditEpochRow>>(
        [&](SqliteConnection& c) { return internal::SqliteListAuditEpochs(c); });
  }
  Status PruneAuditEpoch(int64_t epoch) override {
    return Write([&](SqliteConnection& c) { return internal::SqlitePruneAuditEpoch(c, epoch); });
  }

  Status CreateFile(const StoredFile& file) override {
    RETURN_IF_ERROR(internal::ValidateStoredFile(file));
    const int64_t created = file.created_unix != 0 ? file.created_unix : internal::NowUnix();
    return Write([&](SqliteConnection& connection) -> Status {
      ASSIGN_OR_RETURN(auto insert,
                       connection.Prepare(fmt::format("INSERT INTO files ({}) VALUES (?1, ?2, ?3, "
                                                      "?4, ?5, ?6, ?7) ON CONFLICT (id) DO NOTHING",
                                                      kFileColumns)));
      RETURN_IF_ERROR(insert->Bind(1, file.id)
                          .Bind(2, file.tenant)
                          .Bind(3, file.filename)
                          .Bind(4, file.purpose)
                          .Bind(5, file.bytes)
                          .Bind(6, created)
                          .Bind(7, file.sealing)
                          .Run());
      if (connection.Changes() == 0) return AlreadyExists("file '{}' already exists", file.id);
      return Status::Ok();
    });
  }

  Result<std::optional<StoredFile>> GetFile(const std::string& tenant,
                                            const std::string& id) override {
    return Read<std::optional<StoredFile>>([&](SqliteConnection& connection) {
      return Query(connection,
                   fmt::format("SELECT {} FROM files WHERE id = ?1 AND tenant = ?2", kFileColumns),
                   {id, tenant},
                   [](Statement& s) { return ReadOne<StoredFile>(s, ReadStoredFile); });
    });
  }

  Result<std::vector<StoredFile>> ListFiles(const FileQuery& query) override {
    RETURN_IF_ERROR(internal::ValidateFileQuery(query));
    const std::string sql = fmt::format(
        "SELECT {0} FROM files WHERE tenant = ?1 AND (?2 = '' OR purpose = ?2) AND (?3 = '' OR "
        "(created_unix, id) {1} (SELECT created_unix, id FROM files WHERE tenant = ?1 AND id = "
        "?3)) ORDER BY created_unix {2}, id {2} LIMIT ?4",
        kFileColumns, query.descending ? "<" : ">", query.descending ? "DESC" : "ASC");
    return Read<std::vector<StoredFile>>(
        [&](SqliteConnection& connection) -> Result<std::vector<StoredFile>> {
          ASSIGN_OR_RETURN(auto statement, connection.Prepare(sql));
          statement->Bind(1, query.tenant)
              .Bind(2, query.purpose)
              .Bind(3, query.after)
              .Bind(4, query.limit);
          return ReadAll<StoredFile>(*statement, ReadStoredFile);
        });
  }

  Status DeleteFile(const std::string& tenant, const std::string& id) override {
    return Write([&](SqliteConnection& connection) -> Status {
      ASSIGN_OR_RETURN(auto remove,
                       connection.Prepare("DELETE FROM files WHERE id = ?1 AND tenant = ?2"));
      RETURN_IF_ERROR(remove->Bind(1, id).Bind(2, tenant).Run());
      if (connection.Changes() == 0) return NotFound("file '{}' does not exist", id);
      return Status::Ok();
    });
  }

 protected:
  Status WithSql(bool write, const std::function<Status(internal::SqlRunner&)>& body) override {
    if (write) {
      return Write([&](SqliteConnection& connection) {
        internal::SqliteRunner runner(connection);
        return body(runner);
      });
    }
    std::lock_guard lock(read_mutex_);
    internal::SqliteRunner runner(*reader_);
    return body(runner);
  }

 private:
  template <typename Body>
  Status Write(Body&& body) {
    std::lock_guard lock(write_mutex_);
    return InTransaction(*writer_, [&] { return body(*writer_); });
  }

  template <typename T, typename Body>
  Result<T> Read(Body&& body) {
    std::lock_guard lock(read_mutex_);
    return body(*reader_);
  }

  // Prepares `sql`, binds `parameters` as ?1, ?2, ... and hands the statement to `read`.
  template <typename Reader>
  static auto Query(SqliteConnection& connection, const std::string& sql,
                    std::initializer_list<std::string_view> parameters, Reader read)
      -> decltype(read(std::declval<Statement&>())) {
    ASSIGN_OR_RETURN(auto statement, connection.Prepare(sql));
    int index = 1;
    for (const std::string_view parameter : parameters) statement->Bind(index++, parameter);
    return read(*statement);
  }

  const std::string path_;
  std::mutex write_mutex_;
  std::unique_ptr<SqliteConnection> writer_;  // guarded by write_mutex_
  std::mutex read_mutex_;
  std::unique_ptr<SqliteConnection> reader_;  // guarded by read_mutex_
};

// Creates the database file readable by its owner only (it holds key hashes) unless it exists;
// SQLite gives its -wal and -shm files the database's mode.
Status CreateDatabaseFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0) {
    ::close(fd);
    return Status::Ok();
  }
  if (errno == EEXIST) return Status::Ok();
  return Unavailable("{}", std::strerror(errno));
}

}  // namespace

Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "rampart.db").string();
  const auto unavailable = [&](const Status& status) {
    return Status(
        status.code() == StatusCode::kFailedPrecondition ? status.code() : StatusCode::kUnavailable,
        fmt::format("cannot open the store at {}: {}", path, status.message()));
  };
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return unavailable(Unavailable("{}", error.message()));
  if (Status created = CreateDatabaseFile(path); !created.ok()) return unavailable(created);
  auto writer = SqliteConnection::Open(path, kBusyTimeoutMs);
  if (!writer.ok()) return unavailable(writer.status());
  if (Status migrated = Migrate(**writer); !migrated.ok()) return unavailable(migrated);
  auto reader = SqliteConnection::Open(path, kBusyTimeoutMs);
  if (!reader.ok()) return unavailable(reader.status());
  return std::unique_ptr<Store>(
      std::make_unique<SqliteStore>(path, std::move(*writer), std::move(*reader)));
}

}  // namespace rampart::store
