#include "crypto/digest.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "crypto/openssl_algorithms.h"

namespace rampart::crypto {
namespace internal {
namespace {

EVP_MAC_CTX* HmacTemplateFor(EVP_MAC* hmac, const char* digest_name) {
  EVP_MAC_CTX* context = EVP_MAC_CTX_new(hmac);
  if (context == nullptr) OpenSslFailure("EVP_MAC_CTX_new(HMAC)");
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, const_cast<char*>(digest_name), 0),
      OSSL_PARAM_construct_end()};
  if (EVP_MAC_CTX_set_params(context, params) != 1) OpenSslFailure(digest_name);
  return context;
}

Algorithms Fetch() {
  Algorithms algorithms;
  auto required = [](auto* fetched, const char* name) {
    if (fetched == nullptr) {
      std::fprintf(stderr, "rampart: OpenSSL lacks %s (OpenSSL 3.0 with its default provider)\n",
                   name);
      std::abort();
    }
    return fetched;
  };
  algorithms.sha256 = required(EVP_MD_fetch(nullptr, "SHA256", nullptr), "SHA256");
  algorithms.sm3 = required(EVP_MD_fetch(nullptr, "SM3", nullptr), "SM3");
  algorithms.hmac = required(EVP_MAC_fetch(nullptr, "HMAC", nullptr), "HMAC");
  algorithms.hkdf = required(EVP_KDF_fetch(nullptr, "HKDF", nullptr), "HKDF");
  algorithms.aes_256_gcm =
      required(EVP_CIPHER_fetch(nullptr, "AES-256-GCM", nullptr), "AES-256-GCM");
  algorithms.sm4_ctr = required(EVP_CIPHER_fetch(nullptr, "SM4-CTR", nullptr), "SM4-CTR");
  algorithms.hmac_sha256 = HmacTemplateFor(algorithms.hmac, "SHA256");
  algorithms.hmac_sm3 = HmacTemplateFor(algorithms.hmac, "SM3");
  return algorithms;
}

}  // namespace

const Algorithms& GetAlgorithms() {
  // Never freed: the objects live as long as the process (freeing them at exit would race with
  // threads still hashing during shutdown).
  static const Algorithms* const algorithms = new Algorithms(Fetch());
  return *algorithms;
}

void OpenSslFailure(const char* what) {
  std::fprintf(stderr, "rampart: OpenSSL failed in %s (out of memory?)\n", what);
  std::abort();
}

MacContext NewHmac(DigestAlgorithm algorithm, const void* key, size_t key_length) {
  MacContext context(EVP_MAC_CTX_dup(GetAlgorithms().HmacTemplate(algorithm)));
  if (context == nullptr) OpenSslFailure("EVP_MAC_CTX_dup");
  // HMAC accepts an empty key, but EVP_MAC_init reads a null pointer as "no key given".
  static const unsigned char kEmpty = 0;
  const auto* bytes = key_length == 0 ? &kEmpty : static_cast<const unsigned char*>(key);
  if (EVP_MAC_init(context.get(), bytes, key_length, nullptr) != 1) {
    OpenSslFailure("EVP_MAC_init");
  }
  return context;
}

}  // namespace internal

namespace {

const unsigned char* Bytes(std::string_view data) {
  return reinterpret_cast<const unsigned char*>(data.data());
}

char ToLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (ToLower(a[i]) != ToLower(b[i])) return false;
  }
  return true;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string_view DigestName(DigestAlgorithm algorithm) {
  return algorithm == DigestAlgorithm::kSm3 ? "sm3" : "sha256";
}

Result<DigestAlgorithm> ParseDigest(std::string_view name) {
  if (EqualsIgnoringCase(name, "sha256")) return DigestAlgorithm::kSha256;
  if (EqualsIgnoringCase(name, "sm3")) return DigestAlgorithm::kSm3;
  return InvalidArgument("unknown digest '{}' (expected sha256 or sm3)", name);
}

Digest HashParts(DigestAlgorithm algorithm, std::initializer_list<std::string_view> parts) {
  // One context per thread and algorithm, re-initialised per call: EVP_Digest would allocate
  // and free a context (and its provider state) for every hash.
  struct ContextDeleter {
    void operator()(EVP_MD_CTX* context) const { EVP_MD_CTX_free(context); }
  };
  thread_local std::unique_ptr<EVP_MD_CTX, ContextDeleter> contexts[2];
  auto& context = contexts[algorithm == DigestAlgorithm::kSm3 ? 1 : 0];
  if (context == nullptr) {
    context.reset(EVP_MD_CTX_new());
    if (context == nullptr) internal::OpenSslFailure("EVP_MD_CTX_new");
  }
  if (EVP_DigestInit_ex2(context.get(), internal::GetAlgorithms().Md(algorithm), nullptr) != 1) {
    internal::OpenSslFailure("EVP_DigestInit_ex2");
  }
  for (const std::string_view part : parts) {
    if (EVP_DigestUpdate(context.get(), part.data(), part.size()) != 1) {
      internal::OpenSslFailure("EVP_DigestUpdate");
    }
  }
  Digest digest;
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(context.get(), digest.data(), &length) != 1 || length != digest.size()) {
    internal::OpenSslFailure("EVP_DigestFinal_ex");
  }
  return digest;
}

