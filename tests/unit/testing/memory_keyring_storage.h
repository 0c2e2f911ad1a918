#pragma once

// A keyring's storage in memory (crypto::KeyringStorage) for tests that need a real keyring but
// no store: key versions kept for the process's life; minimum decryption versions unsupported.

#include <string>
#include <utility>
#include <vector>

#include "crypto/keyring.h"

namespace rampart::testing {

class MemoryKeyringStorage final : public crypto::KeyringStorage {
 public:
  Result<std::vector<crypto::StoredKeyVersion>> LoadKeyVersions() override { return versions_; }
  Status AddKeyVersion(const crypto::StoredKeyVersion& version) override {
    for (const auto& existing : versions_) {
      if (existing.name == version.name && existing.version == version.version) {
        return AlreadyExists("taken");
      }
    }
    versions_.push_back(version);
    return Status::Ok();
  }
  Result<std::vector<std::pair<std::string, int>>> LoadMinDecryptionVersions() override {
    return std::vector<std::pair<std::string, int>>{};
  }
  Status SetMinDecryptionVersion(const std::string&, int) override {
    return Unimplemented("not needed here");
  }

 private:
  std::vector<crypto::StoredKeyVersion> versions_;
};

}  // namespace rampart::testing
