// Decisions: the golden tables, Cedar's semantics case by case, explanations, resource
// attributes, and the engine's reload.

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "policy/policy.h"
#include "policy/policy_table.h"
#include "policy_testing.h"

namespace rampart::policy {
namespace {

std::shared_ptr<const PolicySet> Load(const std::string& text) {
  auto set = PolicySet::LoadText(text, "p.yaml");
  EXPECT_TRUE(set.ok()) << set.status().ToString();
  return set.ok() ? *set : PolicySet::Empty();
}

RequestCase Request(const std::string& text) {
  Result<RequestCase> request = ParseRequest(text);
  EXPECT_TRUE(request.ok()) << request.status().ToString();
  return request.ok() ? *request : RequestCase();
}

TEST(PolicyGoldenTest, TheGoldenTablesPass) {
  const auto mismatches =
      RunPolicyTests(std::string(RAMPART_SOURCE_DIR) + "/tests/data/policy/golden.yaml");
  ASSERT_TRUE(mismatches.ok()) << mismatches.status().ToString();
  for (const std::string& mismatch : *mismatches) ADD_FAILURE() << mismatch;
}

TEST(PolicyGoldenTest, AMismatchIsReportedWithItsCase) {
  testing::TempDir dir;
  dir.Write("p.yaml",
            "rules:\n  - id: r1\n    effect: permit\n    action: model:infer\n"
            "    obligations: [audit:full]\n");
  const std::string table = dir.Write("t.yaml", R"(policies: [p.yaml]
cases:
  - name: right
    principal: {tenant: a, name: b}
    action: model:infer
    resource: {type: model, name: m}
    expect: allow
    rules: [r1]
    obligations: [audit:full]
  - name: wrong decision
    principal: {tenant: a, name: b}
    action: model:read
    resource: {type: model, name: m}
    expect: allow
  - name: wrong obligations
    principal: {tenant: a, name: b}
    action: model:infer
    resource: {type: model, name: m}
    expect: allow
    obligations: []
)");
  const auto mismatches = RunPolicyTests(table);
  ASSERT_TRUE(mismatches.ok()) << mismatches.status().ToString();
  ASSERT_EQ(mismatches->size(), 2u);
  EXPECT_EQ((*mismatches)[0], table +
                                  ":10: case 'wrong decision': expected allow, got deny (no "
                                  "rule permits model:read on model 'm')");
  EXPECT_EQ((*mismatches)[1],
            table + ":15: case 'wrong obligations': expected obligations [], got [audit:full]");

  const std::string invalid = dir.Write("bad.yaml",
                                        "policies: [p.yaml]\ncases:\n  - name: x\n"
                                        "    principal: {tenant: a}\n"
                                        "    action: model:infer\n"
                                        "    resource: {type: model, name: m}\n"
                                        "    expect: maybe\n");
  EXPECT_EQ(RunPolicyTests(invalid).status().message(),
            invalid + ":7: a case needs 'expect: allow' or 'expect: deny'");
  const std::string broken_policy = dir.Write("q.yaml", "rules: [{id: x}]\n");
  const std::string uses_broken = dir.Write("t2.yaml", "policies: [q.yaml]\ncases: []\n");
  EXPECT_EQ(RunPolicyTests(uses_broken).status().message(),
            dir.path() + "/q.yaml:1: rule 'x' needs an 'effect'");
}

TEST(PolicyDecisionTest, TheEmptySetDeniesByDefault) {
  const RequestCase request = Request(
      "{principal: {tenant: a, name: b}, action: model:infer, "
      "resource: {type: model, name: simple}}");
  const Decision decision = PolicySet::Empty()->Decide(request.View());
  EXPECT_FALSE(decision.allowed);
  EXPECT_TRUE(decision.rules.empty());
  EXPECT_EQ(decision.reason, "no rule permits model:infer on model 'simple'");
}

TEST(PolicyDecisionTest, AnyMatchingForbidDenies) {
  const auto set = Load(R"(rules:
  - {id: everyone, effect: permit, action: "*", obligations: [audit:full]}
  - {id: no-gpt, effect: forbid, action: "chat:*", resource: {type: model, name: "gpt-*"}}
  - {id: no-bob, effect: forbid, action: chat:create, principal: {name: bob}}
)");
  const RequestCase alice = Request(
      "{principal: {tenant: t, name: alice}, action: chat:create,"
      " resource: {type: model, name: gpt-4o}}");
  Decision decision = set->Decide(alice.View());
  EXPECT_FALSE(decision.allowed);
  EXPECT_EQ(decision.rules, std::vector<std::string>{"no-gpt"});
  EXPECT_TRUE(decision.obligations.empty());
  EXPECT_EQ(decision.reason, "denied by rule 'no-gpt'");

  const RequestCase bob = Request(
      "{principal: {tenant: t, name: bob}, action: chat:create,"
      " resource: {type: model, name: gpt-4o}}");
  decision = set->Decide(bob.View());
  EXPECT_EQ(decision.rules, (std::vector<std::string>{"no-bob", "no-gpt"}));

  const RequestCase llama = Request(
      "{principal: {tenant: t, name: alice}, action: chat:create,"
      " resource: {type: model, name: llama}}");
  decision = set->Decide(llama.View());
  EXPECT_TRUE(decision.allowed);
  EXPECT_EQ(decision.rules, std::vector<std::string>{"everyone"});
  EXPECT_EQ(decision.obligations, std::vector<std::string>{"audit:full"});
  EXPECT_TRUE(decision.reason.empty());
}

TEST(PolicyDecisionTest, ErrorsNeverGrantAndForbidsFailClosed) {
  const auto set = Load(R"(rules:
  - id: research
    effect: permit
    action: model:infer
    when: ['principal.department == "research"']
  - id: eu-only
    effect: forbid
    action: model:infer
    when: ['principal.region != "eu"']
)");
  // department missing: the permit errs, so it does not apply; region missing: the forbid errs,
  // so it denies.
  const RequestCase nothing = Request(
      "{principal: {tenant: t, name: a}, action: model:infer, "
      "resource: {type: model, name: m}}");
  Decision decision = set->Decide(nothing.View());
  EXPECT_FALSE(decision.allowed);
  EXPECT_EQ(decision.rules, std::vector<std::string>{"eu-only"});

  const RequestCase eu = Request(
      "{principal: {tenant: t, name: a, attributes: {region: eu}}, action: model:infer, "
      "resource: {type: model, name: m}}");
  decision = set->Decide(eu.View());
  EXPECT_FALSE(decision.allowed);
  EXPECT_TRUE(decision.rules.empty());  // denied by default: the permit's error grants nothing

  const RequestCase research = Request(
      "{principal: {tenant: t, name: a, attributes: {region: eu, department: research}}, "
      "action: model:infer, resource: {type: model, name: m}}");
  EXPECT_TRUE(set->Decide(research.View()).allowed);
}

TEST(PolicyDecisionTest, AFalseConditionOutweighsAnErrorWhateverTheirOrder) {
  const auto set = Load(R"(rules:
  - {id: all, effect: permit, action: "*"}
  - id: error-then-false
    effect: forbid
    action: model:infer
    when: ['principal.missing == "x"', 'principal.name == "nobody"']
  - id: false-then-error
    effect: forbid
    action: model:read
    when: ['principal.name == "nobody"', 'principal.missing == "x"']
)");
  for (const char* action : {"model:infer", "model:read"}) {
    const RequestCase request = Request(std::string("{principal: {tenant: t, name: a}, action: ") +
                                        action + ", resource: {type: model, name: m}}");
    EXPECT_TRUE(set->Decide(request.View()).allowed) << action;
  }
}

TEST(PolicyDecisionTest, ResourceAttributesFromTheMostSpecificEntryThenTheRequest) {
  const auto set = Load(R"(resources:
  - {type: model, name: "*", attributes: {classification: PUBLIC, team: core}}
  - {type: model, name: "gpt-*", attributes: {classification: CONFIDENTIAL}}
  - {type: model, name: gpt-4o-secret, attributes: {classification: SECRET}}
  - {type: route, name: "*", attributes: {classification: SECRET}}
rules:
  - id: up-to-confidential
    effect: permit
    action: model:infer
    when: ['resource.classification <= "CONFIDENTIAL"', 'resource.team == "core"']
  - id: owner
    effect: permit
    action: model:read
    when: ['resource.owner == principal.name']
)");
  const auto decide = [&](const std::string& model) {
    const RequestCase request = Request(
        "{principal: {tenant: t, name: a}, action: model:infer,"
        " resource: {type: model, name: " +
        model + "}}");
    return set->Decide(request.View()).allowed;
  };
  EXPECT_TRUE(decide("simple"));
  EXPECT_TRUE(decide("gpt-4o"));
  EXPECT_FALSE(decide("gpt-4o-secret"));
  // The files do not say who owns a model; the request does.
  const RequestCase owned = Request(
      "{principal: {tenant: t, name: a}, action: model:read,"
      " resource: {type: model, name: m, attributes: {owner: a}}}");
  EXPECT_TRUE(set->Decide(owned.View()).allowed);
  // The files' classification wins over the request's own.
  const RequestCase claimed = Request(
      "{principal: {tenant: t, name: a}, action: model:infer,"
      " resource: {type: model, name: gpt-4o-secret, attributes: {classification: "
      "PUBLIC}}}");
  EXPECT_FALSE(set->Decide(claimed.View()).allowed);
}

TEST(PolicyDecisionTest, RolesInheritPerTenant) {
  const auto set = Load(R"(roles:
  - name: viewer
  - name: analyst
    inherits: [viewer]
  - name: lead
    tenant: acme
    inherits: [analyst]
  - name: lead
    tenant: globex
    inherits: [viewer]
rules:
  - {id: read, effect: permit, action: model:read, principal: {role: viewer}}
  - {id: infer, effect: permit, action: model:infer, principal: {role: analyst}}
  - id: roles-condition
    effect: permit
    action: model:load
    when: ['"analyst" in principal.roles']
)");
  const auto allowed = [&](const std::string& tenant, const std::string& action) {
    const RequestCase request =
        Request("{principal: {tenant: " + tenant + ", name: a, roles: [lead]}, action: " + action +
                ", resource: {type: model, name: m}}");
    return set->Decide(request.View()).allowed;
  };
  EXPECT_TRUE(allowed("acme", "model:read"));
  EXPECT_TRUE(allowed("acme", "model:infer"));
  EXPECT_TRUE(allowed("acme", "model:load"));
  EXPECT_TRUE(allowed("globex", "model:read"));
  EXPECT_FALSE(allowed("globex", "model:infer"));
  EXPECT_FALSE(allowed("globex", "model:load"));
  EXPECT_FALSE(allowed("initech", "model:read"));  // no lead role there: it implies nothing
}

// Holds answers "does a caller granted these roles hold that one" with the same inheritance.
TEST(PolicyDecisionTest, HoldsFollowsInheritancePerTenant) {
  const auto set = Load(R"(roles:
  - name: viewer
  - name: analyst
    inherits: [viewer]
  - name: lead
    tenant: acme
    inherits: [analyst]
rules:
  - {id: read, effect: permit, action: model:read, principal: {role: viewer}}
)");
  const std::vector<std::string> lead{"lead"};
  EXPECT_TRUE(set->Holds("acme", lead, "lead"));
  EXPECT_TRUE(set->Holds("acme", lead, "analyst"));
  EXPECT_TRUE(set->Holds("acme", lead, "viewer"));
  EXPECT_FALSE(set->Holds("globex", lead, "analyst"));  // lead implies nothing there
  EXPECT_FALSE(set->Holds("acme", {"viewer"}, "analyst"));
  EXPECT_FALSE(set->Holds("acme", lead, "admin"));           // never named by the policy
  EXPECT_TRUE(set->Holds("acme", {"x", "admin"}, "admin"));  // ... but granted as itself
  EXPECT_FALSE(set->Holds("acme", {}, "viewer"));
  EXPECT_FALSE(PolicySet::Empty()->Holds("acme", {"viewer"}, "analyst"));
}

TEST(PolicyDecisionTest, ExplainListsMatchedUnmatchedAndErroringRules) {
  const auto set = Load(R"(rules:
  - id: analysts
    effect: permit
    principal: {role: analyst}
    action: model:infer
  - id: research
    effect: permit
    action: model:infer
    resource: {name: ["simple", "text-*"]}
    when: ['principal.department == "research"']
    obligations: [audit:full]
  - id: clearance
    effect: forbid
    action: "model:*"
    when: ['principal.clearance < "SECRET"']
  - id: other-action
    effect: permit
    action: model:load
)");
  const RequestCase request = Request(
      "{principal: {tenant: t, name: a, roles: [viewer], attributes: {department: research}},"
      " action: model:infer, resource: {type: model, name: simple}}");
  const Explanation explanation = set->Explain(request.View());
  EXPECT_FALSE(explanation.decision.allowed);
  EXPECT_EQ(explanation.decision.rules, std::vector<std::string>{"clearance"});
  ASSERT_EQ(explanation.matched.size(), 1u);
  EXPECT_EQ(explanation.matched[0].id, "research");
  EXPECT_EQ(explanation.matched[0].where, "p.yaml:6");
  ASSERT_EQ(explanation.unmatched.size(), 1u);
  EXPECT_EQ(explanation.unmatched[0].id, "analysts");
  EXPECT_EQ(explanation.unmatched[0].detail,
            "principal holds none of the roles [analyst] (granted: [viewer])");
  ASSERT_EQ(explanation.erroring.size(), 1u);
  EXPECT_EQ(explanation.erroring[0].id, "clearance");
  EXPECT_EQ(explanation.erroring[0].effect, "forbid");
  EXPECT_EQ(explanation.erroring[0].detail,
            "condition 'principal.clearance < \"SECRET\"': principal.clearance is missing");
  EXPECT_EQ(FormatExplanation(explanation),
            "decision: deny\n"
            "reason: denied by rule 'clearance'\n"
            "rules: clearance\n"
            "matched:\n"
            "  permit research (p.yaml:6)\n"
            "unmatched:\n"
            "  permit analysts (p.yaml:2): principal holds none of the roles [analyst] (granted: "
            "[viewer])\n"
            "erroring:\n"
            "  forbid clearance (p.yaml:12): condition 'principal.clearance < \"SECRET\"': "
            "principal.clearance is missing\n");

  const RequestCase other = Request(
      "{principal: {tenant: t, name: a, attributes: {department: research, clearance: SECRET}},"
      " action: model:infer, resource: {type: model, name: big}}");
  const Explanation denied = set->Explain(other.View());
  EXPECT_FALSE(denied.decision.allowed);
  ASSERT_EQ(denied.unmatched.size(), 3u);  // by rule order: forbids first, then ids
  EXPECT_EQ(denied.unmatched[0].detail, "condition 'principal.clearance < \"SECRET\"' is false");
  EXPECT_EQ(denied.unmatched[2].detail, "resource name 'big' matches none of [simple, text-*]");
}

TEST(PolicyDecisionTest, RequestsAreReadFromYamlOrJson) {
  Result<RequestCase> json = ReadRequest(
      R"({"principal": {"tenant": "acme", "name": "alice", "roles": ["b", "a"],
          "method": "jwt", "attributes": {"groups": ["x", "y"]}},
          "action": "model:infer", "resource": {"type": "model", "name": "simple"},
          "context": {"source_ip": "10.0.0.1", "time": "1970-01-01T00:01:00Z",
                      "attributes": {"ticket": "T-1"}}})");
  ASSERT_TRUE(json.ok()) << json.status().ToString();
  EXPECT_EQ(json->principal.roles, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(json->principal.method, identity::Method::kJwt);
  EXPECT_EQ(json->principal.attributes.at("groups"), "x,y");
  EXPECT_EQ(json->now_unix, 60);
  EXPECT_EQ(json->context.at("ticket"), "T-1");
  EXPECT_EQ(ReadRequest("{principal: {tenant: a}, action: x, resource: {type: model}, "
                        "expect: allow}")
                .status()
                .message(),
            "<request>:1: unknown key 'expect' in a request (known: name, principal, action, "
            "resource, context)");
  EXPECT_EQ(ReadRequest("/nonexistent/request.yaml").status().message(),
            "/nonexistent/request.yaml: cannot open the request file");
}

TEST(PolicyEngineTest, ReloadKeepsTheOldSetWhenTheNewOneIsInvalid) {
  testing::TempDir dir;
  const std::string path = dir.Write("p.yaml",
                                     "rules:\n  - {id: a, effect: permit, action: "
                                     "model:infer}\n");
  auto engine = PolicyEngine::Open({path});
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  const RequestCase request = Request(
      "{principal: {tenant: t, name: a}, action: model:infer,"
      " resource: {type: model, name: m}}");
  const std::shared_ptr<const PolicySet> first = (*engine)->Current();
  EXPECT_TRUE(first->Decide(request.View()).allowed);

  dir.Write("p.yaml",
            "rules:\n  - {id: a, effect: forbid, action: model:infer}\n"
            "  - {id: b, effect: maybe, action: model:infer}\n");
  const Status failed = (*engine)->Reload();
  EXPECT_EQ(failed.message(), path + ":3: unknown effect 'maybe' (permit or forbid)");
  EXPECT_EQ((*engine)->Current(), first);  // the same set, not half of the new one
  EXPECT_TRUE((*engine)->Current()->Decide(request.View()).allowed);

  dir.Write("p.yaml", "rules:\n  - {id: a, effect: forbid, action: model:infer}\n");
  ASSERT_TRUE((*engine)->Reload().ok());
  EXPECT_FALSE((*engine)->Current()->Decide(request.View()).allowed);
  EXPECT_TRUE(first->Decide(request.View()).allowed);  // a set held by a caller stays valid

  EXPECT_FALSE(PolicyEngine::Open({dir.path() + "/absent.yaml"}).ok());
}

TEST(PolicyEngineTest, DecisionsRunWhileTheSetIsReloaded) {
  testing::TempDir dir;
  const std::string permit = "rules:\n  - {id: a, effect: permit, action: model:infer}\n";
  const std::string forbid = "rules:\n  - {id: a, effect: forbid, action: model:infer}\n";
  const std::string path = dir.Write("p.yaml", permit);
  auto engine = PolicyEngine::Open({path});
  ASSERT_TRUE(engine.ok());
  const RequestCase request = Request(
      "{principal: {tenant: t, name: a}, action: model:infer,"
      " resource: {type: model, name: m}}");
  std::atomic<bool> stop{false};
  std::atomic<int> decisions{0};
  std::thread reader([&] {
    while (!stop.load()) {
      const Decision decision = (*engine)->Current()->Decide(request.View());
      // Either whole set's answer, never anything else.
      EXPECT_EQ(decision.rules, std::vector<std::string>{"a"});
      decisions.fetch_add(1);
    }
  });
  for (int i = 0; i < 50; ++i) {
    dir.Write("p.yaml", i % 2 == 0 ? forbid : permit);
    ASSERT_TRUE((*engine)->Reload().ok());
  }
  while (decisions.load() == 0) std::this_thread::yield();  // the reader decided at least once
  stop.store(true);
  reader.join();
}

}  // namespace
}  // namespace rampart::policy
