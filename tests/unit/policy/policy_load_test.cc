// Policy files that must not load, each with the file, the line and the reason.

#include <gtest/gtest.h>

#include "policy/policy.h"
#include "policy_testing.h"

namespace rampart::policy {
namespace {

// The message of loading `text` as p.yaml, or "loaded" when it loads.
std::string LoadError(const std::string& text) {
  const auto set = PolicySet::LoadText(text, "p.yaml");
  return set.ok() ? "loaded" : set.status().message();
}

constexpr const char* kPermit = R"(rules:
  - id: r1
    effect: permit
    action: model:infer
)";

TEST(PolicyLoadTest, AValidFileLoads) {
  const auto set = PolicySet::LoadText(kPermit, "p.yaml");
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ((*set)->rule_count(), 1u);
  EXPECT_EQ(LoadError(""), "loaded");  // an empty file holds nothing, which is valid
}

TEST(PolicyLoadTest, YamlSyntaxErrorsNameTheLine) {
  EXPECT_EQ(LoadError("rules:\n  - id: r1\n    effect: [permit\n"),
            "p.yaml:4: end of sequence flow not found");
}

TEST(PolicyLoadTest, UnknownKeys) {
  EXPECT_EQ(LoadError("rulez: []\n"),
            "p.yaml:1: unknown key 'rulez' (known: roles, resources, rules)");
  EXPECT_EQ(LoadError("rules:\n  - id: r1\n    effect: permit\n    action: model:infer\n"
                      "    efect: forbid\n"),
            "p.yaml:5: unknown key 'efect' (known: id, description, effect, principal, action, "
            "resource, when, obligations)");
  EXPECT_EQ(LoadError("rules:\n  - id: r1\n    effect: permit\n    action: model:infer\n"
                      "    principal: {group: x}\n"),
            "p.yaml:5: unknown key 'group' (known: tenant, role, name)");
  EXPECT_EQ(LoadError("roles:\n  - name: a\n    parents: [b]\n"),
            "p.yaml:3: unknown key 'parents' (known: name, tenant, inherits, description)");
}

TEST(PolicyLoadTest, RuleFieldsAreChecked) {
  EXPECT_EQ(LoadError("rules:\n  - id: r1\n    effect: allow\n    action: model:infer\n"),
            "p.yaml:3: unknown effect 'allow' (permit or forbid)");
  EXPECT_EQ(LoadError("rules:\n  - effect: permit\n    action: model:infer\n"),
            "p.yaml:2: a rule needs an 'id'");
  EXPECT_EQ(LoadError("rules:\n  - id: r1\n    effect: permit\n"),
            "p.yaml:2: rule 'r1' needs an 'action' (\"*\" for every action)");
  EXPECT_EQ(LoadError("rules:\n  - id: r1\n    effect: forbid\n    action: model:infer\n"
                      "    obligations: [redact:pii]\n"),
            "p.yaml:5: rule 'r1' is a forbid: only permits carry obligations");
  EXPECT_EQ(LoadError("rules:\n  - id: r1\n    effect: permit\n    action: model:infre\n"),
            "p.yaml:4: action 'model:infre' matches no known action (docs/policy.md)");
  EXPECT_EQ(
      LoadError("rules:\n  - id: r1\n    effect: permit\n    action: model:infer\n"
                "    resource: {type: modle}\n"),
      "p.yaml:5: unknown resource type 'modle' (known: model, route, server, repository, "
      "tenant, principal, key, policy, document, role, keyring, audit, index, file, vector_store)");
  EXPECT_EQ(LoadError("rules:\n  - id: r1\n    effect: permit\n    action: \"model[0-9]\"\n"),
            "p.yaml:4: bad glob 'model[0-9]': only * and ? are wildcards ('[' is not allowed)");
  EXPECT_EQ(LoadError("rules:\n  - id: r1\n    effect: permit\n    action: model:infer\n"
                      "    resource: {name: []}\n"),
            "p.yaml:5: 'name' must not be an empty list");
}

TEST(PolicyLoadTest, DuplicateIdsInOneFile) {
  EXPECT_EQ(
      LoadError(std::string(kPermit) + "  - id: r1\n    effect: forbid\n    action: model:infer\n"),
      "p.yaml:5: duplicate rule id 'r1' (first at p.yaml:2)");
}

TEST(PolicyLoadTest, DuplicateIdsAcrossFiles) {
  testing::TempDir dir;
  const std::string a = dir.Write("a.yaml", kPermit);
  const std::string b = dir.Write("b.yaml", std::string("# b\n") + kPermit);
  const auto set = PolicySet::LoadFiles({a, b});
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().message(), b + ":3: duplicate rule id 'r1' (first at " + a + ":2)");
  const auto missing = PolicySet::LoadFiles({a, dir.path() + "/absent.yaml"});
  EXPECT_EQ(missing.status().message(), dir.path() + "/absent.yaml: cannot open the policy file");
}

