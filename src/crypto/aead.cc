#include "crypto/aead.h"

#include <openssl/crypto.h>
#include <openssl/err.h>

#include <algorithm>
#include <array>
#include <climits>
#include <memory>

#include "crypto/digest.h"
#include "crypto/openssl_algorithms.h"

namespace rampart::crypto {
namespace {

// The one error for every inauthentic input (wrong key, wrong associated data, a flipped bit, a
// truncated nonce or tag): telling them apart would help an attacker and nobody else.
constexpr std::string_view kDecryptionFailed =
    "decryption failed: the ciphertext is not authentic for this key and associated data";

constexpr size_t kGcmNonceBytes = 12;
constexpr size_t kGcmTagBytes = 16;
constexpr size_t kSm4NonceBytes = 16;
constexpr size_t kSm4KeyBytes = 16;
constexpr size_t kSm3MacKeyBytes = 32;
constexpr size_t kSm3TagBytes = 32;
// HKDF-SM3 info for the SM4 suite's key split (docs/crypto.md): changing it changes every key.
constexpr std::string_view kSm4KeySplitInfo = "rampart aead sm4-ctr-hmac-sm3 v1 key split";
// EVP_*Update take an int length: larger inputs go through in pieces of this size.
constexpr size_t kUpdateChunk = size_t{1} << 30;

struct CipherContextDeleter {
  void operator()(EVP_CIPHER_CTX* context) const { EVP_CIPHER_CTX_free(context); }
};
using CipherContext = std::unique_ptr<EVP_CIPHER_CTX, CipherContextDeleter>;

// One cipher context per thread and suite, reused across calls: after the first initialisation
// with the cipher, re-initialising with a null cipher keeps the provider's context and only
// resets key and IV (no allocation per call).
EVP_CIPHER_CTX* ThreadContext(AeadAlgorithm algorithm, const EVP_CIPHER*& cipher_for_init) {
  thread_local std::array<CipherContext, 2> contexts;
  CipherContext& context = contexts[algorithm == AeadAlgorithm::kAes256Gcm ? 0 : 1];
  const internal::Algorithms& algorithms = internal::GetAlgorithms();
  if (context == nullptr) {
    context.reset(EVP_CIPHER_CTX_new());
    if (context == nullptr) internal::OpenSslFailure("EVP_CIPHER_CTX_new");
    cipher_for_init =
        algorithm == AeadAlgorithm::kAes256Gcm ? algorithms.aes_256_gcm : algorithms.sm4_ctr;
  } else {
    cipher_for_init = nullptr;
  }
  return context.get();
}

const unsigned char* Bytes(std::string_view data) {
  return reinterpret_cast<const unsigned char*>(data.data());
}
unsigned char* MutableBytes(std::string& data) {
  return reinterpret_cast<unsigned char*>(data.data());
}

// Runs `input` through an initialised cipher context into `output` (same length). False on an
// OpenSSL error.
bool CipherUpdate(EVP_CIPHER_CTX* context, std::string_view input, unsigned char* output) {
  for (size_t done = 0; done < input.size(); done += kUpdateChunk) {
    const size_t chunk = std::min(kUpdateChunk, input.size() - done);
    int written = 0;
    if (EVP_CipherUpdate(context, output + done, &written, Bytes(input) + done,
                         static_cast<int>(chunk)) != 1 ||
        static_cast<size_t>(written) != chunk) {
      return false;
    }
  }
  return true;
}

// --- AES-256-GCM ------------------------------------------------------------------------------

Result<Sealed> SealAesGcm(std::string_view key, std::string nonce, std::string_view plaintext,
                          std::string_view associated_data) {
  const EVP_CIPHER* cipher = nullptr;
  EVP_CIPHER_CTX* context = ThreadContext(AeadAlgorithm::kAes256Gcm, cipher);
  Sealed sealed;
  sealed.nonce = std::move(nonce);
  sealed.ciphertext.resize(plaintext.size());
  sealed.tag.resize(kGcmTagBytes);
  int written = 0;
  bool ok = EVP_CipherInit_ex2(context, cipher, Bytes(key), Bytes(sealed.nonce), 1, nullptr) == 1;
  for (size_t done = 0; ok && done < associated_data.size(); done += kUpdateChunk) {
    const size_t chunk = std::min(kUpdateChunk, associated_data.size() - done);
    ok = EVP_CipherUpdate(context, nullptr, &written, Bytes(associated_data) + done,
                          static_cast<int>(chunk)) == 1;
  }
  ok = ok && CipherUpdate(context, plaintext, MutableBytes(sealed.ciphertext)) &&
       EVP_CipherFinal_ex(context, nullptr, &written) == 1 &&
       EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, kGcmTagBytes, sealed.tag.data()) == 1;
  if (!ok) {
    ERR_clear_error();
    return Internal("AES-256-GCM encryption failed in OpenSSL");
  }
  return sealed;
}

Result<std::string> OpenAesGcm(std::string_view key, const Sealed& sealed,
                               std::string_view associated_data) {
  if (sealed.nonce.size() != kGcmNonceBytes || sealed.tag.size() != kGcmTagBytes) {
    return InvalidArgument("{}", kDecryptionFailed);
  }
  const EVP_CIPHER* cipher = nullptr;
  EVP_CIPHER_CTX* context = ThreadContext(AeadAlgorithm::kAes256Gcm, cipher);
  std::string plaintext(sealed.ciphertext.size(), '\0');
  int written = 0;
  bool ok = EVP_CipherInit_ex2(context, cipher, Bytes(key), Bytes(sealed.nonce), 0, nullptr) == 1;
  for (size_t done = 0; ok && done < associated_data.size(); done += kUpdateChunk) {
    const size_t chunk = std::min(kUpdateChunk, associated_data.size() - done);
    ok = EVP_CipherUpdate(context, nullptr, &written, Bytes(associated_data) + done,
                          static_cast<int>(chunk)) == 1;
  }
  ok = ok && CipherUpdate(context, sealed.ciphertext, MutableBytes(plaintext)) &&
       EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, kGcmTagBytes,
                           const_cast<char*>(sealed.tag.data())) == 1 &&
       EVP_CipherFinal_ex(context, nullptr, &written) == 1;
  if (!ok) {
    // The plaintext was written before the tag was checked: never let it out.
    OPENSSL_cleanse(plaintext.data(), plaintext.size());
    ERR_clear_error();
    return InvalidArgument("{}", kDecryptionFailed);
  }
  return plaintext;
}

