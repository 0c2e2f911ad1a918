#include "crypto/signature.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <climits>

#include "crypto/digest.h"
#include "crypto/openssl_algorithms.h"

namespace rampart::crypto {
namespace {

struct BioDeleter {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct MdContextDeleter {
  void operator()(EVP_MD_CTX* context) const { EVP_MD_CTX_free(context); }
};
using MdContext = std::unique_ptr<EVP_MD_CTX, MdContextDeleter>;

std::shared_ptr<void> Own(EVP_PKEY* key) {
  return std::shared_ptr<void>(
      key, [](void* pointer) { EVP_PKEY_free(static_cast<EVP_PKEY*>(pointer)); });
}

EVP_PKEY* Pkey(const std::shared_ptr<void>& key) { return static_cast<EVP_PKEY*>(key.get()); }

const char* OpenSslType(SignatureAlgorithm algorithm) {
  return algorithm == SignatureAlgorithm::kSm2Sm3 ? "SM2" : "ED25519";
}

// A memory BIO over `pem`, or null when it is too large for one (BIO lengths are ints).
std::unique_ptr<BIO, BioDeleter> ReadBio(std::string_view pem) {
  if (pem.size() > static_cast<size_t>(INT_MAX)) return nullptr;
  return std::unique_ptr<BIO, BioDeleter>(
      BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

template <typename Write>
std::string WritePem(Write write, const char* what) {
  std::unique_ptr<BIO, BioDeleter> bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr || write(bio.get()) != 1) internal::OpenSslFailure(what);
  char* data = nullptr;
  const long length = BIO_get_mem_data(bio.get(), &data);
  std::string pem(data, static_cast<size_t>(length));
  // The private key's PEM was in the BIO's buffer: wipe it before the buffer is freed.
  OPENSSL_cleanse(data, static_cast<size_t>(length));
  return pem;
}

// A digest-sign/verify context for `key`: SM3 with the distinguishing ID for SM2 (OpenSSL 3.0
// would otherwise use an empty ID, and the signature would not interoperate), no digest for
// Ed25519 (PureEdDSA hashes the message itself). Null on an OpenSSL error.
MdContext StartDigestOperation(SignatureAlgorithm algorithm, EVP_PKEY* key, bool sign) {
  MdContext context(EVP_MD_CTX_new());
  if (context == nullptr) return nullptr;
  EVP_PKEY_CTX* key_context = nullptr;  // owned by `context`
  const char* digest = algorithm == SignatureAlgorithm::kSm2Sm3 ? "SM3" : nullptr;
  const int started = sign ? EVP_DigestSignInit_ex(context.get(), &key_context, digest, nullptr,
                                                   nullptr, key, nullptr)
                           : EVP_DigestVerifyInit_ex(context.get(), &key_context, digest, nullptr,
                                                     nullptr, key, nullptr);
  if (started != 1) return nullptr;
  if (algorithm == SignatureAlgorithm::kSm2Sm3 &&
      EVP_PKEY_CTX_set1_id(key_context, kSm2DefaultId.data(), kSm2DefaultId.size()) != 1) {
    return nullptr;
  }
  return context;
}

}  // namespace

std::string_view SignatureName(SignatureAlgorithm algorithm) {
  return algorithm == SignatureAlgorithm::kSm2Sm3 ? "sm2-sm3" : "ed25519";
}

Result<SignatureAlgorithm> ParseSignature(std::string_view name) {
  if (name == "sm2-sm3") return SignatureAlgorithm::kSm2Sm3;
  if (name == "ed25519") return SignatureAlgorithm::kEd25519;
  return InvalidArgument("unknown signature algorithm '{}' (expected sm2-sm3 or ed25519)", name);
}

// --- VerifyingKey -------------------------------------------------------------------------------

Result<VerifyingKey> VerifyingKey::FromPem(SignatureAlgorithm algorithm, std::string_view pem) {
  std::unique_ptr<BIO, BioDeleter> bio = ReadBio(pem);
  EVP_PKEY* key =
      bio == nullptr ? nullptr : PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr);
  ERR_clear_error();
  if (key == nullptr) return InvalidArgument("not a PEM public key");
  VerifyingKey verifying;
  verifying.key_ = Own(key);
  if (!EVP_PKEY_is_a(key, OpenSslType(algorithm))) {
    return InvalidArgument("the PEM public key is not an {} key", SignatureName(algorithm));
  }
  verifying.algorithm_ = algorithm;
  return verifying;
}

bool VerifyingKey::Verify(std::string_view message, std::string_view signature) const {
  if (key_ == nullptr) return false;
  MdContext context = StartDigestOperation(algorithm_, Pkey(key_), /*sign=*/false);
  const bool valid =
      context != nullptr &&
      EVP_DigestVerify(context.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                       signature.size(), reinterpret_cast<const unsigned char*>(message.data()),
                       message.size()) == 1;
  // A bad signature leaves errors on the thread's queue; they must not surface elsewhere.
  ERR_clear_error();
  return valid;
}

std::string VerifyingKey::PublicPem() const {
  return WritePem([this](BIO* bio) { return PEM_write_bio_PUBKEY(bio, Pkey(key_)); },
                  "PEM_write_bio_PUBKEY");
}

std::string VerifyingKey::Fingerprint() const {
  unsigned char* der = nullptr;
  const int length = i2d_PUBKEY(Pkey(key_), &der);
  if (length <= 0) internal::OpenSslFailure("i2d_PUBKEY");
  const Digest digest =
      Hash(DigestAlgorithm::kSha256, std::string_view(reinterpret_cast<const char*>(der), length));
  OPENSSL_free(der);
  return ToHex(digest);
}

// --- SigningKey
// -----------------------------------------------------------------------------------

Result<SigningKey> SigningKey::Generate(SignatureAlgorithm algorithm) {
  EVP_PKEY* key = EVP_PKEY_Q_keygen(nullptr, nullptr, OpenSslType(algorithm));
  if (key == nullptr) {
    ERR_clear_error();
    return Internal("generating an {} key failed in OpenSSL", SignatureName(algorithm));
  }
  SigningKey signing;
  signing.algorithm_ = algorithm;
  signing.key_ = Own(key);
  return signing;
}

Result<SigningKey> SigningKey::FromPem(SignatureAlgorithm algorithm, std::string_view pem) {
  std::unique_ptr<BIO, BioDeleter> bio = ReadBio(pem);
  // A null password callback with an empty password: an encrypted PEM fails rather than
  // prompting on the terminal.
  static char empty_password[] = "";
  EVP_PKEY* key = bio == nullptr
                      ? nullptr
                      : PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, empty_password);
  ERR_clear_error();
  if (key == nullptr) return InvalidArgument("not a PEM private key");
  SigningKey signing;
  signing.key_ = Own(key);
  if (!EVP_PKEY_is_a(key, OpenSslType(algorithm))) {
    return InvalidArgument("the PEM private key is not an {} key", SignatureName(algorithm));
  }
  signing.algorithm_ = algorithm;
  return signing;
}

Result<std::string> SigningKey::Sign(std::string_view message) const {
  if (key_ == nullptr) return FailedPrecondition("signing with an empty key");
  MdContext context = StartDigestOperation(algorithm_, Pkey(key_), /*sign=*/true);
  // EVP_PKEY_get_size is the largest signature (SM2: a DER SEQUENCE of two INTEGERs, up to 72
  // bytes; Ed25519: 64); one EVP_DigestSign call fills it.
  const int maximum = EVP_PKEY_get_size(Pkey(key_));
  std::string signature(maximum > 0 ? static_cast<size_t>(maximum) : 0, '\0');
  size_t length = signature.size();
  const bool ok =
      context != nullptr && maximum > 0 &&
      EVP_DigestSign(context.get(), reinterpret_cast<unsigned char*>(signature.data()), &length,
                     reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1;
  signature.resize(ok ? length : 0);
  if (!ok) {
    ERR_clear_error();
    return Internal("{} signing failed in OpenSSL", SignatureName(algorithm_));
  }
  return signature;
}

std::string SigningKey::PrivatePem() const {
  return WritePem(
      [this](BIO* bio) {
        return PEM_write_bio_PrivateKey(bio, Pkey(key_), nullptr, nullptr, 0, nullptr, nullptr);
      },
      "PEM_write_bio_PrivateKey");
}

VerifyingKey SigningKey::Public() const {
  // Through the public PEM, so the VerifyingKey holds no private material.
  const std::string pem = WritePem(
      [this](BIO* bio) { return PEM_write_bio_PUBKEY(bio, Pkey(key_)); }, "PEM_write_bio_PUBKEY");
  Result<VerifyingKey> verifying = VerifyingKey::FromPem(algorithm_, pem);
  if (!verifying.ok()) internal::OpenSslFailure("reading back our own public key");
  return *std::move(verifying);
}

}  // namespace rampart::crypto
