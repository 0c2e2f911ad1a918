// The keyring of keyring.h. The unwrapped material of every version lives in one immutable
// snapshot behind a shared_ptr: readers copy the pointer under a short lock and never wait for a
// write; writers go to the storage first (blocking, outside any lock) and then publish a new
// snapshot. Writes are serialised among themselves by write_mutex_.

#include <openssl/crypto.h>

#include <ctime>
#include <map>
#include <mutex>

#include "crypto/digest.h"
#include "crypto/keyring.h"

namespace rampart::crypto {
namespace {

constexpr std::string_view kContextLabel = "rampart-keyring-v1";

// One version's unwrapped material: 32 bytes for a wrapping key, a PKCS#8 PEM for a signing key
// (parsed once).
struct Material {
  int64_t created_unix = 0;
  std::string bytes;
  std::optional<SigningKey> signing;
  ~Material() { OPENSSL_cleanse(bytes.data(), bytes.size()); }
  Material() = default;
  Material(const Material&) = delete;
  Material& operator=(const Material&) = delete;
};

struct KeyState {
  KeyPurpose purpose = KeyPurpose::kWrapping;
  std::string algorithm;
  int min_decryption_version = 1;
  std::map<int, std::shared_ptr<const Material>> versions;  // never empty
  int current() const { return versions.rbegin()->first; }
};

using Snapshot = std::map<std::string, KeyState>;

void AppendFramed(std::string& out, std::string_view field) {
  const auto size = static_cast<uint32_t>(field.size());
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(size >> shift));
  out.append(field);
}

std::string_view PurposeName(KeyPurpose purpose) {
  return purpose == KeyPurpose::kWrapping ? "wrapping" : "signing";
}

// The associated data of a version's material under the master key: every field that gives the
// material its meaning, length-framed, so a stored row cannot be moved to another key or version.
std::string MasterContext(const std::string& name, int version, KeyPurpose purpose,
                          std::string_view algorithm) {
  std::string context(kContextLabel);
  AppendFramed(context, name);
  AppendFramed(context, std::to_string(version));
  AppendFramed(context, PurposeName(purpose));
  AppendFramed(context, algorithm);
  return context;
}

// The algorithm must suit the purpose; the canonical name is returned.
Result<std::string> CheckAlgorithm(KeyPurpose purpose, std::string_view algorithm) {
  if (purpose == KeyPurpose::kWrapping) {
    Result<AeadAlgorithm> aead = ParseAead(algorithm);
    if (!aead.ok()) {
      return InvalidArgument("'{}' is not a wrapping algorithm (aes-256-gcm, sm4-ctr-hmac-sm3)",
                             algorithm);
    }
    return std::string(AeadName(*aead));
  }
  Result<SignatureAlgorithm> signature = ParseSignature(algorithm);
  if (!signature.ok()) {
    return InvalidArgument("'{}' is not a signing algorithm (sm2-sm3, ed25519)", algorithm);
  }
  return std::string(SignatureName(*signature));
}

// Checks and parses unwrapped material for its purpose.
Result<std::shared_ptr<const Material>> MakeMaterial(KeyPurpose purpose, std::string_view algorithm,
                                                     std::string bytes, int64_t created_unix) {
  auto material = std::make_shared<Material>();
  material->created_unix = created_unix;
  material->bytes = std::move(bytes);
  if (purpose == KeyPurpose::kWrapping) {
    if (material->bytes.size() != kAeadKeyBytes) {
      return InvalidArgument("wrapping key material is {} bytes, not {}", material->bytes.size(),
                             kAeadKeyBytes);
    }
  } else {
    ASSIGN_OR_RETURN(const SignatureAlgorithm signature, ParseSignature(algorithm));
    ASSIGN_OR_RETURN(SigningKey key, SigningKey::FromPem(signature, material->bytes));
    material->signing = std::move(key);
  }
  return std::shared_ptr<const Material>(std::move(material));
}

Result<std::string> NewMaterial(KeyPurpose purpose, std::string_view algorithm) {
  if (purpose == KeyPurpose::kWrapping) return RandomBytes(kAeadKeyBytes);
  ASSIGN_OR_RETURN(const SignatureAlgorithm signature, ParseSignature(algorithm));
  ASSIGN_OR_RETURN(const SigningKey key, SigningKey::Generate(signature));
  return key.PrivatePem();
}

}  // namespace