Digest Hash(DigestAlgorithm algorithm, std::string_view data) {
  return HashParts(algorithm, {data});
}

Hasher::Hasher(DigestAlgorithm algorithm) {
  EVP_MD_CTX* context = EVP_MD_CTX_new();
  if (context == nullptr ||
      EVP_DigestInit_ex2(context, internal::GetAlgorithms().Md(algorithm), nullptr) != 1) {
    internal::OpenSslFailure("EVP_DigestInit_ex2");
  }
  context_ = context;
}

Hasher::Hasher(Hasher&& other) noexcept : context_(other.context_) { other.context_ = nullptr; }

Hasher& Hasher::operator=(Hasher&& other) noexcept {
  if (this != &other) {
    EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(context_));
    context_ = other.context_;
    other.context_ = nullptr;
  }
  return *this;
}

Hasher::~Hasher() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(context_)); }

void Hasher::Update(std::string_view data) {
  if (EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(context_), data.data(), data.size()) != 1) {
    internal::OpenSslFailure("EVP_DigestUpdate");
  }
}

Digest Hasher::Finish() {
  Digest digest;
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(context_), digest.data(), &length) != 1 ||
      length != digest.size()) {
    internal::OpenSslFailure("EVP_DigestFinal_ex");
  }
  return digest;
}

Digest Hmac(DigestAlgorithm algorithm, std::string_view key, std::string_view data) {
  internal::MacContext context = internal::NewHmac(algorithm, key.data(), key.size());
  Digest digest;
  size_t length = 0;
  if (EVP_MAC_update(context.get(), Bytes(data), data.size()) != 1 ||
      EVP_MAC_final(context.get(), digest.data(), &length, digest.size()) != 1 ||
      length != digest.size()) {
    internal::OpenSslFailure("HMAC");
  }
  return digest;
}

std::string Hkdf(DigestAlgorithm algorithm, std::string_view key, std::string_view salt,
                 std::string_view info, size_t length) {
  if (length == 0 || length > 255 * 32) {
    std::fprintf(stderr, "rampart: HKDF output length %zu outside 1..8160\n", length);
    std::abort();
  }
  EVP_KDF_CTX* context = EVP_KDF_CTX_new(internal::GetAlgorithms().hkdf);
  if (context == nullptr) internal::OpenSslFailure("EVP_KDF_CTX_new(HKDF)");
  // RFC 5869: an absent salt is HashLen zero bytes, which HMAC pads to the same block as an
  // empty salt, so an empty salt is simply left out. An empty key (IKM) is allowed; OpenSSL
  // needs a non-null pointer for it.
  static char empty = 0;
  char* key_bytes = key.empty() ? &empty : const_cast<char*>(key.data());
  const char* digest_name = algorithm == DigestAlgorithm::kSm3 ? "SM3" : "SHA256";
  OSSL_PARAM params[5];
  size_t count = 0;
  params[count++] =
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, const_cast<char*>(digest_name), 0);
  params[count++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, key_bytes, key.size());
  if (!salt.empty()) {
    params[count++] = OSSL_PARAM_construct_octet_string(
        OSSL_KDF_PARAM_SALT, const_cast<char*>(salt.data()), salt.size());
  }
  if (!info.empty()) {
    params[count++] = OSSL_PARAM_construct_octet_string(
        OSSL_KDF_PARAM_INFO, const_cast<char*>(info.data()), info.size());
  }
  params[count] = OSSL_PARAM_construct_end();
  std::string output(length, '\0');
  const int derived = EVP_KDF_derive(context, reinterpret_cast<unsigned char*>(output.data()),
                                     output.size(), params);
  EVP_KDF_CTX_free(context);
  if (derived != 1) internal::OpenSslFailure("EVP_KDF_derive(HKDF)");
  return output;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string ToHex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex(bytes.size() * 2, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    const auto byte = static_cast<unsigned char>(bytes[i]);
    hex[2 * i] = kDigits[byte >> 4];
    hex[2 * i + 1] = kDigits[byte & 0xf];
  }
  return hex;
}

std::string ToHex(const Digest& digest) {
  return ToHex(std::string_view(reinterpret_cast<const char*>(digest.data()), digest.size()));
}

Result<std::string> FromHex(std::string_view hex) {
  if (hex.size() % 2 != 0) return InvalidArgument("hex string of odd length {}", hex.size());
  std::string bytes(hex.size() / 2, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    const int high = HexValue(hex[2 * i]);
    const int low = HexValue(hex[2 * i + 1]);
    if (high < 0 || low < 0) {
      return InvalidArgument("not a hex digit at offset {}", high < 0 ? 2 * i : 2 * i + 1);
    }
    bytes[i] = static_cast<char>(high << 4 | low);
  }
  return bytes;
}

std::string RandomBytes(size_t count) {
  std::string bytes(count, '\0');
  constexpr size_t kChunk = 1 << 30;  // RAND_bytes takes an int
  for (size_t done = 0; done < count; done += kChunk) {
    const size_t chunk = std::min(kChunk, count - done);
    if (RAND_bytes(reinterpret_cast<unsigned char*>(bytes.data() + done),
                   static_cast<int>(chunk)) != 1) {
      std::fprintf(stderr, "rampart: the random number generator failed\n");
      std::abort();
    }
  }
  return bytes;
}

}  // namespace rampart::crypto
