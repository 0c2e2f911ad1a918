#include "app/access_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace rampart::app {
namespace {

std::string WriteTemp(const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("rampart_access_" + std::to_string(getpid()) + "_" +
                     ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".yaml");
  std::ofstream(path) << text;
  return path.string();
}

TEST(AccessConfig, ReadsEveryKey) {
  const std::string path = WriteTemp(R"(
server: {model_repository: /models}
access:
  data_dir: /var/lib/rampart
  store: {postgres: "postgresql://rampart@db/rampart"}
  anonymous:
    from: [127.0.0.1/32, "::1/128"]
    tenant: default
    principal: anonymous
    roles: [admin]
  jwt:
    jwks_file: /etc/rampart/jwks.json
    issuer: https://idp.example.com
    audience: [rampart, api]
    clock_skew_seconds: 30
    algorithms: [RS256, HS256]
    claims: {tenant: tid, principal: sub, roles: groups, attributes: {department: dept}}
  mtls:
    - {spiffe: "spiffe://acme.internal/ns/*/sa/*", tenant: acme, principal: "{uri}"}
    - {subject_cn: "*.svc.acme.internal", tenant: acme, principal: "{cn}", roles: [service]}
  policy_files: [a.yaml, b.yaml]
  quotas:
    default_reserved_tokens: 512
    rules:
      - {scope: tenant, name: acme, requests_per_minute: 600, tokens_per_minute: 100000,
         concurrent_requests: 32, tokens_per_day: 5000000}
      - {scope: key, requests_per_minute: 60}
    model_shares:
      - {tenant: acme, model: simple, share: 0.5}
)");
  Result<std::optional<AccessConfig>> loaded = LoadAccessConfig(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_TRUE(loaded->has_value());
  const AccessConfig& config = **loaded;
  EXPECT_EQ(config.data_dir, "/var/lib/rampart");
  EXPECT_EQ(config.postgres, "postgresql://rampart@db/rampart");
  const identity::AuthenticatorOptions& auth = config.authentication;
  ASSERT_EQ(auth.anonymous.from.size(), 2u);
  EXPECT_TRUE(auth.anonymous.from[1].Contains("::1"));
  EXPECT_EQ(auth.anonymous.roles, std::vector<std::string>{"admin"});
  ASSERT_TRUE(auth.jwt.has_value());
  EXPECT_EQ(auth.jwt->audiences, (std::vector<std::string>{"rampart", "api"}));
  EXPECT_EQ(auth.jwt->clock_skew_seconds, 30);
  EXPECT_EQ(auth.jwt->claims.tenant, "tid");
  EXPECT_EQ(auth.jwt->claims.roles, "groups");
  ASSERT_EQ(auth.jwt->claims.attributes.size(), 1u);
  EXPECT_EQ(auth.jwt->claims.attributes[0],
            (std::pair<std::string, std::string>{"department", "dept"}));
  ASSERT_EQ(auth.mtls.size(), 2u);
  EXPECT_EQ(auth.mtls[1].roles, std::vector<std::string>{"service"});
  EXPECT_EQ(config.policy_files, (std::vector<std::string>{"a.yaml", "b.yaml"}));
  EXPECT_EQ(config.default_reserved_tokens, 512);
  ASSERT_EQ(config.quota_rules.size(), 2u);
  EXPECT_EQ(config.quota_rules[0].name, "acme");
  EXPECT_EQ(config.quota_rules[0].limits.tokens_per_day, 5000000);
  EXPECT_EQ(config.quota_rules[1].scope, "key");
  EXPECT_EQ(config.quota_rules[1].name, "*");
  ASSERT_EQ(config.model_shares.size(), 1u);
  EXPECT_DOUBLE_EQ(config.model_shares[0].share, 0.5);
}

TEST(AccessConfig, NoSectionMeansOpen) {
  Result<std::optional<AccessConfig>> none = LoadAccessConfig(WriteTemp("server: {}\n"));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  EXPECT_FALSE(LoadAccessConfig("")->has_value());
  EXPECT_EQ(LoadAccessConfig("/nonexistent/rampart.yaml").status().code(), StatusCode::kNotFound);
}

TEST(AccessConfig, ErrorsNameTheKey) {
  const auto fails = [](const std::string& section, std::string_view expected) {
    Result<std::optional<AccessConfig>> loaded =
        LoadAccessConfig(WriteTemp("access:\n  policy_files: [p.yaml]\n" + section));
    ASSERT_FALSE(loaded.ok()) << section;
    EXPECT_EQ(loaded.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(loaded.status().message().find(expected), std::string::npos)
        << loaded.status().message();
  };
  fails("  polcy: 1\n", "unknown key 'access.polcy'");
  fails("  anonymous: {from: [10.0.0.0/33]}\n", "access.anonymous.from[0]");
  fails("  anonymous: {fromm: []}\n", "access.anonymous.fromm");
  fails("  jwt: {issuer: x}\n", "jwks_file and issuer are required");
  fails("  jwt: {jwks_file: j, issuer: x, algorithms: [none]}\n", "'none'");
  fails("  jwt: {jwks_file: j, issuer: x, claims: {tenat: t}}\n", "access.jwt.claims.tenat");
  fails("  mtls: [{tenant: a, principal: b}]\n", "access.mtls[0]");
  fails("  mtls: [{spiffe: x, san_dns: y, tenant: a, principal: b}]\n", "exactly one");
  fails("  quotas: {rules: [{scope: team}]}\n", "access.quotas.rules[0].scope");
  fails("  quotas: {rules: [{scope: key, requests_per_minute: -1}]}\n",
        "access.quotas.rules[0].requests_per_minute");
  fails("  quotas: {rules: [{scope: key, requests_per_minute: many}]}\n",
        "'access.quotas.rules[0].requests_per_minute' has the wrong type");
  fails("  quotas: {model_shares: [{tenant: a, model: m, share: 1.5}]}\n",
        "access.quotas.model_shares[0].share");
  Result<std::optional<AccessConfig>> no_policy =
      LoadAccessConfig(WriteTemp("access:\n  data_dir: d\n"));
  ASSERT_FALSE(no_policy.ok());
  EXPECT_NE(no_policy.status().message().find("access.policy_files"), std::string::npos);
}

}  // namespace
}  // namespace rampart::app
