#pragma once

// Access control as the server runs it: the store, the API key table, and the AccessControl
// (authenticator, policy engine, quota ledger) built from the config's access: section
// (access_config.h), and their reload. The CLI (access_cli.h) opens the same store.

#include <memory>
#include <optional>
#include <string>

#include "app/access_config.h"
#include "core/status.h"
#include "identity/api_keys.h"
#include "policy/access.h"
#include "serve/server.h"
#include "store/store.h"

namespace rampart::app {

inline constexpr std::string_view kDefaultDataDir = "./data";

// The data directory: `flag` (--data-dir) when given, else the config's access.data_dir, else
// ./data.
std::string ResolveDataDir(const std::string& flag, const AccessConfig* config);

// The store the config names (PostgreSQL), else SQLite under `data_dir` (created if missing).
Result<std::unique_ptr<store::Store>> OpenConfiguredStore(const AccessConfig* config,
                                                          const std::string& data_dir);

// Everything enforcing access needs, owned together; destroyed in reverse order (the control
// before the key table before the store).
struct AccessRuntime {
  std::unique_ptr<store::Store> store;
  std::unique_ptr<identity::ApiKeyTable> keys;
  std::unique_ptr<policy::AccessControl> control;
};

// Opens the store, loads the key table, the JWKS file and the policy files, and starts the
// quota ledger. Any error is a start-up error naming what failed.
Result<AccessRuntime> StartAccess(const AccessConfig& config, const std::string& data_dir);

// Applies the config's model shares (quotas.model_shares) to `server`'s scheduler.
Status ApplyModelShares(const AccessConfig& config, serve::InferenceServer& server);

// Reads `config_file`'s access: section again and reloads the policy files, the quota rules and
// (with `server`) the model shares; the rest of the section needs a restart. On error the old
// policies, rules and shares stay.
Status ReloadAccess(AccessRuntime& access, const std::string& config_file,
                    serve::InferenceServer* server);

}  // namespace rampart::app
