#pragma once

// What both backends share besides the schema: the rules a record must follow before it is
// written (InvalidArgument otherwise), the TEXT encoding of roles and attributes, and the clock.
// Internal to src/store.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "store/store.h"

namespace rampart::store::internal {

// Limits on what a record may hold (bytes).
inline constexpr size_t kMaxRoleBytes = 128;
inline constexpr size_t kMaxAttributeNameBytes = 128;
inline constexpr size_t kMaxAttributeValueBytes = 4096;
inline constexpr size_t kMaxLabelBytes = 256;  // ApiKey::name, ids, salts, hashes, budget keys

Status ValidateTenantName(std::string_view name);     // [A-Za-z0-9_.-]{1,64}
Status ValidatePrincipalName(std::string_view name);  // [A-Za-z0-9_.@:/-]{1,128}
Status ValidateTenant(const Tenant& tenant);
Status ValidatePrincipal(const Principal& principal);
Status ValidateApiKey(const ApiKey& key);
Status ValidateLease(std::string_view key, int64_t limit, int64_t want);
Status ValidateKeyVersion(const KeyVersion& version);
Status ValidateStoredFile(const StoredFile& file);
Status ValidateFileQuery(const FileQuery& query);
Status ValidateSealedSecretName(std::string_view name);  // [A-Za-z0-9_.:-]{1,128}
Status ValidateSealedBytes(std::string_view what, std::string_view bytes);  // <= kMaxSealedBytes

// Bytes as lower-case hex TEXT (wrapped keys, envelopes), so that both dialects keep them alike.
// Decode fails with Internal on anything this build did not write.
std::string EncodeBytes(std::string_view bytes);
Result<std::string> DecodeBytes(std::string_view text);

// Roles as a JSON array of strings, attributes as a JSON object of strings. Decode fails with
// Internal (the database holds something this build did not write).
std::string EncodeRoles(const std::vector<std::string>& roles);
Result<std::vector<std::string>> DecodeRoles(std::string_view text);
std::string EncodeAttributes(const Attributes& attributes);
Result<Attributes> DecodeAttributes(std::string_view text);

// The wall clock in Unix seconds (creation and revocation times the store sets).
int64_t NowUnix();

}  // namespace rampart::store::internal
