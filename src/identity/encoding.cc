#include "identity/encoding.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <array>
#include <cstdint>

#include "core/check.h"
#include "core/strings.h"

namespace rampart::identity {
namespace {

constexpr std::string_view kBase64UrlAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
constexpr std::string_view kBase62Alphabet =
    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

constexpr std::array<int8_t, 256> MakeBase64UrlTable() {
  std::array<int8_t, 256> table{};
  for (auto& entry : table) entry = -1;
  for (size_t i = 0; i < kBase64UrlAlphabet.size(); ++i) {
    table[static_cast<uint8_t>(kBase64UrlAlphabet[i])] = static_cast<int8_t>(i);
  }
  return table;
}
constexpr std::array<int8_t, 256> kBase64UrlTable = MakeBase64UrlTable();

}  // namespace

std::optional<std::string> Base64UrlDecode(std::string_view text) {
  if (text.size() % 4 == 1) return std::nullopt;
  std::string bytes;
  bytes.reserve(text.size() * 3 / 4);
  uint32_t bits = 0;
  int bit_count = 0;
  for (const char c : text) {
    const int8_t value = kBase64UrlTable[static_cast<uint8_t>(c)];
    if (value < 0) return std::nullopt;
    bits = (bits << 6) | static_cast<uint32_t>(value);
    bit_count += 6;
    if (bit_count >= 8) {
      bit_count -= 8;
      bytes.push_back(static_cast<char>((bits >> bit_count) & 0xff));
    }
  }
  // The 2 or 4 bits left over must be zero, so that each byte string has one encoding.
  if ((bits & ((1u << bit_count) - 1)) != 0) return std::nullopt;
  return bytes;
}

std::string Base64UrlEncode(std::string_view bytes) {
  std::string text;
  text.reserve((bytes.size() * 4 + 2) / 3);
  uint32_t bits = 0;
  int bit_count = 0;
  for (const char c : bytes) {
    bits = (bits << 8) | static_cast<uint8_t>(c);
    bit_count += 8;
    while (bit_count >= 6) {
      bit_count -= 6;
      text.push_back(kBase64UrlAlphabet[(bits >> bit_count) & 0x3f]);
    }
  }
  if (bit_count > 0) text.push_back(kBase64UrlAlphabet[(bits << (6 - bit_count)) & 0x3f]);
  return text;
}

std::string HexEncode(std::string_view bytes) {
  constexpr std::string_view kDigits = "0123456789abcdef";
  std::string text;
  text.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    const auto byte = static_cast<uint8_t>(c);
    text.push_back(kDigits[byte >> 4]);
    text.push_back(kDigits[byte & 0xf]);
  }
  return text;
}

std::optional<std::string> HexDecode(std::string_view text) {
  if (text.size() % 2 != 0) return std::nullopt;
  std::string bytes;
  bytes.reserve(text.size() / 2);
  for (size_t i = 0; i < text.size(); i += 2) {
    const int high = HexDigitValue(text[i]);
    const int low = HexDigitValue(text[i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    bytes.push_back(static_cast<char>(high * 16 + low));
  }
  return bytes;
}

std::string Sha256(std::string_view bytes) {
  std::string digest(32, '\0');
  unsigned int length = 0;
  CHECK(EVP_Digest(bytes.data(), bytes.size(), reinterpret_cast<unsigned char*>(digest.data()),
                   &length, EVP_sha256(), nullptr) == 1);
  CHECK(length == digest.size());
  return digest;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string RandomBytes(size_t count) {
  std::string bytes(count, '\0');
  if (count > 0) {
    CHECK(RAND_bytes(reinterpret_cast<unsigned char*>(bytes.data()), static_cast<int>(count)) == 1);
  }
  return bytes;
}

std::string RandomBase62(size_t count) {
  // 248 = 4 * 62: bytes below it map uniformly onto the alphabet; the rest are drawn again.
  constexpr uint8_t kLimit = 248;
  std::string text;
  text.reserve(count);
  while (text.size() < count) {
    for (const char c : RandomBytes(count - text.size() + 8)) {
      const auto byte = static_cast<uint8_t>(c);
      if (byte >= kLimit) continue;
      text.push_back(kBase62Alphabet[byte % 62]);
      if (text.size() == count) break;
    }
  }
  return text;
}

}  // namespace rampart::identity
