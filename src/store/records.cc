#include "store/records.h"

#include <simdjson.h>

#include "core/clock.h"
#include "json/reader.h"
#include "json/writer.h"
#include "store/audit_batches.h"

namespace rampart::store::internal {
namespace {

bool IsAsciiAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool NameMatches(std::string_view name, size_t max_bytes, std::string_view punctuation) {
  if (name.empty() || name.size() > max_bytes) return false;
  for (const char c : name) {
    if (!IsAsciiAlnum(c) && punctuation.find(c) == std::string_view::npos) return false;
  }
  return true;
}

// Free text (labels, attribute values): valid UTF-8 without control characters but tab.
Status ValidateText(std::string_view what, std::string_view text, size_t max_bytes,
                    bool allow_empty) {
  if (text.empty() && !allow_empty) return InvalidArgument("{} must not be empty", what);
  if (text.size() > max_bytes) return InvalidArgument("{} is over {} bytes", what, max_bytes);
  if (!simdjson::validate_utf8(text.data(), text.size())) {
    return InvalidArgument("{} is not valid UTF-8", what);
  }
  for (const char c : text) {
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) {
      return InvalidArgument("{} holds a control character", what);
    }
  }
  return Status::Ok();
}

Status ValidateRoles(const std::vector<std::string>& roles) {
  for (const std::string& role : roles) {
    RETURN_IF_ERROR(ValidateText("a role name", role, kMaxRoleBytes, /*allow_empty=*/false));
  }
  return Status::Ok();
}

Status ValidateAttributes(const Attributes& attributes) {
  for (const auto& [name, value] : attributes) {
    RETURN_IF_ERROR(
        ValidateText("an attribute name", name, kMaxAttributeNameBytes, /*allow_empty=*/false));
    RETURN_IF_ERROR(ValidateText(fmt::format("attribute '{}'", name), value,
                                 kMaxAttributeValueBytes, /*allow_empty=*/true));
  }
  return Status::Ok();
}

bool IsHex(std::string_view text) {
  if (text.empty() || text.size() > kMaxLabelBytes) return false;
  for (const char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
      return false;
    }
  }
  return true;
}

}  // namespace

Status ValidateTenantName(std::string_view name) {
  if (!NameMatches(name, 64, "_.-")) {
    return InvalidArgument("tenant name '{}' must be 1 to 64 of A-Z a-z 0-9 _ . -", name);
  }
  return Status::Ok();
}

Status ValidatePrincipalName(std::string_view name) {
  if (!NameMatches(name, 128, "_.@:/-")) {
    return InvalidArgument("principal name '{}' must be 1 to 128 of A-Z a-z 0-9 _ . @ : / -", name);
  }
  return Status::Ok();
}

Status ValidateTenant(const Tenant& tenant) {
  RETURN_IF_ERROR(ValidateTenantName(tenant.name));
  return ValidateAttributes(tenant.attributes);
}

Status ValidatePrincipal(const Principal& principal) {
  RETURN_IF_ERROR(ValidateTenantName(principal.tenant));
  RETURN_IF_ERROR(ValidatePrincipalName(principal.name));
  RETURN_IF_ERROR(ValidateRoles(principal.roles));
  return ValidateAttributes(principal.attributes);
}

Status ValidateApiKey(const ApiKey& key) {
  if (!NameMatches(key.id, kMaxLabelBytes, "_-")) {
    return InvalidArgument("API key id '{}' must be 1 to {} of A-Z a-z 0-9 _ -", key.id,
                           kMaxLabelBytes);
  }
  RETURN_IF_ERROR(ValidateTenantName(key.tenant));
  RETURN_IF_ERROR(ValidatePrincipalName(key.principal));
  RETURN_IF_ERROR(ValidateText("the API key's name", key.name, kMaxLabelBytes,
                               /*allow_empty=*/true));
  RETURN_IF_ERROR(ValidateRoles(key.roles));
  if (!IsHex(key.salt)) return InvalidArgument("the API key's salt must be hex");
  if (!IsHex(key.hash)) return InvalidArgument("the API key's hash must be hex");
  if (key.created_unix < 0 || key.expires_unix < 0 || key.revoked_unix < 0 ||
      key.last_used_unix < 0) {
    return InvalidArgument("the API key's times must not be negative");
  }
  return Status::Ok();
}

Status ValidateLease(std::string_view key, int64_t limit, int64_t want) {
  RETURN_IF_ERROR(ValidateText("a budget key", key, kMaxLabelBytes, /*allow_empty=*/false));
  if (limit < 0 || want < 0) {
    return InvalidArgument("budget '{}': limit and want must not be negative", key);
  }
  return Status::Ok();
}

Status ValidateKeyVersion(const KeyVersion& version) {
  if (!NameMatches(version.name, 64, "_.-")) {
    return InvalidArgument("key name '{}' must be 1 to 64 of A-Z a-z 0-9 _ . -", version.name);
  }
  if (version.version < 1) {
    return InvalidArgument("key '{}': version {} is not >= 1", version.name, version.version);
  }
  if (version.purpose != "wrapping" && version.purpose != "signing") {
    return InvalidArgument("key '{}': purpose '{}' is neither wrapping nor signing", version.name,
                           version.purpose);
  }
  if (!NameMatches(version.algorithm, 64, "_.-")) {
    return InvalidArgument("key '{}': algorithm '{}' is not a name", version.name,
                           version.algorithm);
  }
  if (version.created_unix < 0) return InvalidArgument("key '{}': negative time", version.name);
  return ValidateSealedBytes(fmt::format("key '{}' version {}", version.name, version.version),
                             version.wrapped_material);
}