struct Keyring::Impl {
  Impl(KeyringStorage& storage_in, std::unique_ptr<MasterKey> master_in)
      : storage(storage_in), master(std::move(master_in)) {}

  // Reads the whole keyring from the storage and unwraps what this snapshot does not hold yet
  // (stored versions never change, so known ones are reused).
  Result<std::shared_ptr<const Snapshot>> Load(const Snapshot& known) const {
    ASSIGN_OR_RETURN(const std::vector<StoredKeyVersion> stored, storage.LoadKeyVersions());
    ASSIGN_OR_RETURN(const auto minimums, storage.LoadMinDecryptionVersions());
    auto next = std::make_shared<Snapshot>();
    for (const StoredKeyVersion& version : stored) {
      const std::string where = fmt::format("key '{}' version {}", version.name, version.version);
      auto [entry, created] = next->try_emplace(version.name);
      KeyState& state = entry->second;
      if (created) {
        state.purpose = version.purpose;
        state.algorithm = version.algorithm;
      } else if (state.purpose != version.purpose || state.algorithm != version.algorithm) {
        return Internal("{}: its purpose or algorithm differs from the key's other versions",
                        where);
      }
      const auto old_key = known.find(version.name);
      if (old_key != known.end()) {
        const auto old_version = old_key->second.versions.find(version.version);
        if (old_version != old_key->second.versions.end()) {
          state.versions.emplace(version.version, old_version->second);
          continue;
        }
      }
      Result<std::string> bytes = master->Unwrap(
          version.wrapped_material,
          MasterContext(version.name, version.version, version.purpose, version.algorithm));
      if (!bytes.ok()) return bytes.status().WithContext(where);
      Result<std::shared_ptr<const Material>> material =
          MakeMaterial(version.purpose, version.algorithm, std::move(*bytes), version.created_unix);
      if (!material.ok()) return material.status().WithContext(where);
      state.versions.emplace(version.version, std::move(*material));
    }
    for (const auto& [name, minimum] : minimums) {
      const auto found = next->find(name);
      if (found != next->end()) found->second.min_decryption_version = std::max(1, minimum);
    }
    return std::shared_ptr<const Snapshot>(std::move(next));
  }

  std::shared_ptr<const Snapshot> Read() const {
    std::lock_guard lock(snapshot_mutex);
    return snapshot;
  }

  void Publish(std::shared_ptr<const Snapshot> next) {
    std::lock_guard lock(snapshot_mutex);
    snapshot = std::move(next);
  }

  Status ReloadLocked() {
    ASSIGN_OR_RETURN(std::shared_ptr<const Snapshot> next, Load(*Read()));
    Publish(std::move(next));
    return Status::Ok();
  }

  // Wraps fresh material and stores it as `version` of `name`, then reloads.
  Status AddVersion(const std::string& name, int version, KeyPurpose purpose,
                    const std::string& algorithm) {
    ASSIGN_OR_RETURN(std::string material, NewMaterial(purpose, algorithm));
    Result<std::string> wrapped =
        master->Wrap(material, MasterContext(name, version, purpose, algorithm));
    OPENSSL_cleanse(material.data(), material.size());
    if (!wrapped.ok()) return wrapped.status();
    RETURN_IF_ERROR(storage.AddKeyVersion(StoredKeyVersion{.name = name,
                                                           .version = version,
                                                           .purpose = purpose,
                                                           .algorithm = algorithm,
                                                           .wrapped_material = *wrapped,
                                                           .created_unix = std::time(nullptr)}));
    return ReloadLocked();
  }

