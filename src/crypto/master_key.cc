// The master keys of keyring.h: 32 bytes from a file or an environment variable, wrapping key
// material with AES-256-GCM. The key bytes are wiped (OPENSSL_cleanse) when the object goes, and
// no message ever holds them.
//
// Wrapped form: 0x01 (the format) || nonce (12) || ciphertext || tag (16); the associated data is
// "rampart-master-v1" followed by the caller's context, so material wrapped for one key version
// cannot be passed off as another's.

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "crypto/aead.h"
#include "crypto/digest.h"
#include "crypto/keyring.h"

namespace rampart::crypto {
namespace {

constexpr std::string_view kWrapLabel = "rampart-master-v1";
constexpr char kWrapFormat = 0x01;
constexpr size_t kMaxKeyFileBytes = 4096;

std::string_view Trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  return text;
}

bool IsBase64Character(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/';
}

// Standard base64 with padding, exactly; nullopt for anything else.
std::optional<std::string> DecodeBase64(std::string_view text) {
  if (text.empty() || text.size() % 4 != 0) return std::nullopt;
  size_t padding = 0;
  while (padding < 2 && padding < text.size() && text[text.size() - 1 - padding] == '=') {
    ++padding;
  }
  for (size_t i = 0; i < text.size() - padding; ++i) {
    if (!IsBase64Character(text[i])) return std::nullopt;
  }
  std::string bytes(text.size() / 4 * 3, '\0');
  const int decoded = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(bytes.data()),
                                      reinterpret_cast<const unsigned char*>(text.data()),
                                      static_cast<int>(text.size()));
  if (decoded < 0 || static_cast<size_t>(decoded) != bytes.size()) {
    OPENSSL_cleanse(bytes.data(), bytes.size());
    return std::nullopt;
  }
  bytes.resize(bytes.size() - padding);
  return bytes;
}

// 64 hex digits or base64 of 32 bytes (surrounding whitespace ignored); nullopt otherwise. The
// error never quotes the text: it is key material.
std::optional<std::string> ParseEncodedKey(std::string_view text) {
  text = Trim(text);
  if (text.size() == 2 * kAeadKeyBytes) {
    Result<std::string> bytes = FromHex(text);
    if (bytes.ok()) return std::move(*bytes);
  }
  std::optional<std::string> bytes = DecodeBase64(text);
  if (bytes.has_value() && bytes->size() == kAeadKeyBytes) return bytes;
  if (bytes.has_value()) OPENSSL_cleanse(bytes->data(), bytes->size());
  return std::nullopt;
}

std::string WrapAssociatedData(std::string_view context) {
  std::string data(kWrapLabel);
  data.push_back('\0');
  data.append(context);
  return data;
}

class AeadMasterKey final : public MasterKey {
 public:
  AeadMasterKey(std::string description, std::string key)
      : description_(std::move(description)), key_(std::move(key)) {}
  ~AeadMasterKey() override { OPENSSL_cleanse(key_.data(), key_.size()); }
  AeadMasterKey(const AeadMasterKey&) = delete;
  AeadMasterKey& operator=(const AeadMasterKey&) = delete;

  std::string Describe() const override { return description_; }

  Result<std::string> Wrap(std::string_view material, std::string_view context) const override {
    ASSIGN_OR_RETURN(Sealed sealed,
                     Seal(AeadAlgorithm::kAes256Gcm, key_, material, WrapAssociatedData(context)));
    std::string wrapped(1, kWrapFormat);
    wrapped.append(sealed.nonce).append(sealed.ciphertext).append(sealed.tag);
    return wrapped;
  }

  Result<std::string> Unwrap(std::string_view wrapped, std::string_view context) const override {
    const size_t nonce_bytes = AeadNonceBytes(AeadAlgorithm::kAes256Gcm);
    const size_t tag_bytes = AeadTagBytes(AeadAlgorithm::kAes256Gcm);
    if (wrapped.size() < 1 + nonce_bytes + tag_bytes || wrapped[0] != kWrapFormat) {
      return InvalidArgument("decryption failed: the wrapped material is malformed");
    }
    Sealed sealed;
    sealed.nonce = wrapped.substr(1, nonce_bytes);
    sealed.ciphertext =
        wrapped.substr(1 + nonce_bytes, wrapped.size() - 1 - nonce_bytes - tag_bytes);
    sealed.tag = wrapped.substr(wrapped.size() - tag_bytes);
    Result<std::string> material =
        Open(AeadAlgorithm::kAes256Gcm, key_, sealed, WrapAssociatedData(context));
    if (!material.ok()) {
      return InvalidArgument(
          "decryption failed: the master key ({}) does not unwrap it (a different master key, or "
          "a tampered record)",
          description_);
    }
    return material;
  }

 private:
  const std::string description_;
  std::string key_;  // 32 bytes
};

}  // namespace

Result<std::unique_ptr<MasterKey>> MasterKeyFromFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    return NotFound("the master key file '{}' cannot be opened: {}", path, std::strerror(errno));
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return InvalidArgument("the master key file '{}' is not a regular file", path);
  }
  if ((info.st_mode & 077) != 0) {
    ::close(fd);
    return PermissionDenied(
        "the master key file '{}' is readable or writable by group or others (mode {:04o}): "
        "chmod 600 it",
        path, info.st_mode & 07777);
  }
  std::string content(kMaxKeyFileBytes + 1, '\0');
  size_t length = 0;
  while (length < content.size()) {
    const ssize_t got = ::read(fd, content.data() + length, content.size() - length);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int error = errno;
      ::close(fd);
      OPENSSL_cleanse(content.data(), content.size());
      return Unavailable("the master key file '{}' cannot be read: {}", path, std::strerror(error));
    }
    if (got == 0) break;
    length += static_cast<size_t>(got);
  }
  ::close(fd);
  std::optional<std::string> key;
  if (length == kAeadKeyBytes) {
    key = content.substr(0, length);  // 32 raw bytes
  } else if (length <= kMaxKeyFileBytes) {
    key = ParseEncodedKey(std::string_view(content).substr(0, length));
  }
  OPENSSL_cleanse(content.data(), content.size());
  if (!key.has_value()) {
    return InvalidArgument(
        "the master key file '{}' must hold 32 raw bytes, 64 hex digits or the base64 of 32 "
        "bytes ({} bytes found)",
        path, length);
  }
  return std::unique_ptr<MasterKey>(
      std::make_unique<AeadMasterKey>("file:" + path, std::move(*key)));
}

Result<std::unique_ptr<MasterKey>> MasterKeyFromEnvironment(const std::string& variable) {
  const char* value = std::getenv(variable.c_str());
  if (value == nullptr) return NotFound("the environment variable {} is not set", variable);
  std::optional<std::string> key = ParseEncodedKey(value);
  if (!key.has_value()) {
    return InvalidArgument(
        "the environment variable {} must hold 64 hex digits or the base64 of 32 bytes", variable);
  }
  return std::unique_ptr<MasterKey>(
      std::make_unique<AeadMasterKey>("env:" + variable, std::move(*key)));
}

}  // namespace rampart::crypto
