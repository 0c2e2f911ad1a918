#include "testing/memory_store.h"

#include <algorithm>
#include <ctime>
#include <limits>
#include <regex>

namespace rampart::testing {

namespace {

// The names store.h allows.
bool ValidTenantName(const std::string& name) {
  static const std::regex kPattern("[A-Za-z0-9_.-]{1,64}");
  return std::regex_match(name, kPattern);
}
bool ValidPrincipalName(const std::string& name) {
  static const std::regex kPattern("[A-Za-z0-9_.@:/-]{1,128}");
  return std::regex_match(name, kPattern);
}

}  // namespace

Status MemoryStore::CheckAvailable() const {
  if (unavailable_) return Unavailable("store unavailable (test)");
  return Status::Ok();
}

Status MemoryStore::CreateTenant(const store::Tenant& tenant) {
  RETURN_IF_ERROR(CheckAvailable());
  if (!ValidTenantName(tenant.name))
    return InvalidArgument("invalid tenant name '{}'", tenant.name);
  std::lock_guard lock(mutex_);
  store::Tenant record = tenant;
  record.created_unix = std::time(nullptr);
  if (!tenants_.emplace(tenant.name, std::move(record)).second) {
    return AlreadyExists("tenant '{}' already exists", tenant.name);
  }
  ++generation_;
  return Status::Ok();
}

Result<std::optional<store::Tenant>> MemoryStore::GetTenant(const std::string& name) {
  RETURN_IF_ERROR(CheckAvailable());
  std::lock_guard lock(mutex_);
  const auto found = tenants_.find(name);
  if (found == tenants_.end()) return std::optional<store::Tenant>();
  return std::optional<store::Tenant>(found->second);
}

Result<std::vector<store::Tenant>> MemoryStore::ListTenants() {
  RETURN_IF_ERROR(CheckAvailable());
  std::lock_guard lock(mutex_);
  std::vector<store::Tenant> tenants;
  for (const auto& [name, tenant] : tenants_) tenants.push_back(tenant);
  return tenants;
}

Status MemoryStore::DeleteTenant(const std::string& name) {
  RETURN_IF_ERROR(CheckAvailable());
  std::lock_guard lock(mutex_);
  if (!tenants_.contains(name)) return NotFound("tenant '{}' does not exist", name);
  for (const auto& [key, principal] : principals_) {
    if (key.first == name) return FailedPrecondition("tenant '{}' still has principals", name);
  }
  for (const auto& [id, key] : keys_) {
    if (key.tenant == name) return FailedPrecondition("tenant '{}' still has API keys", name);
  }
  tenants_.erase(name);
  ++generation_;
  return Status::Ok();
}

Status MemoryStore::PutPrincipal(const store::Principal& principal) {
  RETURN_IF_ERROR(CheckAvailable());
  if (!ValidPrincipalName(principal.name)) {
    return InvalidArgument("invalid principal name '{}'", principal.name);
  }
  std::lock_guard lock(mutex_);
  if (!tenants_.contains(principal.tenant)) {
    return NotFound("tenant '{}' does not exist", principal.tenant);
  }
  store::Principal& record = principals_[{principal.tenant, principal.name}];
  const int64_t created = record.created_unix != 0 ? record.created_unix : std::time(nullptr);
  record = principal;
  record.created_unix = created;
  ++generation_;
  return Status::Ok();
}

Result<std::optional<store::Principal>> MemoryStore::GetPrincipal(const std::string& tenant,
                                                                  const std::string& name) {
  RETURN_IF_ERROR(CheckAvailable());
  std::lock_guard lock(mutex_);
  const auto found = principals_.find({tenant, name});
  if (found == principals_.end()) return std::optional<store::Principal>();
  return std::optional<store::Principal>(found->second);
}

Result<std::vector<store::Principal>> MemoryStore::ListPrincipals(const std::string& tenant) {
  RETURN_IF_ERROR(CheckAvailable());
  std::lock_guard lock(mutex_);
  std::vector<store::Principal> principals;
  for (const auto& [key, principal] : principals_) {
    if (tenant.empty() || key.first == tenant) principals.push_back(principal);
  }
  return principals;
}

Status MemoryStore::DeletePrincipal(const std::string& tenant, const std::string& name) {
  RETURN_IF_ERROR(CheckAvailable());
  std::lock_guard lock(mutex_);
  if (principals_.erase({tenant, name}) == 0) {
    return NotFound("principal '{}' of tenant '{}' does not exist", name, tenant);
  }
  const int64_t now = std::time(nullptr);
  for (auto& [id, key] : keys_) {
    if (key.tenant == tenant && key.principal == name && key.revoked_unix == 0) {
      key.revoked_unix = now;
    }
  }
  ++generation_;
  return Status::Ok();
}

Status MemoryStore::CreateApiKey(const store::ApiKey& key) {
  RETURN_IF_ERROR(CheckAvailable());
  if (key.id.empty()) return InvalidArgument("an API key needs an id");
  if (!ValidPrincipalName(key.principal)) {
    return InvalidArgument("invalid principal name '{}'", key.principal);
  }
  std::lock_guard lock(mutex_);
  if (keys_.contains(key.id)) return AlreadyExists("API key '{}' already exists", key.id);
  if (!tenants_.contains(key.tenant)) return NotFound("tenant '{}' does not exist", key.tenant);
  auto [principal, created] = principals_.try_emplace({key.tenant, key.principal});
  if (created) {
    principal->second.tenant = key.tenant;
    principal->second.name = key.principal;
    principal->second.created_unix = std::time(nullptr);
  }
  keys_.emplace(key.id, key);
  ++generation_;
  return Status::Ok();
}

Result<std::optional<store::ApiKey>> MemoryStore::GetApiKey(const std::string& id) {
  RETURN_IF_ERROR(CheckAvailable());
  std::lock_guard lock(mutex_);
  const auto found = keys_.find(id);
  if (found == keys_.end()) return std::optional<store::ApiKey>();
  return std::optional<store::ApiKey>(found->second);
}

Result<std::vector<store::ApiKey>> MemoryStore::ListApiKeys(const std::string& tenant) {
  RETURN_IF_ERROR(CheckAvailable());
  ++list_key_calls_;
  std::lock_guard lock(mutex_);
  std::vector<store::ApiKey> keys;
  for (const auto& [id, key] : keys_) {
    if (tenant.empty() || key.tenant == tenant) keys.push_back(key);
  }
  std::stable_sort(keys.begin(), keys.end(), [](const store::ApiKey& a, const store::ApiKey& b) {
    return a.created_unix < b.created_unix;
  });
  return keys;
}

Status MemoryStore::RevokeApiKey(const std::string& id, int64_t now_unix) {
  RETURN_IF_ERROR(CheckAvailable());
  std::lock_guard lock(mutex_);
  const auto found = keys_.find(id);
  if (found == keys_.end()) return NotFound("API key '{}' does not exist", id);
  if (found->second.revoked_unix == 0) {
    found->second.revoked_unix = now_unix;
    ++generation_;
  }
  return Status::Ok();
}

Status MemoryStore::TouchApiKeys(const std::map<std::string, int64_t>& last_used_unix) {
  RETURN_IF_ERROR(CheckAvailable());
  ++touch_calls_;
  std::lock_guard lock(mutex_);
  for (const auto& [id, used] : last_used_unix) {
    const auto found = keys_.find(id);
    if (found != keys_.end()) {
      found->second.last_used_unix = std::max(found->second.last_used_unix, used);
    }
  }
  return Status::Ok();
}

Result<store::BudgetLease> MemoryStore::LeaseBudget(const std::string& key,
                                                    int64_t window_start_unix, int64_t limit,
                                                    int64_t want) {
  RETURN_IF_ERROR(CheckAvailable());
  if (limit < 0 || want < 0) return InvalidArgument("negative budget limit or want");
  std::lock_guard lock(mutex_);
  // Older windows of this key are done with: drop them, as the real stores may.
  budgets_.erase(budgets_.lower_bound({key, std::numeric_limits<int64_t>::min()}),
                 budgets_.lower_bound({key, window_start_unix}));
  int64_t& used = budgets_[{key, window_start_unix}];
  const int64_t granted = std::clamp<int64_t>(limit - used, 0, want);
  used += granted;
  return store::BudgetLease{granted, used};
}

Result<int64_t> MemoryStore::Generation() {
  RETURN_IF_ERROR(CheckAvailable());
  std::lock_guard lock(mutex_);
  return generation_;
}

Result<std::vector<store::KeyVersion>> MemoryStore::ListKeyVersions() {
  RETURN_IF_ERROR(CheckAvailable());
  std::lock_guard lock(mutex_);
  std::vector<store::KeyVersion> versions;
  for (const auto& [id, version] : key_versions_) versions.push_back(version);
  return versions;
}

Status MemoryStore::AddKeyVersion(const store::KeyVersion& version) {
  RETURN_IF_ERROR(CheckAvailable());
  if (!ValidTenantName(version.name) || version.version < 1 || version.wrapped_material.empty() ||
      (version.purpose != "wrapping" && version.purpose != "signing")) {
    return InvalidArgument("invalid key version '{}' {}", version.name, version.version);
  }
  std::lock_guard lock(mutex_);
  store::KeyVersion record = version;
  if (record.created_unix == 0) record.created_unix = std::time(nullptr);
  if (!key_versions_.emplace(std::pair(version.name, version.version), std::move(record)).second) {
    return AlreadyExists("key '{}' version {} already exists", version.name, version.version);
  }
  return Status::Ok();
}

Result<std::vector<std::pair<std::string, int>>> MemoryStore::ListMinDecryptionVersions() {
  RETURN_IF_ERROR(CheckAvailable());
  std::lock_guard lock(mutex_);
  return std::vector<std::pair<std::string, int>>(min_versions_.begin(), min_versions_.end());
}

Status MemoryStore::RaiseMinDecryptionVersion(const std::string& name, int version) {
  RETURN_IF_ERROR(CheckAvailable());
  if (version < 1) return InvalidArgument("a minimum decryption version is >= 1");
  std::lock_guard lock(mutex_);
  int& current = min_versions_[name];
  current = std::max(current, version);
  return Status::Ok();
}

Status MemoryStore::CreateSealedSecret(const store::SealedSecret& secret) {
  RETURN_IF_ERROR(CheckAvailable());
  if (secret.name.empty() || secret.envelope.empty()) {
    return InvalidArgument("invalid sealed secret '{}'", secret.name);
  }
  std::lock_guard lock(mutex_);
  store::SealedSecret record = secret;
  record.updated_unix = std::time(nullptr);
  if (!sealed_secrets_.emplace(secret.name, std::move(record)).second) {
    return AlreadyExists("sealed secret '{}' already exists", secret.name);
  }
  return Status::Ok();
}

Result<std::optional<store::SealedSecret>> MemoryStore::GetSealedSecret(const std::string& name) {
  RETURN_IF_ERROR(CheckAvailable());
  std::lock_guard lock(mutex_);
  const auto found = sealed_secrets_.find(name);
  if (found == sealed_secrets_.end()) return std::optional<store::SealedSecret>();
  return std::optional<store::SealedSecret>(found->second);
}

Result<std::vector<store::SealedSecret>> MemoryStore::ListSealedSecrets() {
  RETURN_IF_ERROR(CheckAvailable());
  std::lock_guard lock(mutex_);
  std::vector<store::SealedSecret> secrets;
  for (const auto& [name, secret] : sealed_secrets_) secrets.push_back(secret);
  return secrets;
}

Status MemoryStore::ReplaceSealedSecret(const std::string& name, const std::string& expected,
                                        const std::string& envelope) {
  RETURN_IF_ERROR(CheckAvailable());
  if (envelope.empty()) return InvalidArgument("the envelope is empty");
  std::lock_guard lock(mutex_);
  const auto found = sealed_secrets_.find(name);
  if (found == sealed_secrets_.end()) return NotFound("sealed secret '{}' does not exist", name);
  if (found->second.envelope != expected) {
    return FailedPrecondition("sealed secret '{}' changed meanwhile", name);
  }
  found->second.envelope = envelope;
  found->second.updated_unix = std::time(nullptr);
  return Status::Ok();
}

}  // namespace rampart::testing
