#include "testing/jwt_signer.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rsa.h>

#include <cstdlib>
#include <stdexcept>

#include <fmt/core.h>

namespace rampart::testing {
namespace {

EVP_PKEY* Pkey(const std::shared_ptr<void>& key) { return static_cast<EVP_PKEY*>(key.get()); }

void Require(bool condition, const char* what) {
  if (!condition) throw std::runtime_error(std::string("jwt_signer: ") + what);
}

std::string BignumBytes(EVP_PKEY* key, const char* name, int pad_to) {
  BIGNUM* number = nullptr;
  Require(EVP_PKEY_get_bn_param(key, name, &number) == 1, name);
  std::string bytes(pad_to > 0 ? pad_to : BN_num_bytes(number), '\0');
  BN_bn2binpad(number, reinterpret_cast<unsigned char*>(bytes.data()),
               static_cast<int>(bytes.size()));
  BN_free(number);
  return bytes;
}

}  // namespace

std::string Base64Url(std::string_view bytes) {
  constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string text;
  uint32_t bits = 0;
  int count = 0;
  for (const char c : bytes) {
    bits = (bits << 8) | static_cast<uint8_t>(c);
    count += 8;
    while (count >= 6) {
      count -= 6;
      text.push_back(kAlphabet[(bits >> count) & 0x3f]);
    }
  }
  if (count > 0) text.push_back(kAlphabet[(bits << (6 - count)) & 0x3f]);
  return text;
}

TestSigningKey TestSigningKey::Rsa(std::string kid) {
  TestSigningKey key;
  key.kind_ = Kind::kRsa;
  key.kid_ = std::move(kid);
  EVP_PKEY* pkey = EVP_RSA_gen(2048);
  Require(pkey != nullptr, "RSA key generation");
  key.key_ = std::shared_ptr<void>(pkey, [](void* p) { EVP_PKEY_free(static_cast<EVP_PKEY*>(p)); });
  return key;
}

TestSigningKey TestSigningKey::Ec(std::string kid) {
  TestSigningKey key;
  key.kind_ = Kind::kEc;
  key.kid_ = std::move(kid);
  EVP_PKEY* pkey = EVP_EC_gen("P-256");
  Require(pkey != nullptr, "EC key generation");
  key.key_ = std::shared_ptr<void>(pkey, [](void* p) { EVP_PKEY_free(static_cast<EVP_PKEY*>(p)); });
  return key;
}

TestSigningKey TestSigningKey::Hmac(std::string kid, std::string secret) {
  TestSigningKey key;
  key.kind_ = Kind::kHmac;
  key.kid_ = std::move(kid);
  key.secret_ = std::move(secret);
  return key;
}

const char* TestSigningKey::algorithm() const {
  switch (kind_) {
    case Kind::kRsa: return "RS256";
    case Kind::kEc: return "ES256";
    case Kind::kHmac: return "HS256";
  }
  return "";
}

std::string TestSigningKey::JwkJson() const {
  const std::string kid = kid_.empty() ? "" : fmt::format(R"(,"kid":"{}")", kid_);
  switch (kind_) {
    case Kind::kRsa:
      return fmt::format(R"({{"kty":"RSA","use":"sig","n":"{}","e":"{}"{}}})",
                         Base64Url(BignumBytes(Pkey(key_), OSSL_PKEY_PARAM_RSA_N, 0)),
                         Base64Url(BignumBytes(Pkey(key_), OSSL_PKEY_PARAM_RSA_E, 0)), kid);
    case Kind::kEc:
      return fmt::format(R"({{"kty":"EC","crv":"P-256","x":"{}","y":"{}"{}}})",
                         Base64Url(BignumBytes(Pkey(key_), OSSL_PKEY_PARAM_EC_PUB_X, 32)),
                         Base64Url(BignumBytes(Pkey(key_), OSSL_PKEY_PARAM_EC_PUB_Y, 32)), kid);
    case Kind::kHmac: return fmt::format(R"({{"kty":"oct","k":"{}"{}}})", Base64Url(secret_), kid);
  }
  return "";
}

std::string TestSigningKey::Sign(std::string_view header_json,
                                 std::string_view payload_json) const {
  const std::string input = Base64Url(header_json) + "." + Base64Url(payload_json);
  std::string signature;
  if (kind_ == Kind::kHmac) {
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    Require(HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
                 reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac,
                 &length) != nullptr,
            "HMAC");
    signature.assign(reinterpret_cast<const char*>(mac), length);
  } else {
    EVP_MD_CTX* context = EVP_MD_CTX_new();
    size_t length = 0;
    Require(EVP_DigestSignInit(context, nullptr, EVP_sha256(), nullptr, Pkey(key_)) == 1,
            "sign init");
    Require(EVP_DigestSign(context, nullptr, &length,
                           reinterpret_cast<const unsigned char*>(input.data()), input.size()) == 1,
            "sign size");
    signature.resize(length);
    Require(EVP_DigestSign(context, reinterpret_cast<unsigned char*>(signature.data()), &length,
                           reinterpret_cast<const unsigned char*>(input.data()), input.size()) == 1,
            "sign");
    signature.resize(length);
    EVP_MD_CTX_free(context);
    if (kind_ == Kind::kEc) {
      // DER ECDSA-Sig-Value -> JWS's r || s.
      const auto* der = reinterpret_cast<const unsigned char*>(signature.data());
      ECDSA_SIG* ecdsa = d2i_ECDSA_SIG(nullptr, &der, static_cast<long>(signature.size()));
      Require(ecdsa != nullptr, "ECDSA signature");
      std::string raw(64, '\0');
      BN_bn2binpad(ECDSA_SIG_get0_r(ecdsa), reinterpret_cast<unsigned char*>(raw.data()), 32);
      BN_bn2binpad(ECDSA_SIG_get0_s(ecdsa), reinterpret_cast<unsigned char*>(raw.data()) + 32, 32);
      ECDSA_SIG_free(ecdsa);
      signature = std::move(raw);
    }
  }
  return input + "." + Base64Url(signature);
}

std::string TestSigningKey::Token(std::string_view payload_json) const {
  const std::string kid = kid_.empty() ? "" : fmt::format(R"(,"kid":"{}")", kid_);
  return Sign(fmt::format(R"({{"alg":"{}","typ":"JWT"{}}})", algorithm(), kid), payload_json);
}

std::string JwksJson(const std::vector<const TestSigningKey*>& keys) {
  std::string json = R"({"keys":[)";
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i > 0) json += ",";
    json += keys[i]->JwkJson();
  }
  return json + "]}";
}

}  // namespace rampart::testing