TEST(PolicyLoadTest, ConditionsAreCheckedAtLoad) {
  const std::string rule =
      "rules:\n  - id: r1\n    effect: permit\n    action: model:infer\n"
      "    when:\n      - principal.department == \"research\"\n";
  EXPECT_EQ(LoadError(rule), "loaded");
  EXPECT_EQ(LoadError(rule + "      - principal.department === \"x\"\n"),
            "p.yaml:7: bad condition 'principal.department === \"x\"': unknown operator '='");
  EXPECT_EQ(LoadError(rule + "      - context.source_ip in [\"10.0.0.0/40\"]\n"),
            "p.yaml:7: bad condition 'context.source_ip in [\"10.0.0.0/40\"]': not an IP "
            "network: '10.0.0.0/40'");
  EXPECT_EQ(LoadError(rule + "      - context.time within \"Mon-Fri 09:00-18:00 Asia/Shanghia\"\n"),
            "p.yaml:7: bad condition 'context.time within \"Mon-Fri 09:00-18:00 Asia/Shanghia\"': "
            "unknown time zone 'Asia/Shanghia' in time window 'Mon-Fri 09:00-18:00 "
            "Asia/Shanghia'");
  EXPECT_EQ(LoadError(rule + "      - [a, b]\n"), "p.yaml:7: 'when' must be a single value");
}

TEST(PolicyLoadTest, RolesAreChecked) {
  EXPECT_EQ(LoadError("roles:\n  - name: analyst\n    inherits: [viewer]\n"),
            "p.yaml:2: role 'analyst' inherits unknown role 'viewer' (a role for every tenant "
            "inherits only roles for every tenant)");
  EXPECT_EQ(LoadError("roles:\n  - name: viewer\n    tenant: acme\n  - name: analyst\n"
                      "    inherits: [viewer]\n"),
            "p.yaml:4: role 'analyst' inherits unknown role 'viewer' (a role for every tenant "
            "inherits only roles for every tenant)");
  EXPECT_EQ(LoadError("roles:\n  - name: viewer\n  - name: operator\n    tenant: acme\n"
                      "    inherits: [viewer, auditor]\n"),
            "p.yaml:3: role 'operator' inherits unknown role 'auditor' (not declared for tenant "
            "'acme' nor for every tenant)");
  EXPECT_EQ(LoadError("roles:\n  - name: a\n    inherits: [b]\n  - name: b\n    inherits: [c]\n"
                      "  - name: c\n    inherits: [a]\n"),
            "p.yaml:2: role inheritance cycle: a -> b -> c -> a");
  EXPECT_EQ(LoadError("roles:\n  - name: a\n  - name: b\n    inherits: [a]\n"
                      "  - name: a\n    tenant: acme\n    inherits: [b]\n"),
            "p.yaml:5: role inheritance cycle in tenant 'acme': a -> b -> a");
  EXPECT_EQ(LoadError("roles:\n  - name: a\n  - name: a\n"),
            "p.yaml:3: role 'a' is declared twice for tenant '*' (first at p.yaml:2)");
  EXPECT_EQ(LoadError("roles:\n  - name: a\n    inherits: [a]\n"),
            "p.yaml:2: role inheritance cycle: a -> a");
}

TEST(PolicyLoadTest, ResourcesAreChecked) {
  EXPECT_EQ(LoadError("resources:\n  - type: model\n    name: \"gpt-*\"\n"
                      "    attributes: {classification: SECRET}\n"
                      "  - type: model\n    name: \"gpt-*\"\n"),
            "p.yaml:5: resource model 'gpt-*' is described twice (first at p.yaml:2)");
  EXPECT_EQ(LoadError("resources:\n  - type: model\n"),
            "p.yaml:2: a resource needs 'type' and 'name'");
  EXPECT_EQ(LoadError("resources:\n  - type: model\n    name: x\n    attributes: [a]\n"),
            "p.yaml:4: 'attributes' must be a map of names to values");
}

}  // namespace
}  // namespace rampart::policy
