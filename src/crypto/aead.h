#pragma once

// Authenticated encryption with associated data, two suites:
//
//   kAes256Gcm       AES-256-GCM, 12-byte random nonce, 16-byte tag.
//   kSm4CtrHmacSm3   for national-crypto deployments (OpenSSL 3.0 has no SM4-GCM): SM4-CTR then
//                    HMAC-SM3 over (associated data, nonce, ciphertext) with unambiguous length
//                    framing (encrypt-then-MAC); the 32-byte key material is split by
//                    HKDF-SM3 into a 16-byte SM4 key and a 32-byte MAC key; 16-byte nonce
//                    (the CTR IV); 32-byte tag, checked in constant time.
//
// Keys are 32 bytes for both. Seal/Open are pure functions of their inputs (plus the random
// nonce); thread-safe. Open fails with InvalidArgument "decryption failed: ..." for a wrong key,
// wrong associated data, a flipped bit or a truncated input, without saying which.

#include <string>
#include <string_view>

#include "core/status.h"

namespace rampart::crypto {

enum class AeadAlgorithm { kAes256Gcm = 1, kSm4CtrHmacSm3 = 2 };
std::string_view AeadName(AeadAlgorithm algorithm);  // "aes-256-gcm", "sm4-ctr-hmac-sm3"
Result<AeadAlgorithm> ParseAead(std::string_view name);

inline constexpr size_t kAeadKeyBytes = 32;
size_t AeadNonceBytes(AeadAlgorithm algorithm);  // 12 or 16
size_t AeadTagBytes(AeadAlgorithm algorithm);    // 16 or 32

struct Sealed {
  std::string nonce;
  std::string ciphertext;  // same length as the plaintext
  std::string tag;
};

// InvalidArgument for a key that is not 32 bytes.
Result<Sealed> Seal(AeadAlgorithm algorithm, std::string_view key, std::string_view plaintext,
                    std::string_view associated_data);
// As Seal with a given nonce (known-answer tests only; never reuse a nonce).
Result<Sealed> SealWithNonce(AeadAlgorithm algorithm, std::string_view key, std::string_view nonce,
                             std::string_view plaintext, std::string_view associated_data);
Result<std::string> Open(AeadAlgorithm algorithm, std::string_view key, const Sealed& sealed,
                         std::string_view associated_data);

}  // namespace rampart::crypto
