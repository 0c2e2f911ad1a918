#include "identity/jwks.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>

#include <set>

#include "identity/encoding.h"
#include "json/reader.h"

namespace rampart::identity {
namespace {

constexpr int kMinRsaBits = 2048;
constexpr size_t kMinHmacSecretBytes = 32;  // RFC 7518 §3.2: at least the hash's size

struct BignumDeleter {
  void operator()(BIGNUM* number) const { BN_free(number); }
};
struct ParamBuildDeleter {
  void operator()(OSSL_PARAM_BLD* build) const { OSSL_PARAM_BLD_free(build); }
};
struct ParamDeleter {
  void operator()(OSSL_PARAM* params) const { OSSL_PARAM_free(params); }
};
struct PkeyContextDeleter {
  void operator()(EVP_PKEY_CTX* context) const { EVP_PKEY_CTX_free(context); }
};
struct MdContextDeleter {
  void operator()(EVP_MD_CTX* context) const { EVP_MD_CTX_free(context); }
};
struct EcdsaSigDeleter {
  void operator()(ECDSA_SIG* signature) const { ECDSA_SIG_free(signature); }
};

// A base64url member of a JWK, decoded; InvalidArgument when absent, not a string or malformed.
Result<std::string> DecodedMember(const json::Value& jwk, std::string_view name) {
  const std::optional<json::Value> member = jwk.Find(name);
  if (!member) return InvalidArgument("'{}' is missing", name);
  ASSIGN_OR_RETURN(const std::string_view text, member->GetString(name));
  std::optional<std::string> bytes = Base64UrlDecode(text);
  if (!bytes || bytes->empty()) return InvalidArgument("'{}' is not base64url", name);
  return std::move(*bytes);
}

Result<std::shared_ptr<EVP_PKEY>> FromData(const char* type, OSSL_PARAM_BLD* build) {
  std::unique_ptr<OSSL_PARAM, ParamDeleter> params(OSSL_PARAM_BLD_to_param(build));
  std::unique_ptr<EVP_PKEY_CTX, PkeyContextDeleter> context(
      EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr));
  EVP_PKEY* key = nullptr;
  if (params == nullptr || context == nullptr || EVP_PKEY_fromdata_init(context.get()) != 1 ||
      EVP_PKEY_fromdata(context.get(), &key, EVP_PKEY_PUBLIC_KEY, params.get()) != 1) {
    return InvalidArgument("not a valid {} public key", type);
  }
  return std::shared_ptr<EVP_PKEY>(key, EvpPkeyDeleter());
}

Result<std::shared_ptr<EVP_PKEY>> RsaKey(const json::Value& jwk) {
  ASSIGN_OR_RETURN(const std::string modulus, DecodedMember(jwk, "n"));
  ASSIGN_OR_RETURN(const std::string exponent, DecodedMember(jwk, "e"));
  std::unique_ptr<BIGNUM, BignumDeleter> n(
      BN_bin2bn(reinterpret_cast<const unsigned char*>(modulus.data()),
                static_cast<int>(modulus.size()), nullptr));
  std::unique_ptr<BIGNUM, BignumDeleter> e(
      BN_bin2bn(reinterpret_cast<const unsigned char*>(exponent.data()),
                static_cast<int>(exponent.size()), nullptr));
  if (n == nullptr || e == nullptr) return InvalidArgument("not a valid RSA public key");
  if (BN_num_bits(n.get()) < kMinRsaBits) {
    return InvalidArgument("RSA key of {} bits (at least {} are required)", BN_num_bits(n.get()),
                           kMinRsaBits);
  }
  std::unique_ptr<OSSL_PARAM_BLD, ParamBuildDeleter> build(OSSL_PARAM_BLD_new());
  if (build == nullptr ||
      OSSL_PARAM_BLD_push_BN(build.get(), OSSL_PKEY_PARAM_RSA_N, n.get()) != 1 ||
      OSSL_PARAM_BLD_push_BN(build.get(), OSSL_PKEY_PARAM_RSA_E, e.get()) != 1) {
    return InvalidArgument("not a valid RSA public key");
  }
  return FromData("RSA", build.get());
}

Result<std::shared_ptr<EVP_PKEY>> EcP256Key(const json::Value& jwk) {
  const std::optional<json::Value> curve = jwk.Find("crv");
  if (!curve) return InvalidArgument("'crv' is missing");
  ASSIGN_OR_RETURN(const std::string_view curve_name, curve->GetString("crv"));
  if (curve_name != "P-256") {
    return InvalidArgument("curve '{}' is not supported (only P-256, for ES256)", curve_name);
  }
  ASSIGN_OR_RETURN(const std::string x, DecodedMember(jwk, "x"));
  ASSIGN_OR_RETURN(const std::string y, DecodedMember(jwk, "y"));
  if (x.size() != 32 || y.size() != 32) {
    return InvalidArgument("P-256 coordinates must be 32 bytes each");
  }
  const std::string point = "\x04" + x + y;  // SEC 1 uncompressed form
  std::unique_ptr<OSSL_PARAM_BLD, ParamBuildDeleter> build(OSSL_PARAM_BLD_new());
  if (build == nullptr ||
      OSSL_PARAM_BLD_push_utf8_string(build.get(), OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) !=
          1 ||
      OSSL_PARAM_BLD_push_octet_string(build.get(), OSSL_PKEY_PARAM_PUB_KEY, point.data(),
                                       point.size()) != 1) {
    return InvalidArgument("not a valid EC public key");
  }
  ASSIGN_OR_RETURN(std::shared_ptr<EVP_PKEY> key, FromData("EC", build.get()));
  // fromdata decodes the point; the check also rejects points not on the curve.
  std::unique_ptr<EVP_PKEY_CTX, PkeyContextDeleter> check(
      EVP_PKEY_CTX_new_from_pkey(nullptr, key.get(), nullptr));
  if (check == nullptr || EVP_PKEY_public_check(check.get()) != 1) {
    return InvalidArgument("the EC point is not on P-256");
  }
  return key;
}

// Reads one JWK; nullopt (with ok) for a key this build skips.
Result<std::optional<Jwk>> ReadJwk(const json::Value& jwk) {
  if (!jwk.IsObject()) return InvalidArgument("not an object");
  const std::optional<json::Value> type_member = jwk.Find("kty");
  if (!type_member) return InvalidArgument("'kty' is missing");
  ASSIGN_OR_RETURN(const std::string_view type, type_member->GetString("kty"));
  if (const std::optional<json::Value> use = jwk.Find("use")) {
    ASSIGN_OR_RETURN(const std::string_view use_text, use->GetString("use"));
    if (use_text != "sig") return std::optional<Jwk>();
  }
  Jwk key;
  if (type == "oct") {
    key.algorithm = JwsAlgorithm::kHs256;
    ASSIGN_OR_RETURN(key.secret, DecodedMember(jwk, "k"));
    if (key.secret.size() < kMinHmacSecretBytes) {
      return InvalidArgument("HMAC secret of {} bytes (at least {} are required)",
                             key.secret.size(), kMinHmacSecretBytes);
    }
  } else if (type == "RSA") {
    key.algorithm = JwsAlgorithm::kRs256;
    ASSIGN_OR_RETURN(key.public_key, RsaKey(jwk));
  } else if (type == "EC") {
    key.algorithm = JwsAlgorithm::kEs256;
    ASSIGN_OR_RETURN(key.public_key, EcP256Key(jwk));
  } else {
    return std::optional<Jwk>();
  }
  if (const std::optional<json::Value> algorithm = jwk.Find("alg")) {
    // A key that names another algorithm (RS384, PS256, ...) is not one this build verifies.
    ASSIGN_OR_RETURN(const std::string_view name, algorithm->GetString("alg"));
    const Result<JwsAlgorithm> parsed = ParseJwsAlgorithm(name);
    if (!parsed.ok()) return std::optional<Jwk>();
    if (*parsed != key.algorithm) {
      return InvalidArgument("'alg' {} does not fit key type '{}'", name, type);
    }
  }
  if (const std::optional<json::Value> kid = jwk.Find("kid")) {
    ASSIGN_OR_RETURN(const std::string_view kid_text, kid->GetString("kid"));
    key.kid = std::string(kid_text);
  }
  return std::optional<Jwk>(std::move(key));
}

}  // namespace

