#pragma once

// Internal to src/crypto: OpenSSL algorithm objects fetched once per process and kept for its
// lifetime (EVP_*_fetch per call costs a provider lookup, several microseconds), and small RAII
// holders for OpenSSL contexts. Nothing outside src/crypto includes this file.

#include <openssl/evp.h>
#include <openssl/kdf.h>

#include <memory>

#include "crypto/digest.h"

namespace rampart::crypto::internal {

// The fetched algorithms. Thread-safe: built on first use (a function-local static), read-only
// afterwards; OpenSSL's fetched objects may be used from any thread.
struct Algorithms {
  EVP_MD* sha256 = nullptr;
  EVP_MD* sm3 = nullptr;
  EVP_MAC* hmac = nullptr;
  EVP_KDF* hkdf = nullptr;
  EVP_CIPHER* aes_256_gcm = nullptr;
  EVP_CIPHER* sm4_ctr = nullptr;
  // HMAC contexts with their digest set and no key: EVP_MAC_CTX_dup + EVP_MAC_init(key) is the
  // cheap way to start an HMAC (no digest lookup by name).
  EVP_MAC_CTX* hmac_sha256 = nullptr;
  EVP_MAC_CTX* hmac_sm3 = nullptr;

  const EVP_MD* Md(DigestAlgorithm algorithm) const {
    return algorithm == DigestAlgorithm::kSm3 ? sm3 : sha256;
  }
  const EVP_MAC_CTX* HmacTemplate(DigestAlgorithm algorithm) const {
    return algorithm == DigestAlgorithm::kSm3 ? hmac_sm3 : hmac_sha256;
  }
};

// Aborts (with a message naming the algorithm) when the OpenSSL build lacks one of them: Rampart
// cannot run without SM3, SM4 or AES-GCM, and finding out at first use is better than never.
const Algorithms& GetAlgorithms();

// Aborts with `what` on stderr: for failures that only happen when OpenSSL cannot allocate, so
// that functions documented as infallible (Hash, Hmac) stay so. Never given key material.
[[noreturn]] void OpenSslFailure(const char* what);

struct MacContextDeleter {
  void operator()(EVP_MAC_CTX* context) const { EVP_MAC_CTX_free(context); }
};
using MacContext = std::unique_ptr<EVP_MAC_CTX, MacContextDeleter>;

// A keyed HMAC context, ready for EVP_MAC_update. Aborts only on allocation failure.
MacContext NewHmac(DigestAlgorithm algorithm, const void* key, size_t key_length);

}  // namespace rampart::crypto::internal
