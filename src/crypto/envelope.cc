// Envelope encryption (envelope.h). The byte layout, big-endian (docs/crypto.md, "Envelope
// format"):
//
//   "RPE" | format 0x01 | suite (1) | key name length N (1) | key name (N) | key version (4)
//   | wrapped data key length W (2) | wrapped data key (W) | nonce length (1) | nonce
//   | tag length (1) | tag | payload length C (8) | payload ciphertext (C)
//
// The wrapped data key is nonce || sealed 32-byte data key || tag under the keyring key's version,
// with associated data "rampart-envelope-dek-v1" + framed(suite, key name, key version). The
// payload's associated data is the first five bytes (magic, format, suite) + framed(tenant,
// region, data class); "framed" is a 4-byte big-endian length before each field. Key name and
// version are not in the payload's associated data, so Rewrap can change them.

#include "crypto/envelope.h"

#include <openssl/crypto.h>

#include <optional>

#include "crypto/digest.h"

namespace rampart::crypto {
namespace {

constexpr std::string_view kMagic = "RPE";
constexpr uint8_t kFormatVersion = 1;
constexpr std::string_view kDataKeyLabel = "rampart-envelope-dek-v1";
constexpr int kMaxKeyVersion = 0x7fffffff;

void AppendBigEndian(std::string& out, uint64_t value, int bytes) {
  for (int shift = 8 * (bytes - 1); shift >= 0; shift -= 8) {
    out.push_back(static_cast<char>((value >> shift) & 0xff));
  }
}

void AppendFramed(std::string& out, std::string_view field) {
  AppendBigEndian(out, field.size(), 4);
  out.append(field);
}

// A bounds-checked reader over untrusted bytes: every read says whether the bytes were there.
class Cursor {
 public:
  explicit Cursor(std::string_view bytes) : bytes_(bytes) {}
  std::optional<std::string_view> Take(size_t count) {
    if (count > bytes_.size() - offset_) return std::nullopt;
    const std::string_view taken = bytes_.substr(offset_, count);
    offset_ += count;
    return taken;
  }
  std::optional<uint64_t> Number(int count) {
    const std::optional<std::string_view> taken = Take(static_cast<size_t>(count));
    if (!taken.has_value()) return std::nullopt;
    uint64_t value = 0;
    for (const char c : *taken) value = (value << 8) | static_cast<uint8_t>(c);
    return value;
  }
  size_t offset() const { return offset_; }
  size_t left() const { return bytes_.size() - offset_; }

