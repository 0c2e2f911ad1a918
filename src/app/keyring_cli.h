#pragma once

// The keyring commands of `rampart` (docs/crypto.md, "Keyring"). Named `keyring` because
// `rampart keys` already manages API keys. They work on the store the server uses (--data-dir /
// --config, as `rampart keys`) with the master key from --master-key-file or the environment
// variable RAMPART_MASTER_KEY.
//
//   rampart keyring status              every key: purpose, algorithm, current and minimum
//                                       decryption versions, versions; every sealed secret's key
//   rampart keyring create NAME [--algorithm A]   a key (aes-256-gcm by default; sm4-ctr-hmac-sm3
//                                       wraps too; sm2-sm3 and ed25519 sign)
//   rampart keyring rotate NAME         a new current version
//   rampart keyring min-version NAME V  retires the versions below V (never lowered)
//   rampart keyring rewrap              rewraps every sealed secret in the store to its key's
//                                       current version (the secrets are never decrypted)
//   rampart keyring seal-file IN OUT --key NAME [--tenant models] [--region R] [--data-class C]
//                                       seals a file (an encrypted model: model.pt.rpe)
//
// Exit status: 0 done, 1 the store or the keyring refused or failed (the reason on standard
// error), 2 bad arguments. No key material is ever printed.

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "app/audit_config.h"
#include "core/status.h"
#include "crypto/keyring.h"
#include "guard/keys.h"
#include "store/keyring_storage.h"

namespace rampart::app {

inline constexpr std::string_view kMasterKeyVariable = "RAMPART_MASTER_KEY";

// The master key from the first source given: `file` (--master-key-file), the config's
// keyring: section, the environment variable RAMPART_MASTER_KEY. NotFound "no master key: ..."
// when there is none. The server and every CLI command resolve it this way.
Result<std::unique_ptr<crypto::MasterKey>> ResolveMasterKey(
    const std::string& file, const std::optional<KeyringConfig>& config = std::nullopt);

// A keyring over a store, owned together (the keyring before its storage).
struct KeyringRuntime {
  std::unique_ptr<store::StoreKeyringStorage> storage;
  std::unique_ptr<crypto::Keyring> keyring;
};
Result<KeyringRuntime> OpenKeyring(store::Store& store, std::unique_ptr<crypto::MasterKey> master);

// The key the PII guard's hashes and tokens derive from (guard::GuardKeys), kept in the store as
// the sealed secret "guard:master" under the keyring's wrapping key "secrets" (made on first
// use): made once, the same for every replica sharing the store, never in clear on disk, and
// moved to new key versions by `rampart keyring rewrap`.
inline constexpr std::string_view kGuardSecretName = "guard:master";
inline constexpr std::string_view kSecretsKeyName = "secrets";
Result<guard::GuardKeys> SealedGuardKeys(store::Store& store, crypto::Keyring& keyring);

class KeyringCli {
 public:
  // Adds `keyring` to `app`. `this` must outlive the parse.
  void AddTo(CLI::App& app);
  // After `app` parsed: runs the command chosen; nullopt when none of these was chosen.
  std::optional<int> RunIfChosen();

 private:
  struct Args {
    std::string data_dir;
    std::string config_file;
    std::string master_key_file;
    std::string name;
    std::string algorithm = "aes-256-gcm";
    int version = 0;
    std::string input;
    std::string output;
    std::string tenant = "models";
    std::string region = "local";
    std::string data_class = "CONFIDENTIAL";
  };
  int Run(const std::string& command);

  Args args_;
  std::vector<std::pair<CLI::App*, std::string>> commands_;
};

}  // namespace rampart::app
