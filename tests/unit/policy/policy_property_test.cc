// Properties over generated rule sets and requests (seeded, so a failure reproduces):
//   - the empty set denies everything;
//   - decisions equal those of a naive scan of every rule (the index never loses a candidate);
//   - adding a forbid never grants; adding a permit never revokes;
//   - shuffling the rules and splitting them across files changes nothing;
//   - a permit whose condition errs never grants; a forbid whose condition errs denies whenever
//     its scope matches.

#include <fnmatch.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "policy/condition.h"
#include "policy/policy.h"
#include "policy/policy_table.h"
#include "policy_testing.h"

namespace rampart::policy {
namespace {

// The roles every generated set declares: admin > analyst > viewer.
constexpr const char* kRoles = R"(roles:
  - name: viewer
  - name: analyst
    inherits: [viewer]
  - name: admin
    inherits: [analyst]
resources:
  - {type: model, name: "*", attributes: {classification: INTERNAL}}
  - {type: model, name: "gpt-*", attributes: {classification: CONFIDENTIAL}}
)";
const std::map<std::string, std::set<std::string>> kImplied = {
    {"viewer", {"viewer"}},
    {"analyst", {"analyst", "viewer"}},
    {"admin", {"admin", "analyst", "viewer"}},
    {"auditor", {"auditor"}}};

const std::vector<std::string> kTenants = {"acme", "globex", "initech"};
const std::vector<std::string> kNames = {"alice", "bob", "carol"};
const std::vector<std::string> kRoleNames = {"viewer", "analyst", "admin", "auditor"};
const std::vector<std::string> kActions = {"model:infer",     "model:read",        "model:load",
                                           "chat:create",     "embeddings:create", "admin:reload",
                                           "admin:keys:write"};
const std::vector<std::string> kActionPatterns = {
    "model:infer", "model:read", "chat:create", "admin:reload", "model:*",
    "chat:*",      "*",          "admin:*",     "*:read"};
const std::vector<std::string> kTypes = {"model", "route", "server"};
const std::vector<std::string> kModels = {"simple", "gpt-4o", "text-embed", "llama-3"};
const std::vector<std::string> kModelPatterns = {"simple", "gpt-*", "*-embed", "llama-?"};
const std::vector<std::string> kConditions = {
    R"(principal.department == "research")",
    "resource.classification <= principal.clearance",
    R"(context.source_ip in ["10.0.0.0/8", "::1"])",
    R"(not context.time within "Mon-Fri 09:00-18:00 Europe/Berlin")",
    "has principal.department",
    R"("ml" in principal.groups)",
    "principal.level >= 3",
    R"(not principal.region == "eu")",
};
const std::vector<std::string> kObligations = {"redact:pii", "local_only", "audit:full"};

struct GeneratedRule {
  std::string id;
  bool forbid = false;
  std::vector<std::string> tenants, roles, names, actions, resource_names, when, obligations;
  std::string type;

  std::string Yaml() const {
    std::string text =
        fmt::format("  - id: {}\n    effect: {}\n", id, forbid ? "forbid" : "permit");
    const auto list = [](const std::vector<std::string>& items) {
      std::vector<std::string> quoted;
      for (const std::string& item : items) quoted.push_back(fmt::format("'{}'", item));
      return fmt::format("[{}]", fmt::join(quoted, ", "));
    };
    if (!tenants.empty() || !roles.empty() || !names.empty()) {
      text += "    principal:\n";
      if (!tenants.empty()) text += "      tenant: " + list(tenants) + "\n";
      if (!roles.empty()) text += "      role: " + list(roles) + "\n";
      if (!names.empty()) text += "      name: " + list(names) + "\n";
    }
    text += "    action: " + list(actions) + "\n";
    if (!type.empty() || !resource_names.empty()) {
      text += "    resource:\n";
      if (!type.empty()) text += "      type: " + type + "\n";
      if (!resource_names.empty()) text += "      name: " + list(resource_names) + "\n";
    }
    if (!when.empty()) text += "    when: " + list(when) + "\n";
    if (!obligations.empty()) text += "    obligations: " + list(obligations) + "\n";
    return text;
  }
};

std::string Yaml(const std::vector<GeneratedRule>& rules, bool with_roles = true) {
  std::string text = with_roles ? kRoles : "";
  text += "rules:\n";
  for (const GeneratedRule& rule : rules) text += rule.Yaml();
  if (rules.empty()) text += "  []\n";
  return text;
}

class Generator {
 public:
  explicit Generator(uint32_t seed) : random_(seed) {}