  KeyringStorage& storage;
  const std::unique_ptr<MasterKey> master;
  std::mutex write_mutex;  // serialises Ensure, Rotate, SetMinDecryptionVersion and Reload
  mutable std::mutex snapshot_mutex;
  std::shared_ptr<const Snapshot> snapshot = std::make_shared<Snapshot>();  // by snapshot_mutex
};

namespace {

Result<const KeyState*> Find(const Snapshot& snapshot, const std::string& name) {
  const auto found = snapshot.find(name);
  if (found == snapshot.end()) return NotFound("key '{}' is not in the keyring", name);
  return &found->second;
}

KeyStatus MakeStatus(const std::string& name, const KeyState& state) {
  KeyStatus status{.name = name,
                   .purpose = state.purpose,
                   .algorithm = state.algorithm,
                   .current_version = state.current(),
                   .min_decryption_version = state.min_decryption_version};
  for (const auto& [version, material] : state.versions) {
    status.versions.emplace_back(version, material->created_unix);
  }
  return status;
}

// One version of a key of `purpose`, usable for decryption or verification.
Result<std::shared_ptr<const Material>> FindVersion(const Snapshot& snapshot,
                                                    const std::string& name, KeyPurpose purpose,
                                                    int version, const KeyState** state_out) {
  ASSIGN_OR_RETURN(const KeyState* state, Find(snapshot, name));
  if (state->purpose != purpose) {
    return FailedPrecondition("key '{}' is a {} key", name, PurposeName(state->purpose));
  }
  const auto found = state->versions.find(version);
  if (found == state->versions.end()) {
    return NotFound("key '{}' has no version {} (current: {})", name, version, state->current());
  }
  if (version < state->min_decryption_version) {
    return FailedPrecondition(
        "key '{}' version {} is below its minimum decryption version {} (retired)", name, version,
        state->min_decryption_version);
  }
  *state_out = state;
  return found->second;
}

}  // namespace

