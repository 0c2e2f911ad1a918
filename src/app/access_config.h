#pragma once

// The `access:` section of the YAML config file (docs/access.md, docs/configuration.md): where
// the store lives, who may come in anonymously, JWT and mTLS identities, the policy files and
// the quotas, read into the identity, policy and quota modules' option structs.
//
//   access:
//     data_dir: ./data                  # also --data-dir (the flag wins)
//     store: {postgres: "postgresql://..."}
//     anonymous: {from: [127.0.0.1/32], tenant: default, principal: anonymous, roles: [admin]}
//     jwt: {jwks_file, issuer, audience: [...], clock_skew_seconds, algorithms: [...],
//           max_token_bytes, claims: {tenant, default_tenant, principal, roles,
//           attributes: {attribute: claim}}}
//     mtls: [{spiffe | subject_cn | san_dns | subject, tenant, principal, roles}]
//     policy_files: [...]
//     quotas:
//       default_reserved_tokens: 1024
//       rules: [{scope: key|principal|tenant, tenant, name, requests_per_minute,
//                tokens_per_minute, concurrent_requests, tokens_per_day}]
//       model_shares: [{tenant, model, share}]
//
// Unknown keys and wrong types are errors naming the key (its dotted path) and line. Relative
// file names are read from the working directory, as the server's other paths.

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "identity/authenticator.h"
#include "policy/quota.h"

namespace rampart::app {

// A tenant's share of one local model's instance time (the scheduler's admission).
struct ModelShare {
  std::string tenant;
  std::string model;
  double share = 0;  // (0, 1]
};

struct AccessConfig {
  std::string data_dir;  // empty: not given (the --data-dir default applies)
  std::string postgres;  // a libpq connection string; empty = SQLite under the data dir
  identity::AuthenticatorOptions authentication;
  std::vector<std::string> policy_files;
  int64_t default_reserved_tokens = 1024;
  std::vector<policy::QuotaRule> quota_rules;
  std::vector<ModelShare> model_shares;
};

// Reads `path`'s access: section: nullopt when the file (or `path`, empty) has none: access is
// then open. Errors: NotFound for a file that cannot be read, InvalidArgument naming the key.
Result<std::optional<AccessConfig>> LoadAccessConfig(const std::string& path);

}  // namespace rampart::app
