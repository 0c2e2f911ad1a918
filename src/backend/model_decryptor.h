#pragma once

// Encrypted model files: a backend whose model file `model.pt` is absent looks for
// `model.pt.rpe`, an envelope (crypto/envelope.h) sealed by `rampart keyring seal-file`, and
// opens it in memory; the plaintext never touches the disk. The envelope's associated data binds
// tenant "models" and the region and data class the server is configured with, so a model sealed
// for one region does not load in another.
//
// Threads: Decrypt is const and thread-safe (instances load on several threads).

#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "crypto/envelope.h"

namespace rampart::backend {

inline constexpr std::string_view kEncryptedModelSuffix = ".rpe";
inline constexpr std::string_view kModelTenant = "models";

class ModelDecryptor {
 public:
  // `keyring` must outlive the decryptor.
  ModelDecryptor(const crypto::Keyring& keyring, std::string region, std::string data_class)
      : envelope_(keyring), region_(std::move(region)), data_class_(std::move(data_class)) {}

  // The model file's bytes. Errors: the envelope's (InvalidArgument "decryption failed: ..." for a
  // wrong region or data class or a damaged file; NotFound for an unknown key; FailedPrecondition
  // for a retired key version).
  Result<std::string> Decrypt(std::string_view sealed) const {
    return envelope_.Open(sealed,
                          {.tenant = kModelTenant, .region = region_, .data_class = data_class_});
  }
  const std::string& region() const { return region_; }
  const std::string& data_class() const { return data_class_; }

 private:
  crypto::Envelope envelope_;
  const std::string region_;
  const std::string data_class_;
};

// Reads a whole file (at most crypto::kEnvelopeMaxPayloadBytes plus its header). NotFound /
// Unavailable naming the path.
Result<std::string> ReadModelFile(const std::string& path);

}  // namespace rampart::backend