Result<JwsAlgorithm> ParseJwsAlgorithm(std::string_view name) {
  if (name == "HS256") return JwsAlgorithm::kHs256;
  if (name == "RS256") return JwsAlgorithm::kRs256;
  if (name == "ES256") return JwsAlgorithm::kEs256;
  return InvalidArgument("unsupported JWS algorithm '{}' (supported: HS256, RS256, ES256)", name);
}

Result<JwkSet> ParseJwks(std::string_view json_text) {
  json::Parser parser;
  ASSIGN_OR_RETURN(const json::Value document, parser.Parse(json_text));
  const std::optional<json::Value> keys = document.Find("keys");
  if (!keys || !keys->IsArray()) return InvalidArgument("not a JWKS: no 'keys' array");
  JwkSet set;
  std::set<std::string> kids;
  size_t index = 0;
  for (const simdjson::dom::element element : keys->Array()) {
    Result<std::optional<Jwk>> key = ReadJwk(json::Value(element));
    if (!key.ok()) {
      return key.status().WithContext(fmt::format("key {}", index));
    }
    ++index;
    if (!key->has_value()) {
      ++set.skipped;
      continue;
    }
    if (!(*key)->kid.empty() && !kids.insert((*key)->kid).second) {
      return InvalidArgument("key {}: duplicate kid '{}'", index - 1, (*key)->kid);
    }
    set.keys.push_back(std::move(**key));
  }
  if (set.keys.empty()) return InvalidArgument("no usable key (HS256, RS256 or ES256)");
  return set;
}

