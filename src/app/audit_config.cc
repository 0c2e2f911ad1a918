#include "app/audit_config.h"

#include "app/yaml_fields.h"

namespace rampart::app {
namespace {

using yaml::CheckKeys;
using yaml::Read;

Status ReadKeyring(const YAML::Node& node, KeyringConfig& config) {
  constexpr std::string_view where = "keyring";
  RETURN_IF_ERROR(CheckKeys(node, where, {"master_key_file", "master_key_env"}));
  RETURN_IF_ERROR(Read(node, "master_key_file", where, config.master_key_file));
  RETURN_IF_ERROR(Read(node, "master_key_env", where, config.master_key_env));
  if (config.master_key_file.empty() == config.master_key_env.empty()) {
    return InvalidArgument("'{}': give exactly one of master_key_file and master_key_env (line {})",
                           where, node.Mark().line + 1);
  }
  return Status::Ok();
}

// A positive integer at `key`, when present.
Status ReadPositive(const YAML::Node& node, std::string_view key, std::string_view where,
                    int64_t& into) {
  int64_t value = into;
  RETURN_IF_ERROR(Read(node, key, where, value));
  if (value <= 0) {
    return InvalidArgument("'{}.{}' must be positive (line {})", where, key,
                           node[std::string(key)].Mark().line + 1);
  }
  into = value;
  return Status::Ok();
}

Status ReadAudit(const YAML::Node& node, AuditConfig& config) {
  constexpr std::string_view where = "audit";
  RETURN_IF_ERROR(
      CheckKeys(node, where,
                {"enabled", "sync", "max_delay_ms", "digest", "checkpoint_every_records",
                 "checkpoint_every_seconds", "retention_days", "signing_key", "signing_algorithm",
                 "envelope_key", "region"}));
  RETURN_IF_ERROR(Read(node, "enabled", where, config.enabled));
  RETURN_IF_ERROR(Read(node, "sync", where, config.log.sync));
  int64_t max_delay_ms = config.log.max_delay.count();
  RETURN_IF_ERROR(ReadPositive(node, "max_delay_ms", where, max_delay_ms));
  config.log.max_delay = std::chrono::milliseconds(max_delay_ms);
  std::string digest(crypto::DigestName(config.log.digest));
  RETURN_IF_ERROR(Read(node, "digest", where, digest));
  Result<crypto::DigestAlgorithm> parsed_digest = crypto::ParseDigest(digest);
  if (!parsed_digest.ok()) {
    return InvalidArgument("'{}.digest': '{}' is not one of sha256, sm3 (line {})", where, digest,
                           node["digest"].Mark().line + 1);
  }
  config.log.digest = *parsed_digest;
  RETURN_IF_ERROR(
      ReadPositive(node, "checkpoint_every_records", where, config.log.checkpoint_every_records));
  int64_t every_seconds = config.log.checkpoint_every.count();
  RETURN_IF_ERROR(ReadPositive(node, "checkpoint_every_seconds", where, every_seconds));
  config.log.checkpoint_every = std::chrono::seconds(every_seconds);
  int64_t retention_days = config.log.retention.count() / 24;
  RETURN_IF_ERROR(ReadPositive(node, "retention_days", where, retention_days));
  config.log.retention = std::chrono::hours(24 * retention_days);
  RETURN_IF_ERROR(Read(node, "signing_key", where, config.signing_key));
  std::string algorithm(crypto::SignatureName(config.signing_algorithm));
  RETURN_IF_ERROR(Read(node, "signing_algorithm", where, algorithm));
  Result<crypto::SignatureAlgorithm> parsed_algorithm = crypto::ParseSignature(algorithm);
  if (!parsed_algorithm.ok()) {
    return InvalidArgument("'{}.signing_algorithm': '{}' is not one of ed25519, sm2-sm3 (line {})",
                           where, algorithm, node["signing_algorithm"].Mark().line + 1);
  }
  config.signing_algorithm = *parsed_algorithm;
  RETURN_IF_ERROR(Read(node, "envelope_key", where, config.envelope_key));
  RETURN_IF_ERROR(Read(node, "region", where, config.region));
  if (config.signing_key.empty() || config.envelope_key.empty() || config.region.empty()) {
    return InvalidArgument("'{}': signing_key, envelope_key and region must not be empty (line {})",
                           where, node.Mark().line + 1);
  }
  return Status::Ok();
}

// `read` over `path`'s `section`, as the other config readers do.
template <typename Config>
Result<std::optional<Config>> LoadSection(const std::string& path, const char* section,
                                          Status (*read)(const YAML::Node&, Config&)) {
  if (path.empty()) return std::optional<Config>();
  Config config;
  try {
    const YAML::Node root = YAML::LoadFile(path);
    if (!root.IsMap() || !root[section]) return std::optional<Config>();
    RETURN_IF_ERROR(read(root[section], config).WithContext(fmt::format("config file '{}'", path)));
  } catch (const YAML::BadFile&) {
    return NotFound("config file '{}' cannot be read", path);
  } catch (const YAML::Exception& error) {
    return InvalidArgument("config file '{}' (line {}): {}", path, error.mark.line + 1, error.msg);
  }
  return std::optional<Config>(std::move(config));
}

}  // namespace

Result<std::optional<KeyringConfig>> LoadKeyringConfig(const std::string& path) {
  return LoadSection<KeyringConfig>(path, "keyring", ReadKeyring);
}

Result<std::optional<AuditConfig>> LoadAuditConfig(const std::string& path) {
  return LoadSection<AuditConfig>(path, "audit", ReadAudit);
}

}  // namespace rampart::app
