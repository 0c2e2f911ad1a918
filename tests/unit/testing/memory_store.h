#pragma once

// An in-memory store::Store for tests of what sits on top of a store (API key tables, the
// admin API): the interface's contract (errors, ordering, generations that move on changes and
// not on touches) without a database. Thread-safe. It can be told to fail, to test how callers
// ride out an unreachable database, and it counts the calls that tests reason about.

#include <atomic>
#include <map>
#include <mutex>

#include "store/store.h"

namespace rampart::testing {

class MemoryStore : public store::Store {
 public:
  std::string Describe() const override { return "memory:"; }

  Status CreateTenant(const store::Tenant& tenant) override;
  Result<std::optional<store::Tenant>> GetTenant(const std::string& name) override;
  Result<std::vector<store::Tenant>> ListTenants() override;
  Status DeleteTenant(const std::string& name) override;

  Status PutPrincipal(const store::Principal& principal) override;
  Result<std::optional<store::Principal>> GetPrincipal(const std::string& tenant,
                                                       const std::string& name) override;
  Result<std::vector<store::Principal>> ListPrincipals(const std::string& tenant) override;
  Status DeletePrincipal(const std::string& tenant, const std::string& name) override;

  Status CreateApiKey(const store::ApiKey& key) override;
  Result<std::optional<store::ApiKey>> GetApiKey(const std::string& id) override;
  Result<std::vector<store::ApiKey>> ListApiKeys(const std::string& tenant) override;
  Status RevokeApiKey(const std::string& id, int64_t now_unix) override;
  Status TouchApiKeys(const std::map<std::string, int64_t>& last_used_unix) override;

  Result<store::BudgetLease> LeaseBudget(const std::string& key, int64_t window_start_unix,
                                         int64_t limit, int64_t want) override;
  Result<int64_t> Generation() override;

  Result<std::vector<store::KeyVersion>> ListKeyVersions() override;
  Status AddKeyVersion(const store::KeyVersion& version) override;
  Result<std::vector<std::pair<std::string, int>>> ListMinDecryptionVersions() override;
  Status RaiseMinDecryptionVersion(const std::string& name, int version) override;
  Status CreateSealedSecret(const store::SealedSecret& secret) override;
  Result<std::optional<store::SealedSecret>> GetSealedSecret(const std::string& name) override;
  Result<std::vector<store::SealedSecret>> ListSealedSecrets() override;
  Status ReplaceSealedSecret(const std::string& name, const std::string& expected,
                             const std::string& envelope) override;

  // While set, every call answers Unavailable "store unavailable (test)".
  void SetUnavailable(bool unavailable) { unavailable_ = unavailable; }
  int64_t touch_calls() const { return touch_calls_; }
  int64_t list_key_calls() const { return list_key_calls_; }

 private:
  Status CheckAvailable() const;

  mutable std::mutex mutex_;
  int64_t generation_ = 1;
  std::map<std::string, store::Tenant> tenants_;
  std::map<std::pair<std::string, std::string>, store::Principal> principals_;
  std::map<std::string, store::ApiKey> keys_;
  std::map<std::pair<std::string, int64_t>, int64_t> budgets_;  // (key, window) -> used
  std::map<std::pair<std::string, int>, store::KeyVersion> key_versions_;
  std::map<std::string, int> min_versions_;
  std::map<std::string, store::SealedSecret> sealed_secrets_;
  std::atomic<bool> unavailable_{false};
  std::atomic<int64_t> touch_calls_{0};
  std::atomic<int64_t> list_key_calls_{0};
};

}  // namespace rampart::testing