// --- SM4-CTR + HMAC-SM3 -----------------------------------------------------------------------

struct Sm4Keys {
  std::string material;  // 48 bytes: the SM4 key, then the MAC key
  std::string_view cipher_key() const { return std::string_view(material).substr(0, 16); }
  std::string_view mac_key() const { return std::string_view(material).substr(16, 32); }
  ~Sm4Keys() { OPENSSL_cleanse(material.data(), material.size()); }
};

Sm4Keys SplitSm4Key(std::string_view key) {
  return Sm4Keys{Hkdf(DigestAlgorithm::kSm3, key, /*salt=*/"", kSm4KeySplitInfo,
                      kSm4KeyBytes + kSm3MacKeyBytes)};
}

void AppendLength(EVP_MAC_CTX* context, size_t length, bool& ok) {
  unsigned char encoded[8];
  for (int i = 7; i >= 0; --i) {
    encoded[i] = static_cast<unsigned char>(length & 0xff);
    length >>= 8;
  }
  ok = ok && EVP_MAC_update(context, encoded, sizeof(encoded)) == 1;
}

// HMAC-SM3(mac_key, len64(ad) || ad || len64(nonce) || nonce || len64(ct) || ct), lengths as
// 64-bit big-endian byte counts. Empty on an OpenSSL error.
std::string Sm4Tag(std::string_view mac_key, std::string_view associated_data,
                   std::string_view nonce, std::string_view ciphertext) {
  internal::MacContext context =
      internal::NewHmac(DigestAlgorithm::kSm3, mac_key.data(), mac_key.size());
  bool ok = true;
  for (std::string_view part : {associated_data, nonce, ciphertext}) {
    AppendLength(context.get(), part.size(), ok);
    ok = ok && EVP_MAC_update(context.get(), Bytes(part), part.size()) == 1;
  }
  std::string tag(kSm3TagBytes, '\0');
  size_t length = 0;
  ok = ok && EVP_MAC_final(context.get(), MutableBytes(tag), &length, tag.size()) == 1 &&
       length == kSm3TagBytes;
  if (!ok) {
    ERR_clear_error();
    return {};
  }
  return tag;
}

// SM4-CTR of `input` (encryption and decryption are the same operation). False on an error.
bool Sm4Ctr(std::string_view cipher_key, std::string_view nonce, std::string_view input,
            unsigned char* output) {
  const EVP_CIPHER* cipher = nullptr;
  EVP_CIPHER_CTX* context = ThreadContext(AeadAlgorithm::kSm4CtrHmacSm3, cipher);
  int written = 0;
  const bool ok =
      EVP_CipherInit_ex2(context, cipher, Bytes(cipher_key), Bytes(nonce), 1, nullptr) == 1 &&
      CipherUpdate(context, input, output) && EVP_CipherFinal_ex(context, nullptr, &written) == 1;
  if (!ok) ERR_clear_error();
  return ok;
}

