#pragma once

// The keyring: named keys with versions, kept encrypted at rest under a master key.
//
// A key has a purpose (data-key wrapping with an AEAD suite, or signing with SM2/Ed25519) and
// versions 1, 2, ...; Rotate adds a version that becomes the one used for new work; versions
// below `min_decryption_version` can no longer decrypt (or verify), so an operator retires old
// material once everything is rewrapped. Key material never leaves the process in clear: it is
// stored wrapped by the MasterKey (AEAD under a key from a file or an environment variable; the
// MasterKey interface leaves room for a PKCS#11 device or an external KMS).
//
// Threads: thread-safe; reads (Current, Version, SigningKeyFor) never block and never touch the
// storage; Create/Rotate/SetMinDecryptionVersion write through the storage (blocking).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "crypto/aead.h"
#include "crypto/signature.h"

namespace rampart::crypto {

// Wraps and unwraps key material. Implementations: a 32-byte key from a file or an environment
// variable (hex or base64), MasterKeyFromFile / MasterKeyFromEnvironment.
class MasterKey {
 public:
  virtual ~MasterKey() = default;
  virtual std::string Describe() const = 0;  // "file:/etc/rampart/master.key" (never the key)
  virtual Result<std::string> Wrap(std::string_view material, std::string_view context) const = 0;
  virtual Result<std::string> Unwrap(std::string_view wrapped, std::string_view context) const = 0;
};
Result<std::unique_ptr<MasterKey>> MasterKeyFromFile(const std::string& path);
Result<std::unique_ptr<MasterKey>> MasterKeyFromEnvironment(const std::string& variable);

enum class KeyPurpose { kWrapping, kSigning };

// One stored version of a key, as the storage keeps it (material wrapped by the master key).
struct StoredKeyVersion {
  std::string name;
  int version = 0;
  KeyPurpose purpose = KeyPurpose::kWrapping;
  std::string algorithm;  // "aes-256-gcm", "sm4-ctr-hmac-sm3", "sm2-sm3", "ed25519"
  std::string wrapped_material;
  int64_t created_unix = 0;
};

// Where the keyring keeps its versions (the store implements it: store/keyring_storage.h).
class KeyringStorage {
 public:
  virtual ~KeyringStorage() = default;
  virtual Result<std::vector<StoredKeyVersion>> LoadKeyVersions() = 0;
  // AlreadyExists if (name, version) exists: another replica rotated first.
  virtual Status AddKeyVersion(const StoredKeyVersion& version) = 0;
  virtual Result<std::vector<std::pair<std::string, int>>> LoadMinDecryptionVersions() = 0;
  virtual Status SetMinDecryptionVersion(const std::string& name, int version) = 0;
};

struct KeyStatus {
  std::string name;
  KeyPurpose purpose = KeyPurpose::kWrapping;
  std::string algorithm;
  int current_version = 0;
  int min_decryption_version = 1;
  std::vector<std::pair<int, int64_t>> versions;  // (version, created_unix)
};

class Keyring {
 public:
  // Loads and unwraps every version now. `storage` must outlive the keyring.
  static Result<std::unique_ptr<Keyring>> Open(KeyringStorage& storage,
                                               std::unique_ptr<MasterKey> master);
  ~Keyring();

  // Creates version 1 unless the key exists (then OK if its purpose and algorithm match,
  // FailedPrecondition otherwise).
  Status Ensure(const std::string& name, KeyPurpose purpose, std::string_view algorithm);
  Result<int> Rotate(const std::string& name);  // the new version
  // InvalidArgument above the current version; never lowered.
  Status SetMinDecryptionVersion(const std::string& name, int version);
  // NotFound for an unknown key. (Named StatusOf, not Status: a member named Status would change
  // what `Status` means inside the class, which C++ forbids.)
  Result<KeyStatus> StatusOf(const std::string& name) const;
  std::vector<KeyStatus> List() const;  // by name
  // Where the master key comes from ("file:/etc/rampart/master.key"; never the key).
  std::string MasterKeyDescription() const;
  // Picks up versions another process added (a rotation by the CLI or another replica).
  Status Reload();

  // Wrapping keys: the current version's material, or one version's (FailedPrecondition below
  // min_decryption_version, NotFound for an unknown name or version).
  struct WrappingKey {
    int version = 0;
    AeadAlgorithm algorithm = AeadAlgorithm::kAes256Gcm;
    std::string material;  // 32 bytes
  };
  Result<WrappingKey> CurrentWrappingKey(const std::string& name) const;
  Result<WrappingKey> WrappingKeyVersion(const std::string& name, int version) const;

  // Signing keys, the same way.
  Result<std::pair<int, SigningKey>> CurrentSigningKey(const std::string& name) const;
  Result<VerifyingKey> VerifyingKeyVersion(const std::string& name, int version) const;

 private:
  struct Impl;
  explicit Keyring(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rampart::crypto
