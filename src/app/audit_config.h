#pragma once

// The `audit:` and `keyring:` sections of the YAML config file (docs/audit.md,
// docs/configuration.md):
//
//   keyring:                               # where the keyring's master key comes from: one of
//     master_key_file: ./data/master.key   #   a file (32 bytes, hex or base64; mode 0600)
//     master_key_env: RAMPART_MASTER_KEY   #   an environment variable
//   audit:
//     enabled: true
//     sync: false                  # true: an answer waits until its record is durable
//     max_delay_ms: 10             # batched: the longest a record waits for its write
//     digest: sha256               # sha256 | sm3: content digests, the chain and the tree
//     checkpoint_every_records: 1000
//     checkpoint_every_seconds: 60
//     retention_days: 180
//     signing_key: audit-signing   # in the keyring; created on first start
//     signing_algorithm: ed25519   # ed25519 | sm2-sm3
//     envelope_key: audit-content  # audit:full: seals content (aes-256-gcm)
//     region: default              # bound into every sealed record
//
// Unknown keys and wrong types are errors naming the key and its line.

#include <chrono>
#include <optional>
#include <string>

#include "audit/audit_log.h"
#include "core/status.h"
#include "crypto/digest.h"
#include "crypto/signature.h"

namespace rampart::app {

struct KeyringConfig {
  std::string master_key_file;  // exactly one of these two
  std::string master_key_env;
};

struct AuditConfig {
  bool enabled = true;  // a section present turns the log on unless it says otherwise
  audit::AuditOptions log;
  std::string signing_key = "audit-signing";
  crypto::SignatureAlgorithm signing_algorithm = crypto::SignatureAlgorithm::kEd25519;
  std::string envelope_key = "audit-content";
  std::string region = "default";
};

// Reads `path`'s keyring: section: nullopt when there is none. Errors: NotFound for a file that
// cannot be read; InvalidArgument naming the key (neither or both sources given).
Result<std::optional<KeyringConfig>> LoadKeyringConfig(const std::string& path);
// Reads `path`'s audit: section: nullopt when there is none (the log is off).
Result<std::optional<AuditConfig>> LoadAuditConfig(const std::string& path);

}  // namespace rampart::app