Result<Sealed> SealSm4(std::string_view key, std::string nonce, std::string_view plaintext,
                       std::string_view associated_data) {
  const Sm4Keys keys = SplitSm4Key(key);
  Sealed sealed;
  sealed.nonce = std::move(nonce);
  sealed.ciphertext.resize(plaintext.size());
  if (!Sm4Ctr(keys.cipher_key(), sealed.nonce, plaintext, MutableBytes(sealed.ciphertext))) {
    return Internal("SM4-CTR encryption failed in OpenSSL");
  }
  sealed.tag = Sm4Tag(keys.mac_key(), associated_data, sealed.nonce, sealed.ciphertext);
  if (sealed.tag.empty()) return Internal("HMAC-SM3 failed in OpenSSL");
  return sealed;
}

Result<std::string> OpenSm4(std::string_view key, const Sealed& sealed,
                            std::string_view associated_data) {
  if (sealed.nonce.size() != kSm4NonceBytes || sealed.tag.size() != kSm3TagBytes) {
    return InvalidArgument("{}", kDecryptionFailed);
  }
  const Sm4Keys keys = SplitSm4Key(key);
  // Encrypt-then-MAC: the tag is checked, in constant time, before anything is decrypted.
  const std::string expected =
      Sm4Tag(keys.mac_key(), associated_data, sealed.nonce, sealed.ciphertext);
  if (expected.empty()) return Internal("HMAC-SM3 failed in OpenSSL");
  if (!ConstantTimeEquals(expected, sealed.tag)) return InvalidArgument("{}", kDecryptionFailed);
  std::string plaintext(sealed.ciphertext.size(), '\0');
  if (!Sm4Ctr(keys.cipher_key(), sealed.nonce, sealed.ciphertext, MutableBytes(plaintext))) {
    return Internal("SM4-CTR decryption failed in OpenSSL");
  }
  return plaintext;
}

Status CheckKey(std::string_view key) {
  if (key.size() != kAeadKeyBytes) {
    return InvalidArgument("an AEAD key is {} bytes, not {}", kAeadKeyBytes, key.size());
  }
  return Status::Ok();
}

}  // namespace

std::string_view AeadName(AeadAlgorithm algorithm) {
  return algorithm == AeadAlgorithm::kSm4CtrHmacSm3 ? "sm4-ctr-hmac-sm3" : "aes-256-gcm";
}

Result<AeadAlgorithm> ParseAead(std::string_view name) {
  if (name == "aes-256-gcm") return AeadAlgorithm::kAes256Gcm;
  if (name == "sm4-ctr-hmac-sm3") return AeadAlgorithm::kSm4CtrHmacSm3;
  return InvalidArgument("unknown AEAD suite '{}' (expected aes-256-gcm or sm4-ctr-hmac-sm3)",
                         name);
}

size_t AeadNonceBytes(AeadAlgorithm algorithm) {
  return algorithm == AeadAlgorithm::kSm4CtrHmacSm3 ? kSm4NonceBytes : kGcmNonceBytes;
}

size_t AeadTagBytes(AeadAlgorithm algorithm) {
  return algorithm == AeadAlgorithm::kSm4CtrHmacSm3 ? kSm3TagBytes : kGcmTagBytes;
}

Result<Sealed> Seal(AeadAlgorithm algorithm, std::string_view key, std::string_view plaintext,
                    std::string_view associated_data) {
  return SealWithNonce(algorithm, key, RandomBytes(AeadNonceBytes(algorithm)), plaintext,
                       associated_data);
}

Result<Sealed> SealWithNonce(AeadAlgorithm algorithm, std::string_view key, std::string_view nonce,
                             std::string_view plaintext, std::string_view associated_data) {
  RETURN_IF_ERROR(CheckKey(key));
  if (nonce.size() != AeadNonceBytes(algorithm)) {
    return InvalidArgument("a {} nonce is {} bytes, not {}", AeadName(algorithm),
                           AeadNonceBytes(algorithm), nonce.size());
  }
  if (algorithm == AeadAlgorithm::kSm4CtrHmacSm3) {
    return SealSm4(key, std::string(nonce), plaintext, associated_data);
  }
  return SealAesGcm(key, std::string(nonce), plaintext, associated_data);
}

Result<std::string> Open(AeadAlgorithm algorithm, std::string_view key, const Sealed& sealed,
                         std::string_view associated_data) {
  RETURN_IF_ERROR(CheckKey(key));
  if (algorithm == AeadAlgorithm::kSm4CtrHmacSm3) return OpenSm4(key, sealed, associated_data);
  return OpenAesGcm(key, sealed, associated_data);
}

}  // namespace rampart::crypto