  bool Chance(double p) { return std::bernoulli_distribution(p)(random_); }
  template <typename T>
  const T& Pick(const std::vector<T>& items) {
    return items[std::uniform_int_distribution<size_t>(0, items.size() - 1)(random_)];
  }
  std::vector<std::string> Some(const std::vector<std::string>& items, size_t most) {
    std::set<std::string> chosen;
    const size_t count = std::uniform_int_distribution<size_t>(1, most)(random_);
    while (chosen.size() < count) chosen.insert(Pick(items));
    return {chosen.begin(), chosen.end()};
  }

  GeneratedRule Rule(const std::string& id, std::optional<bool> forbid = std::nullopt) {
    GeneratedRule rule;
    rule.id = id;
    rule.forbid = forbid.value_or(Chance(0.3));
    if (Chance(0.5)) rule.tenants = Some(kTenants, 2);
    if (Chance(0.5)) rule.roles = Some(kRoleNames, 2);
    if (Chance(0.15)) rule.names = Some(kNames, 1);
    rule.actions = Some(kActionPatterns, 2);
    if (Chance(0.6)) rule.type = Pick(kTypes);
    if (Chance(0.4)) rule.resource_names = Some(kModelPatterns, 2);
    const size_t conditions = std::uniform_int_distribution<size_t>(0, 2)(random_);
    for (size_t i = 0; i < conditions; ++i) rule.when.push_back(Pick(kConditions));
    if (!rule.forbid && Chance(0.3)) rule.obligations = Some(kObligations, 2);
    return rule;
  }

  std::vector<GeneratedRule> Rules(size_t most, const std::string& prefix = "r") {
    std::vector<GeneratedRule> rules;
    const size_t count = std::uniform_int_distribution<size_t>(0, most)(random_);
    for (size_t i = 0; i < count; ++i) rules.push_back(Rule(prefix + std::to_string(i)));
    return rules;
  }

  RequestCase Request() {
    RequestCase request;
    request.principal.tenant = Pick(kTenants);
    request.principal.principal = Pick(kNames);
    if (Chance(0.8)) request.principal.roles = Some(kRoleNames, 2);
    auto& attributes = request.principal.attributes;
    if (Chance(0.7)) attributes["department"] = Chance(0.5) ? "research" : "sales";
    if (Chance(0.7)) attributes["clearance"] = Chance(0.5) ? "SECRET" : "INTERNAL";
    if (Chance(0.6)) attributes["groups"] = Chance(0.5) ? "ops,ml" : "ops";
    if (Chance(0.6))
      attributes["level"] = std::to_string(std::uniform_int_distribution<>(1, 5)(random_));
    if (Chance(0.5)) attributes["region"] = Chance(0.5) ? "eu" : "us";
    request.action = Pick(kActions);
    request.resource_type = Pick(kTypes);
    request.resource_name = Pick(kModels);
    if (Chance(0.8)) request.source_ip = Chance(0.5) ? "10.1.2.3" : "203.0.113.9";
    // Some instant in the first week of December 2026 (Tuesday 1st to Monday 7th).
    request.now_unix = 1796083200 + std::uniform_int_distribution<int64_t>(0, 7 * 86400)(random_);
    return request;
  }

 private:
  std::mt19937 random_;
};

// Facts for the oracle: the generated sets' resources and roles, written out by hand.
class OracleFacts final : public Facts {
 public:
  explicit OracleFacts(const AccessRequest& request) : request_(request) {
    classification_ = request.resource.type == "model" && request.resource.name.starts_with("gpt-")
                          ? "CONFIDENTIAL"
                          : "INTERNAL";
  }
  const AccessRequest& request() const override { return request_; }
  int64_t now_unix() const override { return request_.now_unix; }
  bool HasRole(std::string_view role) const override {
    for (const std::string& granted : request_.principal->roles) {
      const auto implied = kImplied.find(granted);
      if (implied != kImplied.end() && implied->second.count(std::string(role)) > 0) return true;
    }
    return false;
  }
  const std::string* ResourceAttribute(const std::string& name) const override {
    if (request_.resource.type != "model" || name != "classification") return nullptr;
    return &classification_;
  }