Keyring::Keyring(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Keyring::~Keyring() = default;

Result<std::unique_ptr<Keyring>> Keyring::Open(KeyringStorage& storage,
                                               std::unique_ptr<MasterKey> master) {
  if (master == nullptr) return InvalidArgument("the keyring needs a master key");
  auto impl = std::make_unique<Impl>(storage, std::move(master));
  RETURN_IF_ERROR(impl->ReloadLocked());
  return std::unique_ptr<Keyring>(new Keyring(std::move(impl)));
}

Status Keyring::Ensure(const std::string& name, KeyPurpose purpose, std::string_view algorithm) {
  ASSIGN_OR_RETURN(const std::string canonical, CheckAlgorithm(purpose, algorithm));
  std::lock_guard lock(impl_->write_mutex);
  const auto check = [&](const KeyState& state) -> Status {
    if (state.purpose != purpose || state.algorithm != canonical) {
      return FailedPrecondition("key '{}' exists as a {} key of {}, not a {} key of {}", name,
                                PurposeName(state.purpose), state.algorithm, PurposeName(purpose),
                                canonical);
    }
    return Status::Ok();
  };
  {
    const auto snapshot = impl_->Read();
    const auto found = snapshot->find(name);
    if (found != snapshot->end()) return check(found->second);
  }
  Status added = impl_->AddVersion(name, 1, purpose, canonical);
  if (added.code() == StatusCode::kAlreadyExists) {  // another process created it first
    RETURN_IF_ERROR(impl_->ReloadLocked());
    const auto snapshot = impl_->Read();
    const auto found = snapshot->find(name);
    if (found == snapshot->end()) return Internal("key '{}' exists but cannot be read", name);
    return check(found->second);
  }
  return added;
}

Result<int> Keyring::Rotate(const std::string& name) {
  std::lock_guard lock(impl_->write_mutex);
  const auto snapshot = impl_->Read();
  ASSIGN_OR_RETURN(const KeyState* state, Find(*snapshot, name));
  const int next = state->current() + 1;
  const Status added = impl_->AddVersion(name, next, state->purpose, state->algorithm);
  if (added.code() == StatusCode::kAlreadyExists) {
    // Another replica or the CLI rotated first: take its version rather than adding a second.
    RETURN_IF_ERROR(impl_->ReloadLocked());
    return AlreadyExists(
        "key '{}': version {} was added by another process meanwhile (reloaded; it is the current "
        "version now)",
        name, next);
  }
  RETURN_IF_ERROR(added);
  return next;
}

Status Keyring::SetMinDecryptionVersion(const std::string& name, int version) {
  std::lock_guard lock(impl_->write_mutex);
  {
    const auto snapshot = impl_->Read();
    ASSIGN_OR_RETURN(const KeyState* state, Find(*snapshot, name));
    if (version < 1 || version > state->current()) {
      return InvalidArgument("key '{}': a minimum decryption version must be 1 to {} (current)",
                             name, state->current());
    }
    if (version < state->min_decryption_version) {
      return InvalidArgument("key '{}': the minimum decryption version is {} and is never lowered",
                             name, state->min_decryption_version);
    }
  }
  RETURN_IF_ERROR(impl_->storage.SetMinDecryptionVersion(name, version));
  return impl_->ReloadLocked();
}

std::string Keyring::MasterKeyDescription() const { return impl_->master->Describe(); }

Result<KeyStatus> Keyring::StatusOf(const std::string& name) const {
  const auto snapshot = impl_->Read();
  ASSIGN_OR_RETURN(const KeyState* state, Find(*snapshot, name));
  return MakeStatus(name, *state);
}

std::vector<KeyStatus> Keyring::List() const {
  const auto snapshot = impl_->Read();
  std::vector<KeyStatus> keys;
  for (const auto& [name, state] : *snapshot) keys.push_back(MakeStatus(name, state));
  return keys;
}

Status Keyring::Reload() {
  std::lock_guard lock(impl_->write_mutex);
  return impl_->ReloadLocked();
}

Result<Keyring::WrappingKey> Keyring::CurrentWrappingKey(const std::string& name) const {
  const auto snapshot = impl_->Read();
  ASSIGN_OR_RETURN(const KeyState* state, Find(*snapshot, name));
  return WrappingKeyVersion(name, state->current());
}

Result<Keyring::WrappingKey> Keyring::WrappingKeyVersion(const std::string& name,
                                                         int version) const {
  const auto snapshot = impl_->Read();
  const KeyState* state = nullptr;
  ASSIGN_OR_RETURN(const auto material,
                   FindVersion(*snapshot, name, KeyPurpose::kWrapping, version, &state));
  ASSIGN_OR_RETURN(const AeadAlgorithm algorithm, ParseAead(state->algorithm));
  return WrappingKey{.version = version, .algorithm = algorithm, .material = material->bytes};
}

Result<std::pair<int, SigningKey>> Keyring::CurrentSigningKey(const std::string& name) const {
  const auto snapshot = impl_->Read();
  ASSIGN_OR_RETURN(const KeyState* found, Find(*snapshot, name));
  const KeyState* state = nullptr;
  ASSIGN_OR_RETURN(const auto material,
                   FindVersion(*snapshot, name, KeyPurpose::kSigning, found->current(), &state));
  return std::pair<int, SigningKey>(found->current(), *material->signing);
}

Result<VerifyingKey> Keyring::VerifyingKeyVersion(const std::string& name, int version) const {
  const auto snapshot = impl_->Read();
  const KeyState* state = nullptr;
  ASSIGN_OR_RETURN(const auto material,
                   FindVersion(*snapshot, name, KeyPurpose::kSigning, version, &state));
  return material->signing->Public();
}

}  // namespace rampart::crypto
