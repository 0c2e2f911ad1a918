#pragma once

// Signatures: SM2 with SM3 (GB/T 32918, with the standard distinguishing ID
// "1234567812345678" set explicitly — OpenSSL 3.0 would otherwise use an empty ID) and Ed25519.
// Keys are PEM (PKCS#8 private, SubjectPublicKeyInfo public). Thread-safe: a SigningKey may be
// shared; each call makes its own OpenSSL context.

#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace rampart::crypto {

enum class SignatureAlgorithm { kSm2Sm3, kEd25519 };
std::string_view SignatureName(SignatureAlgorithm algorithm);  // "sm2-sm3", "ed25519"
Result<SignatureAlgorithm> ParseSignature(std::string_view name);

inline constexpr std::string_view kSm2DefaultId = "1234567812345678";

class VerifyingKey {
 public:
  // InvalidArgument when the PEM is not a public key of that algorithm.
  static Result<VerifyingKey> FromPem(SignatureAlgorithm algorithm, std::string_view pem);
  // True when `signature` (SM2: DER; Ed25519: 64 bytes) is valid for `message`.
  bool Verify(std::string_view message, std::string_view signature) const;
  std::string PublicPem() const;
  SignatureAlgorithm algorithm() const { return algorithm_; }
  // Lower-case hex SHA-256 of the DER public key: a stable key id.
  std::string Fingerprint() const;

 private:
  SignatureAlgorithm algorithm_ = SignatureAlgorithm::kEd25519;
  std::shared_ptr<void> key_;  // EVP_PKEY
};

class SigningKey {
 public:
  static Result<SigningKey> Generate(SignatureAlgorithm algorithm);
  static Result<SigningKey> FromPem(SignatureAlgorithm algorithm, std::string_view pem);
  Result<std::string> Sign(std::string_view message) const;
  std::string PrivatePem() const;  // key material: keep it in the keyring, never log it
  VerifyingKey Public() const;
  SignatureAlgorithm algorithm() const { return algorithm_; }

 private:
  SignatureAlgorithm algorithm_ = SignatureAlgorithm::kEd25519;
  std::shared_ptr<void> key_;  // EVP_PKEY
};

}  // namespace rampart::crypto