Status ValidateStoredFile(const StoredFile& file) {
  const auto id_ok = [](std::string_view id) {
    if (id.size() != 29 || id.substr(0, 5) != "file-") return false;
    for (char c : id.substr(5)) {
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z'))) return false;
    }
    return true;
  };
  if (file.tenant.empty()) return InvalidArgument("a file needs its tenant");
  if (!id_ok(file.id))
    return InvalidArgument("file id '{}' is not file- and 24 of 0-9 a-z", file.id);
  if (file.filename.empty() || file.filename.size() > 1024 ||
      file.filename.find('\0') != std::string::npos) {
    return InvalidArgument("a file name is 1 to 1024 bytes without NUL");
  }
  if (file.purpose.empty() || file.purpose.size() > 64 ||
      file.purpose.find_first_not_of("abcdefghijklmnopqrstuvwxyz_-") != std::string::npos) {
    return InvalidArgument("file purpose '{}' must be 1 to 64 of a-z _ -", file.purpose);
  }
  if (file.bytes < 0) return InvalidArgument("a file's size is not negative");
  if (!file.sealing.empty() && file.sealing != "envelope") {
    return InvalidArgument("file sealing '{}' is neither empty nor envelope", file.sealing);
  }
  return Status::Ok();
}

Status ValidateFileQuery(const FileQuery& query) {
  if (query.tenant.empty()) return InvalidArgument("a file query needs its tenant");
  if (query.limit < 1 || query.limit > 10000) {
    return InvalidArgument("a file query's limit is 1 to 10000");
  }
  return Status::Ok();
}

Status ValidateSealedSecretName(std::string_view name) {
  if (!NameMatches(name, 128, "_.:-")) {
    return InvalidArgument("sealed secret name '{}' must be 1 to 128 of A-Z a-z 0-9 _ . : -", name);
  }
  return Status::Ok();
}

Status ValidateSealedBytes(std::string_view what, std::string_view bytes) {
  if (bytes.empty()) return InvalidArgument("{} is empty", what);
  if (bytes.size() > kMaxSealedBytes) {
    return InvalidArgument("{} is over {} bytes", what, kMaxSealedBytes);
  }
  return Status::Ok();
}

std::string EncodeBytes(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text;
  text.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    text.push_back(kDigits[byte >> 4]);
    text.push_back(kDigits[byte & 0xf]);
  }
  return text;
}

Result<std::string> DecodeBytes(std::string_view text) {
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (text.size() % 2 != 0) return Internal("the store holds hex of odd length");
  std::string bytes(text.size() / 2, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    const int high = digit(text[2 * i]);
    const int low = digit(text[2 * i + 1]);
    if (high < 0 || low < 0) return Internal("the store holds a byte string that is not hex");
    bytes[i] = static_cast<char>(high * 16 + low);
  }
  return bytes;
}

std::string EncodeRoles(const std::vector<std::string>& roles) {
  json::Writer writer;
  writer.StartArray();
  for (const std::string& role : roles) writer.String(role);
  writer.EndArray();
  return writer.Take();
}

Result<std::vector<std::string>> DecodeRoles(std::string_view text) {
  json::Parser parser;
  auto parsed = parser.Parse(text);
  if (!parsed.ok() || !parsed->IsArray()) return Internal("stored roles are not a JSON array");
  std::vector<std::string> roles;
  for (const simdjson::dom::element item : parsed->Array()) {
    std::string_view role;
    if (item.get_string().get(role) != simdjson::SUCCESS) {
      return Internal("stored roles hold a value that is not a string");
    }
    roles.emplace_back(role);
  }
  return roles;
}

std::string EncodeAttributes(const Attributes& attributes) {
  json::Writer writer;
  writer.StartObject();
  for (const auto& [name, value] : attributes) {
    writer.Key(name);
    writer.String(value);
  }
  writer.EndObject();
  return writer.Take();
}

Result<Attributes> DecodeAttributes(std::string_view text) {
  json::Parser parser;
  auto parsed = parser.Parse(text);
  if (!parsed.ok() || !parsed->IsObject()) {
    return Internal("stored attributes are not a JSON object");
  }
  Attributes attributes;
  for (const auto field : parsed->Object()) {
    std::string_view value;
    if (field.value.get_string().get(value) != simdjson::SUCCESS) {
      return Internal("stored attribute '{}' is not a string", std::string_view(field.key));
    }
    attributes[std::string(field.key)] = std::string(value);
  }
  return attributes;
}

int64_t NowUnix() { return UnixMillisNow() / 1000; }

}  // namespace rampart::store::internal

namespace rampart::store {

// A store that keeps no files (a test's in-memory one).
Status Store::AppendAuditBatch(const AuditBatch& batch) {
  RETURN_IF_ERROR(internal::ValidateAuditBatch(batch));
  std::vector<AuditRow> rows;
  internal::UnpackAuditBatch(batch.first_sequence, batch.records, 0, rows);
  RETURN_IF_ERROR(AppendAuditRows(rows));
  if (!batch.checkpoint.has_value()) return Status::Ok();
  return PutAuditCheckpoint(*batch.checkpoint, batch.closes);
}

Status Store::CreateFile(const StoredFile&) { return Unimplemented("this store keeps no files"); }
Result<std::optional<StoredFile>> Store::GetFile(const std::string&, const std::string&) {
  return Unimplemented("this store keeps no files");
}
Result<std::vector<StoredFile>> Store::ListFiles(const FileQuery&) {
  return Unimplemented("this store keeps no files");
}
Status Store::DeleteFile(const std::string&, const std::string&) {
  return Unimplemented("this store keeps no files");
}

}  // namespace rampart::store