 private:
  const AccessRequest& request_;
  std::string classification_;
};

bool GlobMatches(const std::string& pattern, std::string_view name) {
  return fnmatch(pattern.c_str(), std::string(name).c_str(), 0) == 0;
}

// Whether the rule's scope and principal parts match (conditions aside), by a plain reading.
bool ScopeMatches(const GeneratedRule& rule, const AccessRequest& request,
                  const OracleFacts& facts) {
  const auto any_of = [](const std::vector<std::string>& items, auto&& match) {
    return items.empty() || std::any_of(items.begin(), items.end(), match);
  };
  return any_of(rule.tenants,
                [&](const std::string& t) { return t == request.principal->tenant; }) &&
         any_of(rule.roles, [&](const std::string& r) { return facts.HasRole(r); }) &&
         any_of(rule.names,
                [&](const std::string& n) { return n == request.principal->principal; }) &&
         std::any_of(rule.actions.begin(), rule.actions.end(),
                     [&](const std::string& a) { return GlobMatches(a, request.action); }) &&
         (rule.type.empty() || rule.type == request.resource.type) &&
         any_of(rule.resource_names,
                [&](const std::string& n) { return GlobMatches(n, request.resource.name); });
}

// The decision by scanning every rule: no index, conditions evaluated one by one.
Decision Oracle(const std::vector<GeneratedRule>& rules, const AccessRequest& request) {
  const OracleFacts facts(request);
  Decision forbidden, permitted;
  for (const GeneratedRule& rule : rules) {
    if (!ScopeMatches(rule, request, facts)) continue;
    bool any_false = false, any_error = false;
    for (const std::string& text : rule.when) {
      const Truth truth = Condition::Parse(text)->Evaluate(facts);
      any_false |= truth == Truth::kFalse;
      any_error |= truth == Truth::kError;
    }
    if (any_false) continue;
    if (rule.forbid) {
      forbidden.rules.push_back(rule.id);
    } else if (!any_error) {
      permitted.rules.push_back(rule.id);
      permitted.obligations.insert(permitted.obligations.end(), rule.obligations.begin(),
                                   rule.obligations.end());
    }
  }
  Decision& decision = !forbidden.rules.empty() ? forbidden : permitted;
  decision.allowed = forbidden.rules.empty() && !permitted.rules.empty();
  std::sort(decision.rules.begin(), decision.rules.end());
  std::sort(decision.obligations.begin(), decision.obligations.end());
  decision.obligations.erase(std::unique(decision.obligations.begin(), decision.obligations.end()),
                             decision.obligations.end());
  if (!decision.allowed) decision.obligations.clear();
  return decision;
}

std::shared_ptr<const PolicySet> Load(const std::vector<GeneratedRule>& rules) {
  const std::string text = Yaml(rules);
  auto set = PolicySet::LoadText(text, "generated.yaml");
  EXPECT_TRUE(set.ok()) << set.status().ToString() << "\n" << text;
  return set.ok() ? *set : PolicySet::Empty();
}

std::string Describe(const RequestCase& request) {
  return fmt::format(
      "{}/{} roles [{}] attributes [{}] {} {} '{}' from '{}' at {}", request.principal.tenant,
      request.principal.principal, fmt::join(request.principal.roles, ","),
      fmt::join(request.principal.attributes, ","), request.action, request.resource_type,
      request.resource_name, request.source_ip, request.now_unix);
}

constexpr int kSets = 150;
constexpr int kRequestsPerSet = 25;

TEST(PolicyPropertyTest, TheEmptySetDeniesEverything) {
  Generator generator(1);
  const auto loaded = PolicySet::LoadText(kRoles, "roles-only.yaml");
  ASSERT_TRUE(loaded.ok());
  for (int i = 0; i < kSets * kRequestsPerSet; ++i) {
    const RequestCase request = generator.Request();
    EXPECT_FALSE(PolicySet::Empty()->Decide(request.View()).allowed) << Describe(request);
    EXPECT_FALSE((*loaded)->Decide(request.View()).allowed) << Describe(request);
  }
}

TEST(PolicyPropertyTest, DecisionsEqualANaiveScanOfEveryRule) {
  Generator generator(2);
  int allowed = 0, forbidden = 0, total = 0;
  for (int s = 0; s < kSets; ++s) {
    const std::vector<GeneratedRule> rules = generator.Rules(40);
    const auto set = Load(rules);
    for (int r = 0; r < kRequestsPerSet; ++r) {
      const RequestCase request = generator.Request();
      const Decision got = set->Decide(request.View());
      const Decision expected = Oracle(rules, request.View());
      ++total;
      allowed += got.allowed;
      forbidden += !got.allowed && !got.rules.empty();
      ASSERT_EQ(got.allowed, expected.allowed) << Describe(request) << "\n" << Yaml(rules);
      ASSERT_EQ(got.rules, expected.rules) << Describe(request) << "\n" << Yaml(rules);
      ASSERT_EQ(got.obligations, expected.obligations) << Describe(request);
    }
  }
  // The generator exercises all three outcomes, not only default denials.
  EXPECT_GT(allowed, total / 20);
  EXPECT_GT(forbidden, total / 20);
  EXPECT_GT(total - allowed - forbidden, total / 20);
}

TEST(PolicyPropertyTest, AddingAForbidNeverGrantsAndAddingAPermitNeverRevokes) {
  Generator generator(3);
  for (int s = 0; s < kSets; ++s) {
    std::vector<GeneratedRule> rules = generator.Rules(30);
    const auto base = Load(rules);
    std::vector<GeneratedRule> with_forbid = rules;
    with_forbid.push_back(generator.Rule("added-forbid", /*forbid=*/true));
    std::vector<GeneratedRule> with_permit = rules;
    with_permit.push_back(generator.Rule("added-permit", /*forbid=*/false));
    const auto more_forbidding = Load(with_forbid);
    const auto more_permitting = Load(with_permit);
    for (int r = 0; r < kRequestsPerSet; ++r) {
      const RequestCase request = generator.Request();
      const bool before = base->Decide(request.View()).allowed;
      if (more_forbidding->Decide(request.View()).allowed) {
        EXPECT_TRUE(before) << "a forbid granted: " << Describe(request);
      }
      if (before) {
        EXPECT_TRUE(more_permitting->Decide(request.View()).allowed)
            << "a permit revoked: " << Describe(request);
      }
    }
  }
}

TEST(PolicyPropertyTest, RuleOrderAndFilesDoNotMatter) {
  Generator generator(4);
  std::mt19937 shuffle(5);
  testing::TempDir dir;
  for (int s = 0; s < kSets / 3; ++s) {
    std::vector<GeneratedRule> rules = generator.Rules(40);
    const auto original = Load(rules);
    std::shuffle(rules.begin(), rules.end(), shuffle);
    // The roles in one file, the shuffled rules split across three.
    std::vector<std::string> paths = {dir.Write("roles.yaml", kRoles)};
    for (size_t part = 0; part < 3; ++part) {
      std::vector<GeneratedRule> slice;
      for (size_t i = part; i < rules.size(); i += 3) slice.push_back(rules[i]);
      paths.push_back(dir.Write(fmt::format("rules{}.yaml", part), Yaml(slice, false)));
    }
    std::shuffle(paths.begin(), paths.end(), shuffle);
    const auto split = PolicySet::LoadFiles(paths);
    ASSERT_TRUE(split.ok()) << split.status().ToString();
    for (int r = 0; r < kRequestsPerSet; ++r) {
      const RequestCase request = generator.Request();
      const Decision a = original->Decide(request.View());
      const Decision b = (*split)->Decide(request.View());
      EXPECT_EQ(a.allowed, b.allowed) << Describe(request);
      EXPECT_EQ(a.rules, b.rules) << Describe(request);
      EXPECT_EQ(a.obligations, b.obligations) << Describe(request);
      EXPECT_EQ(a.reason, b.reason) << Describe(request);
    }
  }
}

TEST(PolicyPropertyTest, APermitWhoseConditionErrsNeverGrants) {
  Generator generator(6);
  for (int s = 0; s < kSets; ++s) {
    std::vector<GeneratedRule> rules = generator.Rules(30);
    for (GeneratedRule& rule : rules) {
      if (!rule.forbid) rule.when.push_back(R"(principal.never_set == "x")");
    }
    const auto set = Load(rules);
    for (int r = 0; r < kRequestsPerSet; ++r) {
      const RequestCase request = generator.Request();
      EXPECT_FALSE(set->Decide(request.View()).allowed) << Describe(request);
    }
  }
}

TEST(PolicyPropertyTest, AForbidWhoseConditionErrsDeniesWheneverItsScopeMatches) {
  Generator generator(7);
  int in_scope = 0;
  for (int s = 0; s < kSets; ++s) {
    std::vector<GeneratedRule> rules = generator.Rules(30);
    GeneratedRule erring = generator.Rule("erring-forbid", /*forbid=*/true);
    erring.when = {R"(principal.never_set == "x")"};
    rules.push_back(erring);
    const auto set = Load(rules);
    for (int r = 0; r < kRequestsPerSet; ++r) {
      const RequestCase request = generator.Request();
      const AccessRequest view = request.View();
      if (!ScopeMatches(erring, view, OracleFacts(view))) continue;
      ++in_scope;
      const Decision decision = set->Decide(view);
      EXPECT_FALSE(decision.allowed) << Describe(request);
      EXPECT_TRUE(std::find(decision.rules.begin(), decision.rules.end(), "erring-forbid") !=
                  decision.rules.end())
          << Describe(request);
    }
  }
  EXPECT_GT(in_scope, kSets);  // the property was exercised, not vacuously true
}

}  // namespace
}  // namespace rampart::policy
