#pragma once

// JSON Web Key sets (RFC 7517) and JWS signatures (RFC 7515/7518) for the JWT verifier (internal
// to src/identity): HMAC keys ("oct", HS256), RSA public keys (RS256, 2048 bits or more) and EC
// P-256 public keys (ES256). OpenSSL underneath.

#include <openssl/evp.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace rampart::identity {

enum class JwsAlgorithm { kHs256, kRs256, kEs256 };

// "HS256" / "RS256" / "ES256"; InvalidArgument for anything else ("none" included).
Result<JwsAlgorithm> ParseJwsAlgorithm(std::string_view name);

struct EvpPkeyDeleter {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};

// One usable key. Immutable after parsing; an EVP_PKEY is safe to verify with from many
// threads at once.
struct Jwk {
  std::string kid;                       // empty when the key has none
  JwsAlgorithm algorithm;                // the one algorithm this key's type serves
  std::string secret;                    // HS256: the raw key bytes
  std::shared_ptr<EVP_PKEY> public_key;  // RS256 / ES256
};

struct JwkSet {
  std::vector<Jwk> keys;
  size_t skipped = 0;  // keys of a type or use this build does not verify with (e.g. OKP, "enc")
};

// Parses a JWKS document {"keys": [...]}. InvalidArgument naming the key (by index and kid) for
// a key of a supported type that is malformed (bad base64url, wrong point, RSA under 2048 bits,
// an HMAC secret under 32 bytes), for duplicate kids, and when no usable key is left.
Result<JwkSet> ParseJwks(std::string_view json_text);

// Whether `signature` (JWS form: HMAC bytes, RSA PKCS#1 v1.5, or ECDSA r||s of 64 bytes) signs
// `signing_input` under `key`. REQUIRES: key.algorithm is the token's algorithm.
bool VerifyJwsSignature(const Jwk& key, std::string_view signing_input, std::string_view signature);

}  // namespace rampart::identity
