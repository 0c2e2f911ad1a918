#include "store/keyring_storage.h"

namespace rampart::store {
namespace {

std::string_view PurposeName(crypto::KeyPurpose purpose) {
  return purpose == crypto::KeyPurpose::kWrapping ? "wrapping" : "signing";
}

}  // namespace

Result<std::vector<crypto::StoredKeyVersion>> StoreKeyringStorage::LoadKeyVersions() {
  ASSIGN_OR_RETURN(const std::vector<KeyVersion> rows, store_.ListKeyVersions());
  std::vector<crypto::StoredKeyVersion> versions;
  versions.reserve(rows.size());
  for (const KeyVersion& row : rows) {
    crypto::StoredKeyVersion version{.name = row.name,
                                     .version = row.version,
                                     .algorithm = row.algorithm,
                                     .wrapped_material = row.wrapped_material,
                                     .created_unix = row.created_unix};
    if (row.purpose == "wrapping") {
      version.purpose = crypto::KeyPurpose::kWrapping;
    } else if (row.purpose == "signing") {
      version.purpose = crypto::KeyPurpose::kSigning;
    } else {
      return Internal("key '{}' version {} has an unknown purpose '{}'", row.name, row.version,
                      row.purpose);
    }
    versions.push_back(std::move(version));
  }
  return versions;
}

Status StoreKeyringStorage::AddKeyVersion(const crypto::StoredKeyVersion& version) {
  return store_.AddKeyVersion(KeyVersion{.name = version.name,
                                         .version = version.version,
                                         .purpose = std::string(PurposeName(version.purpose)),
                                         .algorithm = version.algorithm,
                                         .wrapped_material = version.wrapped_material,
                                         .created_unix = version.created_unix});
}

Result<std::vector<std::pair<std::string, int>>> StoreKeyringStorage::LoadMinDecryptionVersions() {
  return store_.ListMinDecryptionVersions();
}

Status StoreKeyringStorage::SetMinDecryptionVersion(const std::string& name, int version) {
  return store_.RaiseMinDecryptionVersion(name, version);
}

Result<RewrapSummary> RewrapSealedSecrets(Store& store, const crypto::Envelope& envelope) {
  RewrapSummary summary;
  ASSIGN_OR_RETURN(const std::vector<SealedSecret> secrets, store.ListSealedSecrets());
  for (const SealedSecret& listed : secrets) {
    ++summary.examined;
    std::string current = listed.envelope;
    for (int attempt = 0;; ++attempt) {
      Result<std::string> rewrapped = envelope.Rewrap(current);
      if (!rewrapped.ok()) {
        return rewrapped.status().WithContext(fmt::format("sealed secret '{}'", listed.name));
      }
      if (*rewrapped == current) break;
      const Status replaced = store.ReplaceSealedSecret(listed.name, current, *rewrapped);
      if (replaced.ok()) {
        ++summary.rewrapped;
        break;
      }
      if (replaced.code() == StatusCode::kNotFound) break;  // deleted meanwhile
      if (replaced.code() != StatusCode::kFailedPrecondition || attempt >= 3) {
        return replaced.WithContext(fmt::format("sealed secret '{}'", listed.name));
      }
      // Changed by another process meanwhile: rewrap what it holds now.
      ASSIGN_OR_RETURN(const std::optional<SealedSecret> fresh, store.GetSealedSecret(listed.name));
      if (!fresh.has_value()) break;
      current = fresh->envelope;
    }
  }
  return summary;
}

}  // namespace rampart::store
