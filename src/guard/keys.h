#pragma once

// The guard's keys: one 32-byte master key, and the per-tenant keys derived from it with
// HKDF-SHA-256 (one for the keyed hashes of the `hash` operator, one for the AES-256-GCM tokens
// of `tokenize`). Tenants do not exist yet: callers use kDefaultTenant, and keys are derived per
// tenant id so that an identity layer only has to pass its own.
//
// The master key comes from a key file (64 hex digits, or exactly 32 raw bytes) or, when none is
// configured, is generated at start: hashes and tokens made under a generated key do not survive
// a restart.
//
// Thread safety: immutable; any thread.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace rampart::guard {

inline constexpr std::string_view kDefaultTenant = "default";

using Key = std::array<uint8_t, 32>;

// What one tenant's operators use.
struct TenantKeys {
  Key hash;   // HMAC-SHA-256 key
  Key token;  // AES-256-GCM key
};

class GuardKeys {
 public:
  // Reads `path`: 64 hex digits (surrounding whitespace ignored) or 32 raw bytes. Errors:
  // NotFound when it cannot be read, InvalidArgument for any other content.
  static Result<GuardKeys> FromFile(const std::string& path);
  // Errors: InvalidArgument unless `bytes` is 32 bytes long.
  static Result<GuardKeys> FromBytes(std::string_view bytes);
  // A random master key (OpenSSL's RAND_bytes).
  static GuardKeys Generate();

  // HKDF-SHA-256(master key, salt "rampart-guard-v1", info "<purpose>:<tenant>").
  TenantKeys ForTenant(std::string_view tenant) const;

 private:
  Key master_{};
};

}  // namespace rampart::guard
