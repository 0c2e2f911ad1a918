#include "guard/operators.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <charconv>

#include "core/check.h"
#include "guard/detector.h"
#include "guard/text.h"

namespace rampart::guard {
namespace {

constexpr std::pair<OperatorKind, std::string_view> kKinds[] = {
    {OperatorKind::kReplace, "replace"}, {OperatorKind::kMask, "mask"},
    {OperatorKind::kHash, "hash"},       {OperatorKind::kTokenize, "tokenize"},
    {OperatorKind::kBlock, "block"},
};

constexpr std::string_view kTokenOpen = "<<PII:";
constexpr std::string_view kTokenClose = ">>";
constexpr size_t kNonceBytes = 12;
constexpr size_t kTagBytes = 16;

// Types whose value is a number or code: hashed without separators, letters upper-case.
bool NumberLike(std::string_view type) {
  return type == kCnResidentId || type == kCnMobile || type == kPaymentCard || type == kCnUscc ||
         type == kCnPassport || type == kPhoneNumber || type == kIbanCode || type == kUsSsn ||
         type == kMacAddress;
}

void AppendUtf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

size_t CountSignificant(std::string_view value) {
  size_t count = 0;
  for (size_t pos = 0, length = 0; pos < value.size(); pos += length) {
    if (text::IsSignificant(text::Decode(value, pos, length))) ++count;
  }
  return count;
}

// Keeps the first `first` and last `last` significant characters, one '*' for each other one;
// everything is hidden when nothing would be.
std::string MaskText(std::string_view value, size_t first, size_t last) {
  const size_t count = CountSignificant(value);
  if (first + last >= count) first = last = 0;
  std::string out;
  out.reserve(value.size());
  size_t index = 0;
  for (size_t pos = 0, length = 0; pos < value.size(); pos += length) {
    const char32_t c = text::Decode(value, pos, length);
    if (!text::IsSignificant(c)) {
      out.append(value.substr(pos, length));
      continue;
    }
    ++index;
    if (index <= first || index > count - last) {
      out.append(value.substr(pos, length));
    } else {
      out.push_back('*');
    }
  }
  return out;
}

std::string Mask(const Operator& op, std::string_view type, std::string_view value) {
  const auto pick = [](int given, size_t fallback) {
    return given >= 0 ? static_cast<size_t>(given) : fallback;
  };
  if (type == kEmailAddress) {
    const size_t at = value.rfind('@');
    if (at != std::string_view::npos) {
      return MaskText(value.substr(0, at), pick(op.keep_first, 1), pick(op.keep_last, 0))
          .append(value.substr(at));
    }
  }
  if (type == kCnResidentId) return MaskText(value, pick(op.keep_first, 3), pick(op.keep_last, 4));
  if (type == kPaymentCard) return MaskText(value, pick(op.keep_first, 0), pick(op.keep_last, 4));
  if (type == kCnMobile) {
    // The middle 4 of the subscriber's 11 digits; a country code before them stays.
    const size_t count = CountSignificant(value);
    return MaskText(value, pick(op.keep_first, count >= 8 ? count - 8 : 0), pick(op.keep_last, 4));
  }
  return MaskText(value, pick(op.keep_first, 0), pick(op.keep_last, 0));
}

// The form a value is hashed in, so that "138 0013 8000" and "+86 13800138000" hash alike.
std::string Canonical(std::string_view type, std::string_view value) {
  std::string out;
  if (NumberLike(type)) {
    for (size_t pos = 0, length = 0; pos < value.size(); pos += length) {
      char32_t c = text::FoldWidth(text::Decode(value, pos, length));
      if (!text::IsSignificant(c)) continue;
      if (c >= U'a' && c <= U'z') c = c - U'a' + U'A';
      AppendUtf8(out, c);
    }
    if (type == kCnMobile && out.size() > 11) out.erase(0, out.size() - 11);
    return out;
  }
  out.assign(value);
  if (type == kEmailAddress) {
    for (char& c : out) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
  }
  return out;
}

std::string Hash(std::string_view type, std::string_view value, const TenantKeys& keys) {
  std::string_view hashed = value;
  std::string_view domain;
  if (type == kEmailAddress) {
    const size_t at = value.rfind('@');
    if (at != std::string_view::npos) {
      hashed = value.substr(0, at);
      domain = value.substr(at);
    }
  }
  const std::string message = fmt::format("{}:{}", type, Canonical(type, hashed));
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  CHECK(HMAC(EVP_sha256(), keys.hash.data(), static_cast<int>(keys.hash.size()),
             reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest,
             &length) != nullptr);
  std::string out = fmt::format("{}_", type);
  for (size_t i = 0; i < 8; ++i) fmt::format_to(std::back_inserter(out), "{:02x}", digest[i]);
  out.append(domain);
  return out;
}

constexpr char kBase64Url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

std::string Base64Url(const unsigned char* data, size_t size) {
  std::string out;
  out.reserve((size + 2) / 3 * 4);
  for (size_t i = 0; i < size; i += 3) {
    const uint32_t chunk = (uint32_t{data[i]} << 16) | (i + 1 < size ? data[i + 1] << 8 : 0) |
                           (i + 2 < size ? data[i + 2] : 0);
    out.push_back(kBase64Url[(chunk >> 18) & 63]);
    out.push_back(kBase64Url[(chunk >> 12) & 63]);
    if (i + 1 < size) out.push_back(kBase64Url[(chunk >> 6) & 63]);
    if (i + 2 < size) out.push_back(kBase64Url[chunk & 63]);
  }
  return out;
}

int Base64UrlValue(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-') return 62;
  if (c == '_') return 63;
  return -1;
}

std::optional<std::string> FromBase64Url(std::string_view text) {
  if (text.size() % 4 == 1) return std::nullopt;
  std::string out;
  uint32_t bits = 0;
  int count = 0;
  for (char c : text) {
    const int value = Base64UrlValue(c);
    if (value < 0) return std::nullopt;
    bits = (bits << 6) | static_cast<uint32_t>(value);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out.push_back(static_cast<char>((bits >> count) & 0xFF));
    }
  }
  return out;
}

std::string Tokenize(std::string_view type, std::string_view value, const TenantKeys& keys) {
  std::string sealed(kNonceBytes + value.size() + kTagBytes, '\0');
  auto* bytes = reinterpret_cast<unsigned char*>(sealed.data());
  CHECK(RAND_bytes(bytes, kNonceBytes) == 1);
  EVP_CIPHER_CTX* context = EVP_CIPHER_CTX_new();
  CHECK(context != nullptr);
  int length = 0;
  const bool sealed_ok =
      EVP_EncryptInit_ex(context, EVP_aes_256_gcm(), nullptr, keys.token.data(), bytes) == 1 &&
      EVP_EncryptUpdate(context, nullptr, &length,
                        reinterpret_cast<const unsigned char*>(type.data()),
                        static_cast<int>(type.size())) == 1 &&
      EVP_EncryptUpdate(context, bytes + kNonceBytes, &length,
                        reinterpret_cast<const unsigned char*>(value.data()),
                        static_cast<int>(value.size())) == 1 &&
      EVP_EncryptFinal_ex(context, bytes + kNonceBytes + length, &length) == 1 &&
      EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, kTagBytes,
                          bytes + kNonceBytes + value.size()) == 1;
  EVP_CIPHER_CTX_free(context);
  CHECK(sealed_ok);  // AES-GCM with a 32-byte key and a 12-byte nonce cannot fail
  return fmt::format("{}{}:{}{}", kTokenOpen, type, Base64Url(bytes, sealed.size()), kTokenClose);
}

