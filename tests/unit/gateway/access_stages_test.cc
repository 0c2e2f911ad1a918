#include "gateway/access_stages.h"

#include <gtest/gtest.h>

#include "gateway/config.h"
#include "gateway/router.h"
#include "testing/access_fixture.h"

namespace rampart::gateway {
namespace {

GatewayConfig Config() {
  GatewayConfig config;
  config.upstreams.push_back(UpstreamConfig{.name = "cloud", .url = "http://127.0.0.1:9/v1"});
  config.targets.push_back(TargetConfig{.name = "remote", .endpoints = {{.upstream = "cloud"}}});
  config.targets.push_back(TargetConfig{.name = "local-embed", .local_model = "text_embedding"});
  RouteConfig route;
  route.name = "auto";
  route.match.models = {"auto"};
  route.target = "remote";
  route.fallbacks = {"local-embed"};
  config.routes.push_back(route);
  return config;
}

CallContext Call(std::string key, std::string model = "simple") {
  CallContext call;
  call.request_id = "req-stage-test";
  call.http.peer = std::make_shared<Peer>(Peer{.address = "10.2.3.4"});
  if (!key.empty()) call.http.headers.emplace_back("authorization", "Bearer " + key);
  call.request.model = std::move(model);
  call.request.operation = Operation::kChatCompletions;
  return call;
}

TEST(AccessStages, CredentialsComeFromTheHeadersAndThePeer) {
  net::HttpRequest request;
  request.headers = {{"authorization", "Bearer abc"}, {"api-key", "k2"}};
  request.peer = std::make_shared<Peer>(Peer{.address = "::1"});
  identity::Credentials credentials = CredentialsOf(request);
  EXPECT_EQ(credentials.authorization, "Bearer abc");
  EXPECT_EQ(credentials.api_key, "k2");
  ASSERT_NE(credentials.peer, nullptr);
  EXPECT_EQ(credentials.peer->address, "::1");
  request.headers.emplace_back("x-api-key", "k1");  // x-api-key first
  EXPECT_EQ(CredentialsOf(request).api_key, "k1");
}

TEST(AccessStages, TokensToReserveAreTheMaximumAndThePrompt) {
  OpenAiRequest request;
  request.operation = Operation::kChatCompletions;
  request.prompt_chars = 400;  // about 100 tokens
  const int64_t prompt = EstimateTokens(400);
  EXPECT_EQ(TokensToReserve(request, 1024), prompt + 1024);
  request.max_tokens = 50;
  request.n = 2;
  EXPECT_EQ(TokensToReserve(request, 1024), prompt + 100);
  request.operation = Operation::kEmbeddings;
  EXPECT_EQ(TokensToReserve(request, 1024), prompt);
}

TEST(AccessStages, EachStageRefusesWithItsAnswerHeaders) {
  testing::AccessFixture fixture;
  auto authenticate = MakeAuthenticateStage(fixture.control());
  auto authorise = MakeAuthoriseStage(fixture.control());
  auto quota = MakeQuotaStage(fixture.control());

  CallContext anonymous = Call("");
  const Status unauthenticated = authenticate->OnRequest(anonymous);
  EXPECT_EQ(unauthenticated.code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(anonymous.outcome, "unauthenticated");
  ASSERT_EQ(anonymous.refusal_headers.size(), 1u);
  EXPECT_EQ(anonymous.refusal_headers[0].first, "WWW-Authenticate");

  CallContext wrong_model = Call(fixture.analyst_key(), "gpt-4o");
  ASSERT_TRUE(authenticate->OnRequest(wrong_model).ok());
  EXPECT_EQ(wrong_model.identity.principal, "alice");
  const Status forbidden = authorise->OnRequest(wrong_model);
  EXPECT_EQ(forbidden.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(forbidden.message().find("req-stage-test"), std::string::npos) << forbidden.message();
  EXPECT_EQ(wrong_model.outcome, "forbidden");

  // One request a minute for `limited`: the second (or, across a minute's turn, the third) is
  // refused with Retry-After.
  Status limited = Status::Ok();
  for (int i = 0; i < 3 && limited.ok(); ++i) {
    CallContext call = Call(fixture.limited_key());
    ASSERT_TRUE(authenticate->OnRequest(call).ok());
    ASSERT_TRUE(authorise->OnRequest(call).ok());
    limited = quota->OnRequest(call);
    if (limited.ok()) {
      EXPECT_GT(call.reserved_tokens, 0);
      quota->OnComplete(call);  // settles
    } else {
      EXPECT_EQ(call.outcome, "rate_limited");
      ASSERT_FALSE(call.refusal_headers.empty());
      EXPECT_EQ(call.refusal_headers.back().first, "Retry-After");
    }
  }
  EXPECT_EQ(limited.code(), StatusCode::kResourceExhausted);
}

TEST(AccessStages, LocalOnlyKeepsTheLocalTargetsOrRefuses) {
  const GatewayConfig config = Config();
  ASSERT_TRUE(Validate(config).ok()) << Validate(config).ToString();
  const Router router(config);
  CallContext call = Call("", "auto");
  call.router = &router;
  call.plan.chain = {"remote", "local-embed"};
  call.decision.obligations = {"local_only"};
  ASSERT_TRUE(ApplyObligations(call).ok());
  EXPECT_EQ(call.plan.chain, std::vector<std::string>{"local-embed"});

  CallContext direct = Call("", "remote");
  direct.router = &router;
  direct.plan.chain = {"remote"};
  direct.decision.obligations = {"audit:full", "local_only"};
  const Status refused = ApplyObligations(direct);
  EXPECT_EQ(refused.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(refused.message().find("local_only"), std::string::npos) << refused.message();

  // Without obligations nothing changes.
  CallContext plain = Call("", "auto");
  plain.router = &router;
  plain.plan.chain = {"remote", "local-embed"};
  ASSERT_TRUE(ApplyObligations(plain).ok());
  EXPECT_EQ(plain.plan.chain.size(), 2u);
  EXPECT_EQ(plain.guard_policy, nullptr);
}

TEST(AccessStages, AGuardObligationWithoutAGuardFailsClosed) {
  CallContext call = Call("", "auto");
  call.decision.obligations = {"redact:pii"};
  EXPECT_EQ(ApplyObligations(call).code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace rampart::gateway
