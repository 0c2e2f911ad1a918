#include "gateway/router.h"

#include <gtest/gtest.h>

#include "gateway/config.h"

namespace rampart::gateway {
namespace {

GatewayConfig Config() {
  GatewayConfig config;
  config.upstreams.push_back({.name = "u", .url = "http://127.0.0.1:9/v1"});
  for (std::string name : {"fin-70b", "gpt-4o", "general", "candidate"}) {
    config.targets.push_back({.name = name, .endpoints = {{.upstream = "u"}}});
  }
  RouteConfig finance{.name = "finance", .target = "fin-70b", .fallbacks = {"gpt-4o"}};
  finance.match.models = {"auto"};
  finance.match.keywords = {"Invoice", "报销"};
  config.routes.push_back(finance);
  RouteConfig intent{.name = "intent", .target = "fin-70b", .fallbacks = {"general", "gpt-4o"}};
  intent.match.headers = {{"x-intent", "financial-compliance"}};
  config.routes.push_back(intent);
  RouteConfig code{.name = "code", .target = "general"};
  code.match.models = {"auto"};
  code.match.pattern = R"(\bdef\s+\w+\()";
  config.routes.push_back(code);
  RouteConfig fallback_all{.name = "auto", .target = "general", .fallbacks = {"gpt-4o"}};
  fallback_all.match.models = {"auto"};
  config.routes.push_back(fallback_all);
  return config;
}

OpenAiRequest Request(std::string model, std::string text) {
  OpenAiRequest request;
  request.model = std::move(model);
  request.routed_text = std::move(text);
  return request;
}

TEST(RouterTest, FirstMatchingRuleWins) {
  const GatewayConfig config = Config();
  ASSERT_TRUE(Validate(config).ok()) << Validate(config).ToString();
  Router router(config);
  net::HttpRequest http;

  auto finance = router.Resolve(Request("auto", "Please check this INVOICE"), http);
  ASSERT_TRUE(finance.ok());
  EXPECT_EQ(finance->route, "finance");
  EXPECT_EQ(finance->chain, (std::vector<std::string>{"fin-70b", "gpt-4o"}));

  auto chinese = router.Resolve(Request("auto", "差旅报销单"), http);
  EXPECT_EQ(chinese->route, "finance");

  auto code = router.Resolve(Request("auto", "fix: def parse(x):"), http);
  EXPECT_EQ(code->route, "code");
  EXPECT_EQ(code->chain, (std::vector<std::string>{"general"}));

  auto other = router.Resolve(Request("auto", "hello"), http);
  EXPECT_EQ(other->route, "auto");

  http.headers.emplace_back("x-intent", "financial-compliance");
  auto header = router.Resolve(Request("gpt-4o", "hello"), http);
  EXPECT_EQ(header->route, "intent");
  EXPECT_EQ(header->chain, (std::vector<std::string>{"fin-70b", "general", "gpt-4o"}));
}

TEST(RouterTest, NamesATargetDirectlyOrNotAtAll) {
  Router router(Config());
  net::HttpRequest http;
  auto direct = router.Resolve(Request("gpt-4o", "x"), http);
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(direct->route, "direct");
  EXPECT_EQ(direct->chain, (std::vector<std::string>{"gpt-4o"}));
  auto unknown = router.Resolve(Request("gpt-5", "x"), http);
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  const auto names = router.ModelNames();
  EXPECT_EQ(names, (std::vector<std::string>{"fin-70b", "gpt-4o", "general", "candidate", "auto"}));
}

TEST(RouterTest, CanarySplitsAndRollsBack) {
  GatewayConfig config = Config();
  config.routes[0].canary =
      CanaryConfig{.target = "candidate", .stages_percent = {20, 100}, .min_requests = 10};
  ASSERT_TRUE(Validate(config).ok());
  Router router(config);
  net::HttpRequest http;
  int candidate = 0;
  for (int i = 0; i < 50; ++i) {
    auto plan = router.Resolve(Request("auto", "invoice"), http);
    ASSERT_TRUE(plan.ok());
    ASSERT_NE(plan->canary, nullptr);
    if (plan->canary_arm == 1) {
      ++candidate;
      EXPECT_EQ(plan->chain.front(), "candidate");
      plan->canary->Record(1, /*success=*/false, 1000);
    } else {
      plan->canary->Record(0, true, 1000);
    }
  }
  EXPECT_EQ(candidate, 1);  // one in five at 20%; its failure rolled the canary back
  const auto states = router.CanaryStates();
  ASSERT_EQ(states.size(), 1u);
  EXPECT_EQ(states[0].second.state, serve::CanaryState::kRolledBack);
  EXPECT_EQ(states[0].second.last_decision.rfind("rolled back: candidate error rate", 0), 0u);
}

TEST(ConfigTest, ValidateNamesWhatIsWrong) {
  const auto fails = [](GatewayConfig config, std::string_view expected) {
    const Status status = Validate(config);
    EXPECT_FALSE(status.ok()) << expected;
    EXPECT_NE(status.message().find(expected), std::string::npos) << status.message();
  };
  GatewayConfig config = Config();
  config.routes[0].target = "nope";
  fails(config, "route 'finance': no model named 'nope'");
  config = Config();
  config.routes[1].fallbacks = {"missing"};
  fails(config, "fallback: no model named 'missing'");
  config = Config();
  config.targets[0].endpoints[0].upstream = "ghost";
  fails(config, "no upstream named 'ghost'");
  config = Config();
  config.upstreams[0].url = "ftp://x";
  fails(config, "upstream 'u': url");
  config = Config();
  config.routes[2].match.pattern = "(unclosed";
  fails(config, "pattern '(unclosed'");
  config = Config();
  config.targets.push_back(config.targets[0]);
  fails(config, "two models are named 'fin-70b'");
  config = Config();
  config.targets[0].local_model = "text_embedding";
  fails(config, "give either endpoints (upstreams) or local_model");
  config = Config();
  config.routes[0].canary = CanaryConfig{.target = "candidate", .stages_percent = {50, 20}};
  fails(config, "stages must increase");
  config = Config();
  config.retry.max_attempts = 0;
  fails(config, "max_attempts");
}

TEST(ConfigTest, DescribesTheRoutingTable) {
  const std::string table = DescribeRoutes(Config());
  EXPECT_NE(table.find("route finance: when model in [auto] and keywords any of [Invoice, 报销] "
                       "-> fin-70b, fallback gpt-4o"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("upstream u: http://127.0.0.1:9/v1 (openai, health passive only)"),
            std::string::npos)
      << table;
}

}  // namespace
}  // namespace rampart::gateway