std::optional<std::string> Open(std::string_view type, std::string_view encoded,
                                const TenantKeys& keys) {
  const std::optional<std::string> sealed = FromBase64Url(encoded);
  if (!sealed || sealed->size() < kNonceBytes + kTagBytes) return std::nullopt;
  const auto* bytes = reinterpret_cast<const unsigned char*>(sealed->data());
  const size_t size = sealed->size() - kNonceBytes - kTagBytes;
  std::string value(size, '\0');
  EVP_CIPHER_CTX* context = EVP_CIPHER_CTX_new();
  CHECK(context != nullptr);
  int length = 0;
  std::array<unsigned char, kTagBytes> tag;
  std::copy(bytes + kNonceBytes + size, bytes + sealed->size(), tag.begin());
  const bool opened =
      EVP_DecryptInit_ex(context, EVP_aes_256_gcm(), nullptr, keys.token.data(), bytes) == 1 &&
      EVP_DecryptUpdate(context, nullptr, &length,
                        reinterpret_cast<const unsigned char*>(type.data()),
                        static_cast<int>(type.size())) == 1 &&
      EVP_DecryptUpdate(context, reinterpret_cast<unsigned char*>(value.data()), &length,
                        bytes + kNonceBytes, static_cast<int>(size)) == 1 &&
      EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, kTagBytes, tag.data()) == 1 &&
      EVP_DecryptFinal_ex(context, reinterpret_cast<unsigned char*>(value.data()) + length,
                          &length) == 1;
  EVP_CIPHER_CTX_free(context);
  if (!opened) return std::nullopt;
  return value;
}

}  // namespace

