#pragma once

// API keys: "rk_live_" + 12 base62 characters (the key's id, public, shown in lists) + "_" + 32
// base62 characters (the secret, ~190 random bits). The store keeps only a salted SHA-256 of the
// whole key; the key itself is shown once, when it is made.
//
// ApiKeyTable verifies keys on the request path from an in-memory snapshot of the store's keys,
// principals and tenants: Verify never touches the store and never blocks. A background thread
// reloads the snapshot when the store's Generation() moves (so keys made or revoked by the CLI,
// the admin API or another replica take effect within one poll period) and writes last-used
// times in batches.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "identity/identity.h"
#include "store/store.h"

namespace rampart::identity {

struct NewApiKey {
  std::string key;       // the whole key: give it to the caller once, never store or log it
  store::ApiKey record;  // id, salt, hash and the fields given; ready for Store::CreateApiKey
};

// Makes a key for `principal` of `tenant`. `expires_unix` 0 = never.
NewApiKey GenerateApiKey(std::string tenant, std::string principal, std::string name,
                         std::vector<std::string> roles, int64_t now_unix,
                         int64_t expires_unix = 0);

// Whether `text` looks like one of Rampart's keys ("rk_" prefix), without checking it.
bool LooksLikeApiKey(std::string_view text);

struct ApiKeyTableOptions {
  std::chrono::milliseconds poll_period{1000};  // Generation() polls and last-used writes
};

class ApiKeyTable {
 public:
  // Loads the snapshot now (an error here is a start-up error) and starts the background
  // thread. `store` must outlive the table.
  static Result<std::unique_ptr<ApiKeyTable>> Open(store::Store& store,
                                                   ApiKeyTableOptions options = {});
  ~ApiKeyTable();  // stops the thread, writing pending last-used times

  // The identity `key_text` stands for (roles: the principal's and the key's; attributes: the
  // tenant's, overridden by the principal's), or Unauthenticated: "invalid API key" (unknown id,
  // wrong secret, malformed), "API key expired", "API key revoked", "principal disabled".
  // Thread-safe; never blocks.
  Result<Identity> Verify(std::string_view key_text, int64_t now_unix) const;

  // Reloads the snapshot now (after a local write, so it takes effect at once). Blocking.
  Status Refresh();

  // The store's record of principal `name` in `tenant` as of the snapshot, with its attributes
  // merged over its tenant's (the principal's win), or nullopt: the Authenticator adds its roles
  // and attributes to JWT and certificate identities. Thread-safe; never blocks.
  std::optional<store::Principal> FindPrincipal(std::string_view tenant,
                                                std::string_view name) const;
  // The store's record of tenant `name` as of the snapshot, or nullopt. Thread-safe; never
  // blocks.
  std::optional<store::Tenant> FindTenant(std::string_view name) const;

 private:
  struct Impl;
  explicit ApiKeyTable(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rampart::identity
