#include "app/access_setup.h"

#include <fmt/ranges.h>

#include "core/logging.h"

namespace rampart::app {

std::string ResolveDataDir(const std::string& flag, const AccessConfig* config) {
  if (!flag.empty()) return flag;
  if (config != nullptr && !config->data_dir.empty()) return config->data_dir;
  return std::string(kDefaultDataDir);
}

Result<std::unique_ptr<store::Store>> OpenConfiguredStore(const AccessConfig* config,
                                                          const std::string& data_dir) {
  if (config != nullptr && !config->postgres.empty()) {
    return store::OpenPostgresStore(config->postgres);
  }
  return store::OpenSqliteStore(data_dir);
}

Result<AccessRuntime> StartAccess(const AccessConfig& config, const std::string& data_dir) {
  AccessRuntime access;
  ASSIGN_OR_RETURN(access.store, OpenConfiguredStore(&config, data_dir));
  ASSIGN_OR_RETURN(access.keys, identity::ApiKeyTable::Open(*access.store));
  ASSIGN_OR_RETURN(std::unique_ptr<identity::Authenticator> authenticator,
                   identity::Authenticator::Make(config.authentication, access.keys.get()));
  Result<std::unique_ptr<policy::PolicyEngine>> policies =
      policy::PolicyEngine::Open(config.policy_files);
  if (!policies.ok()) return policies.status().WithContext("access.policy_files");
  policy::QuotaOptions quota_options;
  quota_options.rules = config.quota_rules;
  quota_options.default_reserved_tokens = config.default_reserved_tokens;
  // Budgets are shared through the store only when replicas share it (PostgreSQL).
  store::Store* shared = config.postgres.empty() ? nullptr : access.store.get();
  auto quotas = std::make_unique<policy::QuotaLedger>(std::move(quota_options), shared);
  LOG_INFO("access: store {}; policy files {} ({} rule(s)); {} quota rule(s)",
           access.store->Describe(), fmt::join(config.policy_files, ", "),
           (*policies)->Current()->rule_count(), config.quota_rules.size());
  access.control = policy::AccessControl::Enforcing(
      policy::AccessControl::Parts{.authenticator = std::move(authenticator),
                                   .policies = std::move(policies).value(),
                                   .quotas = std::move(quotas),
                                   .default_reserved_tokens = config.default_reserved_tokens});
  return access;
}

Status ApplyModelShares(const AccessConfig& config, serve::InferenceServer& server) {
  std::vector<serve::InstanceShare> shares;
  for (const ModelShare& share : config.model_shares) {
    shares.push_back(
        serve::InstanceShare{.model = share.model, .tenant = share.tenant, .share = share.share});
  }
  return server.SetInstanceShares(std::move(shares)).WithContext("access.quotas.model_shares");
}

Status ReloadAccess(AccessRuntime& access, const std::string& config_file,
                    serve::InferenceServer* server) {
  ASSIGN_OR_RETURN(std::optional<AccessConfig> config, LoadAccessConfig(config_file));
  if (!config) {
    return FailedPrecondition(
        "the config no longer has an access: section; turning access control off needs a "
        "restart");
  }
  RETURN_IF_ERROR(access.control->Reload(config->quota_rules));
  if (server != nullptr) RETURN_IF_ERROR(ApplyModelShares(*config, *server));
  LOG_INFO("access: policies reloaded ({} rule(s)), {} quota rule(s)",
           access.control->policy_set()->rule_count(), config->quota_rules.size());
  return Status::Ok();
}

}  // namespace rampart::app
