#pragma once

// The keyring's storage (crypto::KeyringStorage) over a store::Store, and the secrets Rampart keeps
// sealed in the store under the keyring.
//
// Threads: as the store's (thread-safe, blocking: never on an I/O thread).

#include <string>

#include "crypto/envelope.h"
#include "crypto/keyring.h"
#include "store/store.h"

namespace rampart::store {

// Keeps the keyring's versions in the store's key_versions and key_min_versions tables. `store`
// must outlive it.
class StoreKeyringStorage final : public crypto::KeyringStorage {
 public:
  explicit StoreKeyringStorage(Store& store) : store_(store) {}

  Result<std::vector<crypto::StoredKeyVersion>> LoadKeyVersions() override;
  Status AddKeyVersion(const crypto::StoredKeyVersion& version) override;
  Result<std::vector<std::pair<std::string, int>>> LoadMinDecryptionVersions() override;
  Status SetMinDecryptionVersion(const std::string& name, int version) override;

 private:
  Store& store_;
};

// A secret sealed in an envelope under keyring key `key_name`, kept in the store as `name`, its
// associated data binding tenant "rampart", region "local" and data class "SECRET" plus the
// secret's name (in the tenant field: "rampart/<name>"), so one secret's envelope cannot stand
// in for another's.
//
// Reads the secret, or, when the store has none, makes one with `generate`, seals it and stores
// it; when another process stored one first (AlreadyExists) that one is read instead, so all
// replicas end up with the same secret. Errors: the store's, the envelope's (a wrong master key
// shows as "decryption failed").
template <typename Generate>
Result<std::string> LoadOrCreateSealedSecret(Store& store, const crypto::Envelope& envelope,
                                             const std::string& name, const std::string& key_name,
                                             Generate generate);

// What RewrapSealedSecrets did.
struct RewrapSummary {
  int examined = 0;
  int rewrapped = 0;  // the others were current already
};

// Rewraps every sealed secret the store holds to its key's current version (the secret itself is
// never decrypted: only its data key moves). A secret changed by another process meanwhile is
// read again and retried. Stops at the first error, naming the secret.
Result<RewrapSummary> RewrapSealedSecrets(Store& store, const crypto::Envelope& envelope);

// The context of sealed secret `name` (tenant "rampart/<name>", region "local", class "SECRET").
struct SealedSecretContext {
  explicit SealedSecretContext(const std::string& name) : tenant("rampart/" + name) {}
  crypto::EnvelopeContext context() const {
    return {.tenant = tenant, .region = "local", .data_class = "SECRET"};
  }
  std::string tenant;
};

template <typename Generate>
Result<std::string> LoadOrCreateSealedSecret(Store& store, const crypto::Envelope& envelope,
                                             const std::string& name, const std::string& key_name,
                                             Generate generate) {
  const SealedSecretContext context(name);
  for (int attempt = 0; attempt < 2; ++attempt) {
    ASSIGN_OR_RETURN(const std::optional<SealedSecret> stored, store.GetSealedSecret(name));
    if (stored.has_value()) {
      Result<std::string> secret = envelope.Open(stored->envelope, context.context());
      if (!secret.ok()) return secret.status().WithContext(fmt::format("sealed secret '{}'", name));
      return secret;
    }
    std::string secret = generate();
    ASSIGN_OR_RETURN(const std::string sealed, envelope.Seal(key_name, secret, context.context()));
    const Status created = store.CreateSealedSecret({.name = name, .envelope = sealed});
    if (created.ok()) return secret;
    if (created.code() != StatusCode::kAlreadyExists) return created;
    // Another process stored it first: read theirs.
  }
  return Internal("sealed secret '{}' was created and then could not be read", name);
}

}  // namespace rampart::store
