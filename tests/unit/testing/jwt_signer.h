#pragma once

// Signing keys and JWTs for tests (made at test time with OpenSSL; no key is checked in): an RSA
// 2048 key (RS256), an EC P-256 key (ES256) or an HMAC secret (HS256), the JWKS document that
// publishes them, and compact tokens signed with them, including deliberately bad ones (any
// header, a tampered payload).

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace rampart::testing {

class TestSigningKey {
 public:
  static TestSigningKey Rsa(std::string kid);
  static TestSigningKey Ec(std::string kid);
  static TestSigningKey Hmac(std::string kid, std::string secret);

  const std::string& kid() const { return kid_; }
  const char* algorithm() const;  // "RS256" / "ES256" / "HS256"

  // This key as one JWK (public parts only for RSA and EC), a JSON object.
  std::string JwkJson() const;

  // Signs `header_json`.`payload_json` (both base64url-encoded here) with this key's algorithm,
  // whatever the header says.
  std::string Sign(std::string_view header_json, std::string_view payload_json) const;
  // A token with the usual header {"alg": <algorithm>, "typ": "JWT", "kid": <kid>}.
  std::string Token(std::string_view payload_json) const;

 private:
  enum class Kind { kRsa, kEc, kHmac };
  Kind kind_ = Kind::kHmac;
  std::string kid_;
  std::string secret_;
  std::shared_ptr<void> key_;  // EVP_PKEY
};

// {"keys": [...]} for `keys`.
std::string JwksJson(const std::vector<const TestSigningKey*>& keys);

// Base64url of `bytes` without padding (for hand-made tokens).
std::string Base64Url(std::string_view bytes);

}  // namespace rampart::testing
