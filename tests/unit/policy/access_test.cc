#include "policy/access.h"

#include <gtest/gtest.h>

#include "testing/access_fixture.h"

namespace rampart::policy {
namespace {

const Peer kRemote{.address = "10.9.8.7"};
const Peer kLoopback{.address = "127.0.0.1"};

identity::Credentials Key(const std::string& key, const Peer& peer = kRemote) {
  return identity::Credentials{.api_key = key, .peer = &peer};
}

const Resource kSimple{.type = "model", .name = "simple"};

TEST(AccessControl, OpenGrantsEverythingAsTheAnonymousPrincipal) {
  const std::unique_ptr<AccessControl> open = AccessControl::Open();
  EXPECT_FALSE(open->enforcing());
  AccessOutcome outcome = open->Check({}, "admin:keys:write", {.type = "key", .name = "*"}, 10);
  const auto* grant = std::get_if<AccessGrant>(&outcome);
  ASSERT_NE(grant, nullptr);
  EXPECT_EQ(grant->identity.tenant, "default");
  EXPECT_EQ(grant->identity.principal, "anonymous");
  EXPECT_TRUE(grant->decision.allowed);
  EXPECT_TRUE(grant->reservation.empty());
  EXPECT_EQ(open->policy_set(), nullptr);
  EXPECT_TRUE(open->Reload(std::nullopt).ok());
}

TEST(AccessControl, GrantsTheKeysRoleAndRefusesWhatItDoesNotPermit) {
  testing::AccessFixture fixture;
  AccessOutcome granted =
      fixture.control().Check(Key(fixture.analyst_key()), "model:infer", kSimple, 0);
  ASSERT_TRUE(std::holds_alternative<AccessGrant>(granted));
  const AccessGrant& grant = std::get<AccessGrant>(granted);
  EXPECT_EQ(grant.identity.principal, "alice");
  EXPECT_EQ(grant.decision.rules, std::vector<std::string>{"analysts-simple"});

  AccessOutcome denied = fixture.control().Check(Key(fixture.analyst_key()), "model:infer",
                                                 {.type = "model", .name = "mlp"}, 0);
  const auto* refusal = std::get_if<AccessRefusal>(&denied);
  ASSERT_NE(refusal, nullptr);
  EXPECT_EQ(refusal->kind, RefusalKind::kForbidden);
  EXPECT_EQ(refusal->http_status(), 403);
  EXPECT_EQ(refusal->ToStatus().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(refusal->message.find("model:infer"), std::string::npos) << refusal->message;
  EXPECT_TRUE(refusal->HttpHeaders().empty());
}

TEST(AccessControl, UnauthenticatedCallersGet401WithABearerChallenge) {
  testing::AccessFixture fixture;
  // The key with its last character changed (to another one: 'x' may be the last already).
  std::string wrong_secret = fixture.analyst_key();
  wrong_secret.back() = wrong_secret.back() == 'x' ? 'y' : 'x';
  for (const identity::Credentials& credentials :
       {identity::Credentials{.peer = &kRemote}, Key("rk_live_nothing_here", kRemote),
        Key(wrong_secret)}) {
    AccessOutcome outcome = fixture.control().Check(credentials, "model:infer", kSimple, 0);
    const auto* refusal = std::get_if<AccessRefusal>(&outcome);
    ASSERT_NE(refusal, nullptr);
    EXPECT_EQ(refusal->kind, RefusalKind::kUnauthenticated);
    EXPECT_EQ(refusal->http_status(), 401);
    EXPECT_EQ(refusal->ToStatus().code(), StatusCode::kUnauthenticated);
    const auto headers = refusal->HttpHeaders();
    ASSERT_EQ(headers.size(), 1u);
    EXPECT_EQ(headers[0], (std::pair<std::string, std::string>{"WWW-Authenticate", "Bearer"}));
  }
  // Without credentials from loopback: the anonymous admin.
  AccessOutcome anonymous =
      fixture.control().Check({.peer = &kLoopback}, "admin:keys:write", {.type = "key"}, 0);
  ASSERT_TRUE(std::holds_alternative<AccessGrant>(anonymous));
  EXPECT_EQ(std::get<AccessGrant>(anonymous).identity.method, identity::Method::kAnonymous);
}

TEST(AccessControl, ARateRefuses429WithRetryAfterAndABudgetSaysNotToRetry) {
  testing::AccessFixture fixture;
  AccessOutcome first =
      fixture.control().Check(Key(fixture.limited_key()), "model:infer", kSimple, 0);
  ASSERT_TRUE(std::holds_alternative<AccessGrant>(first));
  // The same minute, unless it turned between the two: then the next one is refused.
  AccessOutcome second =
      fixture.control().Check(Key(fixture.limited_key()), "model:infer", kSimple, 0);
  if (std::holds_alternative<AccessGrant>(second)) {
    second = fixture.control().Check(Key(fixture.limited_key()), "model:infer", kSimple, 0);
  }
  const auto* rate = std::get_if<AccessRefusal>(&second);
  ASSERT_NE(rate, nullptr);
  EXPECT_EQ(rate->kind, RefusalKind::kRateLimited);
  EXPECT_EQ(rate->http_status(), 429);
  EXPECT_GE(rate->retry_after_seconds, 1);
  const auto rate_headers = rate->HttpHeaders();
  ASSERT_EQ(rate_headers.size(), 1u);
  EXPECT_EQ(rate_headers[0].first, "Retry-After");

  // 100 tokens a day for tenant thrifty: 80 go, then 30 more do not.
  AccessOutcome spend =
      fixture.control().Check(Key(fixture.thrifty_key()), "chat:create", kSimple, 80);
  ASSERT_TRUE(std::holds_alternative<AccessGrant>(spend));
  std::get<AccessGrant>(spend).reservation.Settle(80);
  AccessOutcome over =
      fixture.control().Check(Key(fixture.thrifty_key()), "chat:create", kSimple, 30);
  const auto* budget = std::get_if<AccessRefusal>(&over);
  ASSERT_NE(budget, nullptr);
  EXPECT_EQ(budget->kind, RefusalKind::kBudgetExhausted);
  EXPECT_EQ(budget->ToStatus().code(), StatusCode::kResourceExhausted);
  const auto headers = budget->HttpHeaders();
  EXPECT_NE(std::find(headers.begin(), headers.end(),
                      std::pair<std::string, std::string>{"x-should-retry", "false"}),
            headers.end());
}

TEST(AccessControl, ObligationsTravelWithTheGrant) {
  testing::AccessFixture fixture;
  AccessOutcome outcome = fixture.control().Check(Key(fixture.gdpr_key()), "chat:create",
                                                  {.type = "model", .name = "gpt-4o"}, 10);
  ASSERT_TRUE(std::holds_alternative<AccessGrant>(outcome));
  const AccessGrant& grant = std::get<AccessGrant>(outcome);
  EXPECT_TRUE(grant.HasObligation(kObligationLocalOnly));
  EXPECT_TRUE(grant.HasObligation(kObligationRedactPii));
  EXPECT_TRUE(grant.HasObligation(kObligationAuditFull));
  EXPECT_FALSE(grant.HasObligation(kObligationBlockSecret));
}

TEST(AccessControl, TheStepsApartDecideAsCheckDoes) {
  testing::AccessFixture fixture;
  Result<identity::Identity> identity = fixture.control().Authenticate(Key(fixture.viewer_key()));
  ASSERT_TRUE(identity.ok());
  EXPECT_TRUE(fixture.control().Authorise(*identity, "model:read", kSimple, "10.9.8.7").allowed);
  EXPECT_FALSE(fixture.control().Authorise(*identity, "model:infer", kSimple, "10.9.8.7").allowed);
  EXPECT_TRUE(fixture.control().Admit(*identity, 0).admitted());
}

TEST(AccessControl, AReloadKeepsTheOldPoliciesWhenTheNewOnesAreInvalid) {
  testing::AccessFixture fixture;
  const size_t rules = fixture.control().policy_set()->rule_count();
  fixture.WritePolicy("rules:\n  - id: broken\n    effect: perhaps\n");
  const Status reloaded = fixture.control().Reload(testing::AccessFixture::QuotaRules());
  EXPECT_EQ(reloaded.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(reloaded.message().find("policy files"), std::string::npos) << reloaded.message();
  EXPECT_EQ(fixture.control().policy_set()->rule_count(), rules);
  EXPECT_TRUE(std::holds_alternative<AccessGrant>(
      fixture.control().Check(Key(fixture.analyst_key()), "model:infer", kSimple, 0)));

  // A valid set replaces it: now nobody may infer.
  fixture.WritePolicy("rules:\n  - id: read-only\n    effect: permit\n    action: model:read\n");
  ASSERT_TRUE(fixture.control().Reload(std::nullopt).ok());
  EXPECT_TRUE(std::holds_alternative<AccessRefusal>(
      fixture.control().Check(Key(fixture.analyst_key()), "model:infer", kSimple, 0)));
}

}  // namespace
}  // namespace rampart::policy
