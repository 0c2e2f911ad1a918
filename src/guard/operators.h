#pragma once

// Operators: what replaces an entity the detector found (docs/guard.md, "Operators").
//
//   replace   "[CN_RESIDENT_ID]"
//   mask      keep the first N and last M characters, '*' for each one between; separators
//             (spaces, hyphens, dots, '+', their full-width forms) are kept and not counted.
//             Defaults by type: CN_RESIDENT_ID 3+4, CN_MOBILE the middle 4 digits of its 11
//             (a country code is kept), PAYMENT_CARD the last 4, EMAIL_ADDRESS the user part
//             but its first character (the domain is kept), every other type everything.
//   hash      "<TYPE>_<16 hex digits>": HMAC-SHA-256 under the tenant's key of the value in a
//             canonical form (number-like types without separators, full-width digits as
//             ASCII), truncated to 64 bits. EMAIL_ADDRESS hashes its user part only
//             ("EMAIL_ADDRESS_<hex>@example.com"). Never an unkeyed hash.
//   tokenize  "<<PII:<TYPE>:<base64url>>>": AES-256-GCM of the value under the tenant's token
//             key with the type as associated data (random 96-bit nonce || ciphertext || tag);
//             RestoreTokens reverses it.
//   block     not a text operator: the request (or answer) is refused, naming the types found.
//
// Thread safety: free functions of immutable arguments; any thread.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "guard/keys.h"

namespace rampart::guard {

enum class OperatorKind { kReplace, kMask, kHash, kTokenize, kBlock };
std::string_view OperatorKindName(OperatorKind kind);

struct Operator {
  OperatorKind kind = OperatorKind::kReplace;
  // mask only: characters kept at each end; -1 = the type's default.
  int keep_first = -1;
  int keep_last = -1;

  bool operator==(const Operator&) const = default;
};

// "replace", "mask", "mask:N:M" (keep N first and M last), "hash", "tokenize", "block".
// Errors: InvalidArgument naming what is known.
Result<Operator> ParseOperator(std::string_view text);
// The inverse of ParseOperator ("mask:3:4" when counts are given, else "mask").
std::string OperatorText(const Operator& op);

// The static name of a known entity type (detector.h's constants), or nullopt.
std::optional<std::string_view> KnownEntityType(std::string_view name);
// Every known entity type name, in detector.h's order.
const std::vector<std::string_view>& KnownEntityTypes();

// The operator a type gets when a policy says "redact" and names none for it (the seed's
// defaults): mask for CN_RESIDENT_ID, CN_MOBILE and PAYMENT_CARD, hash for EMAIL_ADDRESS, replace
// for every other type.
Operator DefaultOperator(std::string_view type);

// Which operator each type gets: `by_type` first, then `all` when set, then DefaultOperator.
struct OperatorChoice {
  std::map<std::string, Operator, std::less<>> by_type;
  std::optional<Operator> all;

  Operator For(std::string_view type) const;
};

// The text that replaces `value`, an entity of `type`, under `op`. REQUIRES: op.kind != kBlock.
std::string ApplyOperator(const Operator& op, std::string_view type, std::string_view value,
                          const TenantKeys& keys);

// `text` with every token the tokenize operator made under `keys` replaced by its value; tokens
// that do not decrypt (another tenant's key, altered) are left as they are. `restored` counts the
// tokens reversed.
std::string RestoreTokens(std::string_view text, const TenantKeys& keys,
                          size_t* restored = nullptr);

}  // namespace rampart::guard
