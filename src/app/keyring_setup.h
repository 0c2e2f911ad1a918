#pragma once

// The server's keyring (docs/crypto.md) and what start-up hangs on it: opened when a master key
// is given (--master-key-file, else the config's keyring: section, else RAMPART_MASTER_KEY),
// over the access store, else the SQLite store under the data directory. Encrypted model files
// open with it, the audit log signs with it, and the guard's key is a sealed secret in it.

#include <memory>
#include <optional>
#include <string>

#include "app/audit_config.h"
#include "app/keyring_cli.h"
#include "core/status.h"
#include "guard/keys.h"
#include "store/store.h"

namespace rampart::app {

struct ServerKeyring {
  std::unique_ptr<store::Store> own_store;  // when there is no access store
  store::Store* store = nullptr;  // where the keyring lives: the access store or own_store
  KeyringRuntime runtime;
  std::shared_ptr<const guard::GuardKeys> guard_keys;  // SealedGuardKeys
};

// nullopt when no master key is given. `access_store` may be null. Errors: FailedPrecondition
// when `required` (the audit log is on) and no master key is given; the master key's, the
// store's or the keyring's otherwise.
Result<std::optional<ServerKeyring>> OpenServerKeyring(const std::string& master_key_file,
                                                       const std::optional<KeyringConfig>& config,
                                                       store::Store* access_store,
                                                       const std::string& data_dir, bool required);

}  // namespace rampart::app