bool VerifyJwsSignature(const Jwk& key, std::string_view signing_input,
                        std::string_view signature) {
  if (key.algorithm == JwsAlgorithm::kHs256) {
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    if (HMAC(EVP_sha256(), key.secret.data(), static_cast<int>(key.secret.size()),
             reinterpret_cast<const unsigned char*>(signing_input.data()), signing_input.size(),
             mac, &length) == nullptr) {
      return false;
    }
    return ConstantTimeEquals(std::string_view(reinterpret_cast<const char*>(mac), length),
                              signature);
  }
  std::string der;
  std::string_view verified = signature;
  if (key.algorithm == JwsAlgorithm::kEs256) {
    // JWS carries r || s (32 bytes each); OpenSSL verifies the DER ECDSA-Sig-Value.
    if (signature.size() != 64) return false;
    std::unique_ptr<ECDSA_SIG, EcdsaSigDeleter> ecdsa(ECDSA_SIG_new());
    BIGNUM* r = BN_bin2bn(reinterpret_cast<const unsigned char*>(signature.data()), 32, nullptr);
    BIGNUM* s =
        BN_bin2bn(reinterpret_cast<const unsigned char*>(signature.data()) + 32, 32, nullptr);
    if (ecdsa == nullptr || r == nullptr || s == nullptr ||
        ECDSA_SIG_set0(ecdsa.get(), r, s) != 1) {
      BN_free(r);
      BN_free(s);
      return false;
    }
    unsigned char* encoded = nullptr;
    const int length = i2d_ECDSA_SIG(ecdsa.get(), &encoded);
    if (length <= 0) return false;
    der.assign(reinterpret_cast<const char*>(encoded), static_cast<size_t>(length));
    OPENSSL_free(encoded);
    verified = der;
  }
  std::unique_ptr<EVP_MD_CTX, MdContextDeleter> context(EVP_MD_CTX_new());
  return context != nullptr &&
         EVP_DigestVerifyInit(context.get(), nullptr, EVP_sha256(), nullptr,
                              key.public_key.get()) == 1 &&
         EVP_DigestVerify(context.get(), reinterpret_cast<const unsigned char*>(verified.data()),
                          verified.size(),
                          reinterpret_cast<const unsigned char*>(signing_input.data()),
                          signing_input.size()) == 1;
}

}  // namespace rampart::identity
