#pragma once

// An enforcing policy::AccessControl for tests: an in-memory store with tenant acme, an API key
// per role (analyst, viewer, limited), anonymous admins from 127.0.0.1, a policy file written to
// a temporary directory, and quota rules (one request a minute for the principal `limited`, a
// budget of 100 tokens a day for tenant `thrifty`).

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "identity/api_keys.h"
#include "identity/authenticator.h"
#include "policy/access.h"
#include "testing/memory_store.h"

namespace rampart::testing {

inline constexpr std::string_view kAccessPolicy = R"(
roles:
  - name: viewer
  - name: analyst
    inherits: [viewer]
  - name: admin
    inherits: [analyst]
rules:
  - id: admins-all
    effect: permit
    principal: {role: admin}
    action: "*"
  - id: viewers-read
    effect: permit
    principal: {role: viewer}
    action: [model:read, models:read, server:read, admin:keys:read]
  - id: analysts-simple
    effect: permit
    principal: {role: analyst}
    action: [model:infer, chat:create, embeddings:create]
    resource: {type: model, name: [simple, "local-*"]}
  - id: gdpr-local
    effect: permit
    principal: {role: analyst}
    action: chat:create
    when:
      - has principal.gdpr
      - principal.gdpr == "true"
    obligations: [local_only, redact:pii, audit:full]
)";

class AccessFixture {
 public:
  explicit AccessFixture(std::string_view policy = kAccessPolicy) {
    directory_ = std::filesystem::path(::testing::TempDir()) /
                 ("rampart_access_" + std::to_string(::getpid()) + "_" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(directory_);
    policy_path_ = (directory_ / "policy.yaml").string();
    WritePolicy(policy);
    EXPECT_TRUE(store_.CreateTenant({.name = "acme"}).ok());
    EXPECT_TRUE(store_.CreateTenant({.name = "thrifty"}).ok());
    analyst_key_ = AddKey("acme", "alice", {"analyst"});
    viewer_key_ = AddKey("acme", "victor", {"viewer"});
    limited_key_ = AddKey("acme", "limited", {"analyst"});
    thrifty_key_ = AddKey("thrifty", "tom", {"analyst"});
    EXPECT_TRUE(store_
                    .PutPrincipal({.tenant = "acme",
                                   .name = "gina",
                                   .roles = {"analyst"},
                                   .attributes = {{"gdpr", "true"}}})
                    .ok());
    gdpr_key_ = AddKey("acme", "gina", {});
    auto keys = identity::ApiKeyTable::Open(store_);
    EXPECT_TRUE(keys.ok()) << keys.status().ToString();
    keys_ = std::move(keys).value();
    identity::AuthenticatorOptions authentication;
    authentication.anonymous.from = {IpNetwork::Parse("127.0.0.1").value()};
    authentication.anonymous.roles = {"admin"};
    auto authenticator = identity::Authenticator::Make(authentication, keys_.get());
    EXPECT_TRUE(authenticator.ok()) << authenticator.status().ToString();
    auto policies = policy::PolicyEngine::Open({policy_path_});
    EXPECT_TRUE(policies.ok()) << policies.status().ToString();
    policy::QuotaOptions quotas;
    quotas.rules = QuotaRules();
    control_ = policy::AccessControl::Enforcing(
        {.authenticator = std::move(authenticator).value(),
         .policies = std::move(policies).value(),
         .quotas = std::make_unique<policy::QuotaLedger>(std::move(quotas), nullptr),
         .default_reserved_tokens = 64});
  }
  ~AccessFixture() { std::filesystem::remove_all(directory_); }

  static std::vector<policy::QuotaRule> QuotaRules() {
    return {
        policy::QuotaRule{.scope = "principal",
                          .tenant = "acme",
                          .name = "limited",
                          .limits = {.requests_per_minute = 1}},
        policy::QuotaRule{.scope = "tenant", .name = "thrifty", .limits = {.tokens_per_day = 100}},
    };
  }

  void WritePolicy(std::string_view text) { std::ofstream(policy_path_) << text; }

  policy::AccessControl& control() { return *control_; }
  store::Store& store() { return store_; }
  identity::ApiKeyTable& keys() { return *keys_; }
  const std::string& analyst_key() const { return analyst_key_; }
  const std::string& viewer_key() const { return viewer_key_; }
  const std::string& limited_key() const { return limited_key_; }
  const std::string& thrifty_key() const { return thrifty_key_; }
  const std::string& gdpr_key() const { return gdpr_key_; }

 private:
  std::string AddKey(const std::string& tenant, const std::string& principal,
                     std::vector<std::string> roles) {
    identity::NewApiKey made =
        identity::GenerateApiKey(tenant, principal, principal, std::move(roles), 1);
    EXPECT_TRUE(store_.CreateApiKey(made.record).ok());
    return made.key;
  }

  std::filesystem::path directory_;
  std::string policy_path_;
  MemoryStore store_;
  std::unique_ptr<identity::ApiKeyTable> keys_;
  std::unique_ptr<policy::AccessControl> control_;
  std::string analyst_key_, viewer_key_, limited_key_, thrifty_key_, gdpr_key_;
};

}  // namespace rampart::testing
