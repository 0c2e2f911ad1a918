#include "guard/keys.h"

#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iterator>

#include "core/check.h"

namespace rampart::guard {
namespace {

constexpr std::string_view kSalt = "rampart-guard-v1";

Key Hkdf(const Key& master, std::string_view info) {
  Key out{};
  EVP_PKEY_CTX* context = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr);
  CHECK(context != nullptr);
  size_t length = out.size();
  const bool derived =
      EVP_PKEY_derive_init(context) > 0 && EVP_PKEY_CTX_set_hkdf_md(context, EVP_sha256()) > 0 &&
      EVP_PKEY_CTX_set1_hkdf_salt(context, reinterpret_cast<const unsigned char*>(kSalt.data()),
                                  static_cast<int>(kSalt.size())) > 0 &&
      EVP_PKEY_CTX_set1_hkdf_key(context, master.data(), static_cast<int>(master.size())) > 0 &&
      EVP_PKEY_CTX_add1_hkdf_info(context, reinterpret_cast<const unsigned char*>(info.data()),
                                  static_cast<int>(info.size())) > 0 &&
      EVP_PKEY_derive(context, out.data(), &length) > 0;
  EVP_PKEY_CTX_free(context);
  CHECK(derived && length == out.size());  // HKDF-SHA-256 of 32 bytes cannot fail
  return out;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Result<GuardKeys> GuardKeys::FromBytes(std::string_view bytes) {
  if (bytes.size() != 32) {
    return InvalidArgument("a guard key is 32 bytes, got {}", bytes.size());
  }
  GuardKeys keys;
  std::copy(bytes.begin(), bytes.end(), keys.master_.begin());
  return keys;
}

Result<GuardKeys> GuardKeys::FromFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return NotFound("the guard key file '{}' cannot be read", path);
  std::string content((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (content.size() > 4096) {
    return InvalidArgument("the guard key file '{}' is not a key (too long)", path);
  }
  std::string_view trimmed = content;
  while (!trimmed.empty() && std::isspace(static_cast<unsigned char>(trimmed.front()))) {
    trimmed.remove_prefix(1);
  }
  while (!trimmed.empty() && std::isspace(static_cast<unsigned char>(trimmed.back()))) {
    trimmed.remove_suffix(1);
  }
  if (trimmed.size() == 64 &&
      std::all_of(trimmed.begin(), trimmed.end(), [](char c) { return HexDigit(c) >= 0; })) {
    std::string raw(32, '\0');
    for (size_t i = 0; i < 32; ++i) {
      raw[i] = static_cast<char>(HexDigit(trimmed[2 * i]) * 16 + HexDigit(trimmed[2 * i + 1]));
    }
    return FromBytes(raw);
  }
  if (content.size() == 32) return FromBytes(content);
  return InvalidArgument(
      "the guard key file '{}' must hold 64 hex digits or 32 raw bytes, it holds {} bytes", path,
      content.size());
}

GuardKeys GuardKeys::Generate() {
  GuardKeys keys;
  CHECK(RAND_bytes(keys.master_.data(), static_cast<int>(keys.master_.size())) == 1);
  return keys;
}

TenantKeys GuardKeys::ForTenant(std::string_view tenant) const {
  return TenantKeys{.hash = Hkdf(master_, fmt::format("hash:{}", tenant)),
                    .token = Hkdf(master_, fmt::format("token:{}", tenant))};
}

}  // namespace rampart::guard