std::string_view OperatorKindName(OperatorKind kind) {
  for (auto [known, name] : kKinds) {
    if (known == kind) return name;
  }
  return "replace";
}

Result<Operator> ParseOperator(std::string_view text) {
  const std::string_view name = text.substr(0, text.find(':'));
  for (auto [kind, known] : kKinds) {
    if (known != name) continue;
    Operator op{.kind = kind};
    if (name.size() == text.size()) return op;
    if (kind != OperatorKind::kMask) break;
    // mask:N:M
    const std::string_view counts = text.substr(name.size() + 1);
    const size_t colon = counts.find(':');
    if (colon == std::string_view::npos) break;
    const auto number = [](std::string_view digits, int& into) {
      auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), into);
      return error == std::errc() && end == digits.data() + digits.size() && into >= 0 &&
             into <= 64;
    };
    if (!number(counts.substr(0, colon), op.keep_first) ||
        !number(counts.substr(colon + 1), op.keep_last)) {
      break;
    }
    return op;
  }
  return InvalidArgument(
      "unknown operator '{}' (known: replace, mask, mask:FIRST:LAST, hash, tokenize, block)", text);
}

std::string OperatorText(const Operator& op) {
  if (op.kind == OperatorKind::kMask && (op.keep_first >= 0 || op.keep_last >= 0)) {
    return fmt::format("mask:{}:{}", std::max(op.keep_first, 0), std::max(op.keep_last, 0));
  }
  return std::string(OperatorKindName(op.kind));
}

const std::vector<std::string_view>& KnownEntityTypes() {
  static const std::vector<std::string_view> types = {
      kCnResidentId, kCnMobile,    kPaymentCard,     kCnUscc,     kCnPassport,
      kEmailAddress, kPhoneNumber, kIpAddress,       kMacAddress, kIbanCode,
      kUsSsn,        kSecret,      kInternalEndpoint};
  return types;
}

std::optional<std::string_view> KnownEntityType(std::string_view name) {
  for (std::string_view type : KnownEntityTypes()) {
    if (type == name) return type;
  }
  return std::nullopt;
}

Operator DefaultOperator(std::string_view type) {
  if (type == kCnResidentId || type == kCnMobile || type == kPaymentCard) {
    return Operator{.kind = OperatorKind::kMask};
  }
  if (type == kEmailAddress) return Operator{.kind = OperatorKind::kHash};
  return Operator{.kind = OperatorKind::kReplace};
}

Operator OperatorChoice::For(std::string_view type) const {
  auto found = by_type.find(type);
  if (found != by_type.end()) return found->second;
  return all.value_or(DefaultOperator(type));
}

std::string ApplyOperator(const Operator& op, std::string_view type, std::string_view value,
                          const TenantKeys& keys) {
  switch (op.kind) {
    case OperatorKind::kMask: return Mask(op, type, value);
    case OperatorKind::kHash: return Hash(type, value, keys);
    case OperatorKind::kTokenize: return Tokenize(type, value, keys);
    case OperatorKind::kReplace:
    case OperatorKind::kBlock: break;
  }
  return fmt::format("[{}]", type);
}

std::string RestoreTokens(std::string_view text, const TenantKeys& keys, size_t* restored) {
  std::string out;
  out.reserve(text.size());
  size_t count = 0;
  size_t pos = 0;
  while (true) {
    const size_t open = text.find(kTokenOpen, pos);
    if (open == std::string_view::npos) break;
    const size_t type_start = open + kTokenOpen.size();
    size_t cursor = type_start;
    while (cursor < text.size() &&
           ((text[cursor] >= 'A' && text[cursor] <= 'Z') || text[cursor] == '_')) {
      ++cursor;
    }
    const std::string_view type = text.substr(type_start, cursor - type_start);
    std::optional<std::string> value;
    size_t end = cursor;
    if (!type.empty() && cursor < text.size() && text[cursor] == ':') {
      size_t data_end = cursor + 1;
      while (data_end < text.size() && Base64UrlValue(text[data_end]) >= 0) ++data_end;
      if (text.substr(data_end, kTokenClose.size()) == kTokenClose) {
        value = Open(type, text.substr(cursor + 1, data_end - cursor - 1), keys);
        end = data_end + kTokenClose.size();
      }
    }
    out.append(text.substr(pos, open - pos));
    if (value) {
      out.append(*value);
      ++count;
      pos = end;
    } else {
      out.append(kTokenOpen);
      pos = type_start;
    }
  }
  out.append(text.substr(pos));
  if (restored != nullptr) *restored = count;
  return out;
}

}  // namespace rampart::guard
