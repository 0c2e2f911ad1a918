#include "app/keyring_setup.h"

#include <cstdlib>

#include "app/access_setup.h"

namespace rampart::app {

Result<std::optional<ServerKeyring>> OpenServerKeyring(const std::string& master_key_file,
                                                       const std::optional<KeyringConfig>& config,
                                                       store::Store* access_store,
                                                       const std::string& data_dir, bool required) {
  const bool given = !master_key_file.empty() || config.has_value() ||
                     std::getenv(std::string(kMasterKeyVariable).c_str()) != nullptr;
  if (!given) {
    if (!required) return std::optional<ServerKeyring>();
    return FailedPrecondition(
        "the audit log signs its checkpoints with a key in the keyring, which needs a master "
        "key: add `keyring: {{master_key_file: FILE}}` to the config (a 32-byte file, mode "
        "0600: `umask 077; head -c 32 /dev/urandom > FILE`), pass --master-key-file, or set {}",
        kMasterKeyVariable);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<crypto::MasterKey> master,
                   ResolveMasterKey(master_key_file, config));
  ServerKeyring keyring;
  keyring.store = access_store;
  if (keyring.store == nullptr) {
    ASSIGN_OR_RETURN(keyring.own_store, OpenConfiguredStore(nullptr, data_dir));
    keyring.store = keyring.own_store.get();
  }
  ASSIGN_OR_RETURN(keyring.runtime, OpenKeyring(*keyring.store, std::move(master)));
  Result<guard::GuardKeys> guard_keys = SealedGuardKeys(*keyring.store, *keyring.runtime.keyring);
  if (!guard_keys.ok()) return guard_keys.status().WithContext("the guard's key");
  keyring.guard_keys = std::make_shared<const guard::GuardKeys>(std::move(guard_keys).value());
  return std::optional<ServerKeyring>(std::move(keyring));
}

}  // namespace rampart::app
