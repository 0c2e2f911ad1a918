#include "app/access_config.h"

#include "app/yaml_fields.h"

namespace rampart::app {
namespace {

using yaml::CheckKeys;
using yaml::Read;
using yaml::ReadList;

Status ReadAnonymous(const YAML::Node& node, identity::AnonymousOptions& anonymous) {
  constexpr std::string_view where = "access.anonymous";
  RETURN_IF_ERROR(CheckKeys(node, where, {"from", "tenant", "principal", "roles"}));
  std::vector<std::string> from;
  RETURN_IF_ERROR(Read(node, "from", where, from));
  for (size_t i = 0; i < from.size(); ++i) {
    Result<IpNetwork> network = IpNetwork::Parse(from[i]);
    if (!network.ok()) {
      return network.status().WithContext(
          fmt::format("'{}.from[{}]' (line {})", where, i, node["from"].Mark().line + 1));
    }
    anonymous.from.push_back(*network);
  }
  RETURN_IF_ERROR(Read(node, "tenant", where, anonymous.tenant));
  RETURN_IF_ERROR(Read(node, "principal", where, anonymous.principal));
  RETURN_IF_ERROR(Read(node, "roles", where, anonymous.roles));
  if (anonymous.tenant.empty() || anonymous.principal.empty()) {
    return InvalidArgument("'{}': tenant and principal must not be empty (line {})", where,
                           node.Mark().line + 1);
  }
  return Status::Ok();
}

Status ReadJwt(const YAML::Node& node, identity::JwtOptions& jwt) {
  constexpr std::string_view where = "access.jwt";
  RETURN_IF_ERROR(CheckKeys(node, where,
                            {"jwks_file", "issuer", "audience", "clock_skew_seconds", "algorithms",
                             "max_token_bytes", "claims"}));
  RETURN_IF_ERROR(Read(node, "jwks_file", where, jwt.jwks_file));
  RETURN_IF_ERROR(Read(node, "issuer", where, jwt.issuer));
  if (const YAML::Node audience = node["audience"]; audience && audience.IsScalar()) {
    jwt.audiences = {audience.as<std::string>()};
  } else {
    RETURN_IF_ERROR(Read(node, "audience", where, jwt.audiences));
  }
  RETURN_IF_ERROR(Read(node, "clock_skew_seconds", where, jwt.clock_skew_seconds));
  RETURN_IF_ERROR(Read(node, "algorithms", where, jwt.algorithms));
  RETURN_IF_ERROR(Read(node, "max_token_bytes", where, jwt.max_token_bytes));
  for (const std::string& algorithm : jwt.algorithms) {
    if (algorithm != "HS256" && algorithm != "RS256" && algorithm != "ES256") {
      return InvalidArgument("'{}.algorithms': '{}' is not one of HS256, RS256, ES256 (line {})",
                             where, algorithm, node["algorithms"].Mark().line + 1);
    }
  }
  if (jwt.jwks_file.empty() || jwt.issuer.empty()) {
    return InvalidArgument("'{}': jwks_file and issuer are required (line {})", where,
                           node.Mark().line + 1);
  }
  if (const YAML::Node claims = node["claims"]) {
    const std::string at = fmt::format("{}.claims", where);
    RETURN_IF_ERROR(
        CheckKeys(claims, at, {"tenant", "default_tenant", "principal", "roles", "attributes"}));
    identity::JwtClaimMapping& mapping = jwt.claims;
    RETURN_IF_ERROR(Read(claims, "tenant", at, mapping.tenant));
    RETURN_IF_ERROR(Read(claims, "default_tenant", at, mapping.default_tenant));
    RETURN_IF_ERROR(Read(claims, "principal", at, mapping.principal));
    RETURN_IF_ERROR(Read(claims, "roles", at, mapping.roles));
    std::map<std::string, std::string> attributes;
    RETURN_IF_ERROR(Read(claims, "attributes", at, attributes));
    mapping.attributes.assign(attributes.begin(), attributes.end());
  }
  return Status::Ok();
}

Status ReadMtlsRule(const YAML::Node& node, std::string_view where, identity::MtlsRule& rule) {
  RETURN_IF_ERROR(CheckKeys(
      node, where, {"spiffe", "subject_cn", "san_dns", "subject", "tenant", "principal", "roles"}));
  RETURN_IF_ERROR(Read(node, "spiffe", where, rule.spiffe));
  RETURN_IF_ERROR(Read(node, "subject_cn", where, rule.subject_cn));
  RETURN_IF_ERROR(Read(node, "san_dns", where, rule.san_dns));
  RETURN_IF_ERROR(Read(node, "subject", where, rule.subject));
  RETURN_IF_ERROR(Read(node, "tenant", where, rule.tenant));
  RETURN_IF_ERROR(Read(node, "principal", where, rule.principal));
  RETURN_IF_ERROR(Read(node, "roles", where, rule.roles));
  const int selectors = !rule.spiffe.empty() + !rule.subject_cn.empty() + !rule.san_dns.empty() +
                        !rule.subject.empty();
  if (selectors != 1) {
    return InvalidArgument(
        "'{}': exactly one of spiffe, subject_cn, san_dns, subject is required (line {})", where,
        node.Mark().line + 1);
  }
  if (rule.tenant.empty() || rule.principal.empty()) {
    return InvalidArgument("'{}': tenant and principal are required (line {})", where,
                           node.Mark().line + 1);
  }
  return Status::Ok();
}

Status ReadQuotaRule(const YAML::Node& node, std::string_view where, policy::QuotaRule& rule) {
  RETURN_IF_ERROR(CheckKeys(node, where,
                            {"scope", "tenant", "name", "requests_per_minute", "tokens_per_minute",
                             "concurrent_requests", "tokens_per_day"}));
  RETURN_IF_ERROR(Read(node, "scope", where, rule.scope));
  if (rule.scope != "key" && rule.scope != "principal" && rule.scope != "tenant") {
    return InvalidArgument("'{}.scope' must be key, principal or tenant, got '{}' (line {})", where,
                           rule.scope, node.Mark().line + 1);
  }
  RETURN_IF_ERROR(Read(node, "tenant", where, rule.tenant));
  RETURN_IF_ERROR(Read(node, "name", where, rule.name));
  policy::QuotaLimits& limits = rule.limits;
  for (auto [key, value] : {std::pair{"requests_per_minute", &limits.requests_per_minute},
                            std::pair{"tokens_per_minute", &limits.tokens_per_minute},
                            std::pair{"concurrent_requests", &limits.concurrent_requests},
                            std::pair{"tokens_per_day", &limits.tokens_per_day}}) {
    RETURN_IF_ERROR(Read(node, key, where, *value));
    if (*value < 0) {
      return InvalidArgument("'{}.{}' must not be negative (line {})", where, key,
                             node[key].Mark().line + 1);
    }
  }
  return Status::Ok();
}

Status ReadModelShare(const YAML::Node& node, std::string_view where, ModelShare& share) {
  RETURN_IF_ERROR(CheckKeys(node, where, {"tenant", "model", "share"}));
  RETURN_IF_ERROR(Read(node, "tenant", where, share.tenant));
  RETURN_IF_ERROR(Read(node, "model", where, share.model));
  RETURN_IF_ERROR(Read(node, "share", where, share.share));
  if (share.tenant.empty() || share.model.empty()) {
    return InvalidArgument("'{}': tenant and model are required (line {})", where,
                           node.Mark().line + 1);
  }
  if (!(share.share > 0 && share.share <= 1)) {
    return InvalidArgument("'{}.share' must be in (0, 1], got {} (line {})", where, share.share,
                           node.Mark().line + 1);
  }
  return Status::Ok();
}

Status ReadAccess(const YAML::Node& node, AccessConfig& config) {
  constexpr std::string_view where = "access";
  RETURN_IF_ERROR(CheckKeys(
      node, where, {"data_dir", "store", "anonymous", "jwt", "mtls", "policy_files", "quotas"}));
  RETURN_IF_ERROR(Read(node, "data_dir", where, config.data_dir));
  if (const YAML::Node store = node["store"]) {
    RETURN_IF_ERROR(CheckKeys(store, "access.store", {"postgres"}));
    RETURN_IF_ERROR(Read(store, "postgres", "access.store", config.postgres));
  }
  if (const YAML::Node anonymous = node["anonymous"]) {
    RETURN_IF_ERROR(ReadAnonymous(anonymous, config.authentication.anonymous));
  }
  if (const YAML::Node jwt = node["jwt"]) {
    identity::JwtOptions options;
    RETURN_IF_ERROR(ReadJwt(jwt, options));
    config.authentication.jwt = std::move(options);
  }
  RETURN_IF_ERROR(
      ReadList<identity::MtlsRule>(node, "mtls", where, config.authentication.mtls, ReadMtlsRule));
  RETURN_IF_ERROR(Read(node, "policy_files", where, config.policy_files));
  if (config.policy_files.empty()) {
    return InvalidArgument(
        "'access.policy_files' must name at least one policy file (line {}): without one every "
        "request would be denied",
        node.Mark().line + 1);
  }
  if (const YAML::Node quotas = node["quotas"]) {
    constexpr std::string_view at = "access.quotas";
    RETURN_IF_ERROR(CheckKeys(quotas, at, {"default_reserved_tokens", "rules", "model_shares"}));
    RETURN_IF_ERROR(Read(quotas, "default_reserved_tokens", at, config.default_reserved_tokens));
    if (config.default_reserved_tokens < 0) {
      return InvalidArgument("'{}.default_reserved_tokens' must not be negative", at);
    }
    RETURN_IF_ERROR(
        ReadList<policy::QuotaRule>(quotas, "rules", at, config.quota_rules, ReadQuotaRule));
    RETURN_IF_ERROR(
        ReadList<ModelShare>(quotas, "model_shares", at, config.model_shares, ReadModelShare));
  }
  return Status::Ok();
}

}  // namespace

Result<std::optional<AccessConfig>> LoadAccessConfig(const std::string& path) {
  if (path.empty()) return std::optional<AccessConfig>();
  AccessConfig config;
  try {
    const YAML::Node root = YAML::LoadFile(path);
    if (!root.IsMap() || !root["access"]) return std::optional<AccessConfig>();
    RETURN_IF_ERROR(
        ReadAccess(root["access"], config).WithContext(fmt::format("config file '{}'", path)));
  } catch (const YAML::BadFile&) {
    return NotFound("config file '{}' cannot be read", path);
  } catch (const YAML::Exception& error) {
    return InvalidArgument("config file '{}' (line {}): {}", path, error.mark.line + 1, error.msg);
  }
  return std::optional<AccessConfig>(std::move(config));
}

}  // namespace rampart::app