 private:
  std::string_view bytes_;
  size_t offset_ = 0;
};

// An envelope taken apart; the views point into the parsed bytes.
struct Parsed {
  EnvelopeHeader header;
  std::string_view prefix;  // magic, format, suite: the payload's associated data starts with it
  std::string_view wrapped_key;
  std::string_view nonce;
  std::string_view tag;
  std::string_view ciphertext;
};

Status Malformed(std::string_view what) { return InvalidArgument("malformed envelope: {}", what); }

size_t WrappedKeyBytes(AeadAlgorithm suite) {
  return AeadNonceBytes(suite) + kAeadKeyBytes + AeadTagBytes(suite);
}

Result<Parsed> Parse(std::string_view bytes) {
  Cursor cursor(bytes);
  Parsed parsed;
  const auto magic = cursor.Take(kMagic.size());
  if (!magic.has_value() || *magic != kMagic) return Malformed("it does not start with \"RPE\"");
  const auto format = cursor.Number(1);
  if (!format.has_value()) return Malformed("truncated in the header");
  if (*format != kFormatVersion) {
    return Malformed(fmt::format("format version {} is not one this build reads (1)", *format));
  }
  const auto suite = cursor.Number(1);
  if (!suite.has_value()) return Malformed("truncated in the header");
  if (*suite != static_cast<uint64_t>(AeadAlgorithm::kAes256Gcm) &&
      *suite != static_cast<uint64_t>(AeadAlgorithm::kSm4CtrHmacSm3)) {
    return Malformed(fmt::format("unknown suite {}", *suite));
  }
  parsed.header.suite = static_cast<AeadAlgorithm>(*suite);
  parsed.prefix = bytes.substr(0, cursor.offset());
  const auto name_length = cursor.Number(1);
  if (!name_length.has_value()) return Malformed("truncated in the header");
  if (*name_length == 0 || *name_length > kEnvelopeMaxKeyNameBytes) {
    return Malformed("the key name length is out of range");
  }
  const auto name = cursor.Take(*name_length);
  const auto version = cursor.Number(4);
  if (!name.has_value() || !version.has_value()) return Malformed("truncated in the header");
  if (*version == 0 || *version > static_cast<uint64_t>(kMaxKeyVersion)) {
    return Malformed("the key version is out of range");
  }
  parsed.header.key_name = std::string(*name);
  parsed.header.key_version = static_cast<int>(*version);
  const auto wrapped_length = cursor.Number(2);
  if (!wrapped_length.has_value()) return Malformed("truncated in the header");
  if (*wrapped_length != WrappedKeyBytes(parsed.header.suite)) {
    return Malformed("the wrapped data key has the wrong length for its suite");
  }
  const auto wrapped = cursor.Take(*wrapped_length);
  const auto nonce_length = cursor.Number(1);
  if (!wrapped.has_value() || !nonce_length.has_value()) return Malformed("truncated");
  if (*nonce_length != AeadNonceBytes(parsed.header.suite)) {
    return Malformed("the nonce has the wrong length for its suite");
  }
  const auto nonce = cursor.Take(*nonce_length);
  const auto tag_length = cursor.Number(1);
  if (!nonce.has_value() || !tag_length.has_value()) return Malformed("truncated");
  if (*tag_length != AeadTagBytes(parsed.header.suite)) {
    return Malformed("the tag has the wrong length for its suite");
  }
  const auto tag = cursor.Take(*tag_length);
  const auto payload_length = cursor.Number(8);
  if (!tag.has_value() || !payload_length.has_value()) return Malformed("truncated");
  if (*payload_length > kEnvelopeMaxPayloadBytes) return Malformed("the payload is too large");
  if (*payload_length != cursor.left()) {
    return Malformed(
        fmt::format("the payload is {} bytes, its length says {} (truncated or "
                    "extended)",
                    cursor.left(), *payload_length));
  }
  parsed.wrapped_key = *wrapped;
  parsed.nonce = *nonce;
  parsed.tag = *tag;
  parsed.ciphertext = *cursor.Take(*payload_length);
  parsed.header.payload_bytes = parsed.ciphertext.size();
  return parsed;
}

std::string Serialize(AeadAlgorithm suite, const std::string& key_name, int key_version,
                      std::string_view wrapped_key, std::string_view nonce, std::string_view tag,
                      std::string_view ciphertext) {
  std::string out;
  out.reserve(32 + key_name.size() + wrapped_key.size() + nonce.size() + tag.size() +
              ciphertext.size());
  out.append(kMagic);
  out.push_back(static_cast<char>(kFormatVersion));
  out.push_back(static_cast<char>(suite));
  out.push_back(static_cast<char>(key_name.size()));
  out.append(key_name);
  AppendBigEndian(out, static_cast<uint64_t>(key_version), 4);
  AppendBigEndian(out, wrapped_key.size(), 2);
  out.append(wrapped_key);
  out.push_back(static_cast<char>(nonce.size()));
  out.append(nonce);
  out.push_back(static_cast<char>(tag.size()));
  out.append(tag);
  AppendBigEndian(out, ciphertext.size(), 8);
  out.append(ciphertext);
  return out;
}

std::string DataKeyAssociatedData(AeadAlgorithm suite, std::string_view key_name, int key_version) {
  std::string data(kDataKeyLabel);
  AppendFramed(data, std::string(1, static_cast<char>(suite)));
  AppendFramed(data, key_name);
  std::string version;
  AppendBigEndian(version, static_cast<uint64_t>(key_version), 4);
  AppendFramed(data, version);
  return data;
}

std::string PayloadAssociatedData(std::string_view prefix, const EnvelopeContext& context) {
  std::string data(prefix);
  AppendFramed(data, context.tenant);
  AppendFramed(data, context.region);
  AppendFramed(data, context.data_class);
  return data;
}

Status CheckContext(const EnvelopeContext& context) {
  for (const std::string_view field : {context.tenant, context.region, context.data_class}) {
    if (field.size() > kEnvelopeMaxContextFieldBytes) {
      return InvalidArgument("an envelope's tenant, region and data class are at most {} bytes",
                             kEnvelopeMaxContextFieldBytes);
    }
  }
  return Status::Ok();
}

// Seals the 32-byte data key under a keyring key version: nonce || ciphertext || tag.
Result<std::string> WrapDataKey(const Keyring::WrappingKey& key, const std::string& key_name,
                                std::string_view data_key) {
  ASSIGN_OR_RETURN(const Sealed sealed,
                   crypto::Seal(key.algorithm, key.material, data_key,
                                DataKeyAssociatedData(key.algorithm, key_name, key.version)));
  std::string wrapped = sealed.nonce;
  wrapped.append(sealed.ciphertext).append(sealed.tag);
  return wrapped;
}

// The data key of a parsed envelope: NotFound / FailedPrecondition from the keyring, or
// InvalidArgument "decryption failed: ..." when it does not unwrap.
Result<std::string> UnwrapDataKey(const Keyring& keyring, const Parsed& parsed) {
  const EnvelopeHeader& header = parsed.header;
  ASSIGN_OR_RETURN(const Keyring::WrappingKey key,
                   keyring.WrappingKeyVersion(header.key_name, header.key_version));
  if (key.algorithm != header.suite) {
    return InvalidArgument("decryption failed: the envelope's suite {} is not key '{}''s ({})",
                           AeadName(header.suite), header.key_name, AeadName(key.algorithm));
  }
  const size_t nonce_bytes = AeadNonceBytes(header.suite);
  const size_t tag_bytes = AeadTagBytes(header.suite);
  Sealed sealed{
      .nonce = std::string(parsed.wrapped_key.substr(0, nonce_bytes)),
      .ciphertext = std::string(parsed.wrapped_key.substr(nonce_bytes, kAeadKeyBytes)),
      .tag = std::string(parsed.wrapped_key.substr(nonce_bytes + kAeadKeyBytes, tag_bytes))};
  Result<std::string> data_key =
      crypto::Open(header.suite, key.material, sealed,
                   DataKeyAssociatedData(header.suite, header.key_name, header.key_version));
  if (!data_key.ok()) {
    return InvalidArgument(
        "decryption failed: the data key does not unwrap under key '{}' version {} (a different "
        "key, or a tampered envelope)",
        header.key_name, header.key_version);
  }
  return data_key;
}

// Wipes a data key when it goes out of scope.
struct Wiped {
  std::string& bytes;
  ~Wiped() { OPENSSL_cleanse(bytes.data(), bytes.size()); }
};

}  // namespace

bool Envelope::HasMagic(std::string_view bytes) { return bytes.starts_with(kMagic); }

Result<EnvelopeHeader> Envelope::Inspect(std::string_view envelope) {
  ASSIGN_OR_RETURN(const Parsed parsed, Parse(envelope));
  return parsed.header;
}

Result<std::string> Envelope::Seal(const std::string& key_name, std::string_view plaintext,
                                   const EnvelopeContext& context) const {
  RETURN_IF_ERROR(CheckContext(context));
  if (plaintext.size() > kEnvelopeMaxPayloadBytes) {
    return InvalidArgument("an envelope holds at most {} bytes", kEnvelopeMaxPayloadBytes);
  }
  if (key_name.empty() || key_name.size() > kEnvelopeMaxKeyNameBytes) {
    return InvalidArgument("key name '{}' is not 1 to {} bytes", key_name,
                           kEnvelopeMaxKeyNameBytes);
  }
  ASSIGN_OR_RETURN(const Keyring::WrappingKey key, keyring_.CurrentWrappingKey(key_name));
  std::string data_key = RandomBytes(kAeadKeyBytes);
  const Wiped wipe{data_key};
  ASSIGN_OR_RETURN(const std::string wrapped, WrapDataKey(key, key_name, data_key));
  std::string prefix(kMagic);
  prefix.push_back(static_cast<char>(kFormatVersion));
  prefix.push_back(static_cast<char>(key.algorithm));
  ASSIGN_OR_RETURN(const Sealed sealed, crypto::Seal(key.algorithm, data_key, plaintext,
                                                     PayloadAssociatedData(prefix, context)));
  return Serialize(key.algorithm, key_name, key.version, wrapped, sealed.nonce, sealed.tag,
                   sealed.ciphertext);
}

Result<std::string> Envelope::Open(std::string_view envelope,
                                   const EnvelopeContext& context) const {
  RETURN_IF_ERROR(CheckContext(context));
  Result<Parsed> parsed = Parse(envelope);
  if (!parsed.ok()) return InvalidArgument("decryption failed: {}", parsed.status().message());
  ASSIGN_OR_RETURN(std::string data_key, UnwrapDataKey(keyring_, *parsed));
  const Wiped wipe{data_key};
  Sealed sealed{.nonce = std::string(parsed->nonce),
                .ciphertext = std::string(parsed->ciphertext),
                .tag = std::string(parsed->tag)};
  Result<std::string> plaintext = crypto::Open(parsed->header.suite, data_key, sealed,
                                               PayloadAssociatedData(parsed->prefix, context));
  if (!plaintext.ok()) {
    return InvalidArgument(
        "decryption failed: the payload does not authenticate (a different tenant, region or "
        "data class than it was sealed for, or a tampered envelope)");
  }
  return plaintext;
}

Result<std::string> Envelope::Rewrap(std::string_view envelope) const {
  Result<Parsed> parsed = Parse(envelope);
  if (!parsed.ok()) return InvalidArgument("decryption failed: {}", parsed.status().message());
  const EnvelopeHeader& header = parsed->header;
  ASSIGN_OR_RETURN(const Keyring::WrappingKey current,
                   keyring_.CurrentWrappingKey(header.key_name));
  if (current.version == header.key_version) return std::string(envelope);
  ASSIGN_OR_RETURN(std::string data_key, UnwrapDataKey(keyring_, *parsed));
  const Wiped wipe{data_key};
  if (current.algorithm != header.suite) {
    return FailedPrecondition("key '{}' changed suite; the envelope cannot be rewrapped",
                              header.key_name);
  }
  ASSIGN_OR_RETURN(const std::string wrapped, WrapDataKey(current, header.key_name, data_key));
  return Serialize(header.suite, header.key_name, current.version, wrapped, parsed->nonce,
                   parsed->tag, parsed->ciphertext);
}

}  // namespace rampart::crypto
