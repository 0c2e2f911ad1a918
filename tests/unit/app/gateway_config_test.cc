#include "app/gateway_config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace rampart::app {
namespace {

std::string WriteTemp(const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("rampart_gateway_" + std::to_string(getpid()) + "_" +
                     ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".yaml");
  std::ofstream(path) << text;
  return path.string();
}

TEST(GatewayConfig, ReadsEverySection) {
  setenv("RAMPART_TEST_KEY", "secret-from-env", 1);
  const std::string path = WriteTemp(R"(
server: {model_repository: /models}
gateway:
  upstreams:
    - {name: a, url: "http://10.0.0.5:8000/v1", engine: vllm, api_key_env: RAMPART_TEST_KEY,
       headers: {X-Org: fin}, first_byte_timeout_ms: 1500, ask_stream_usage: false,
       max_connections: 64}
    - {name: cloud, url: "https://api.example.com/v1", api_key: k}
  models:
    - name: fin
      endpoints:
        - {upstream: a, model: meta-llama/Llama-3-70B, priority: 100, weight: 3}
        - {upstream: cloud, model: gpt-4o, priority: 50}
    - {name: gpt-4o, endpoints: [{upstream: cloud}]}
    - {name: embed, local_model: text_embedding}
  routes:
    - name: finance
      match: {models: [auto], headers: {X-Intent: financial-compliance}, keywords: [发票],
              pattern: 'IBAN'}
      target: fin
      fallbacks: [gpt-4o]
      canary: {target: gpt-4o, stages: [10, 100], min_requests: 50}
  health_check: {interval_ms: 1000, timeout_ms: 500}
  ejection: {consecutive_failures: 3}
  retry: {max_attempts: 4, base_backoff_ms: 10}
  keep_alive_ms: 2000
  max_n: 4
)");
  Result<gateway::GatewayConfig> config = LoadGatewayConfig(path);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ASSERT_TRUE(gateway::Validate(*config).ok()) << gateway::Validate(*config).ToString();
  ASSERT_EQ(config->upstreams.size(), 2u);
  EXPECT_EQ(config->upstreams[0].engine, gateway::Engine::kVllm);
  EXPECT_EQ(config->upstreams[0].api_key, "secret-from-env");
  EXPECT_EQ(config->upstreams[0].headers.at("X-Org"), "fin");
  EXPECT_EQ(config->upstreams[0].first_byte_timeout.count(), 1500);
  EXPECT_FALSE(config->upstreams[0].ask_stream_usage);
  EXPECT_EQ(config->upstreams[0].max_connections, 64u);
  ASSERT_EQ(config->targets.size(), 3u);
  EXPECT_EQ(config->targets[0].endpoints[0].weight, 3);
  EXPECT_EQ(config->targets[2].local_model, "text_embedding");
  ASSERT_EQ(config->routes.size(), 1u);
  EXPECT_EQ(config->routes[0].match.headers.at("x-intent"), "financial-compliance");
  ASSERT_TRUE(config->routes[0].canary.has_value());
  EXPECT_EQ(config->routes[0].canary->stages_percent, (std::vector<int>{10, 100}));
  EXPECT_EQ(config->retry.max_attempts, 4);
  EXPECT_EQ(config->keep_alive.count(), 2000);
  EXPECT_EQ(config->max_n, 4);
}

TEST(GatewayConfig, NamesUnknownKeysAndWrongTypes) {
  const struct {
    std::string yaml;
    std::string expected;
  } cases[] = {
      {"gateway: {upstream: []}\n", "unknown key 'gateway.upstream'"},
      {"gateway:\n  routes:\n    - {name: r, target: t, match: {model: [x]}}\n",
       "unknown key 'gateway.routes[0].match.model'"},
      {"gateway:\n  models:\n    - {name: m, endpoints: [{upstream: u, priority: high}]}\n",
       "'gateway.models[0].endpoints[0].priority' has the wrong type"},
      {"gateway:\n  upstreams:\n    - {name: u, url: 'http://x', engine: vlm}\n",
       "unknown engine 'vlm'"},
      {"gateway:\n  upstreams:\n    - {name: u, url: 'http://x', api_key_env: RAMPART_UNSET_X}\n",
       "'RAMPART_UNSET_X', which is not set"},
      {"gateway: {models: {a: 1}}\n", "'gateway.models' must be a list"},
  };
  for (const auto& test : cases) {
    Result<gateway::GatewayConfig> config = LoadGatewayConfig(WriteTemp(test.yaml));
    ASSERT_FALSE(config.ok()) << test.yaml;
    EXPECT_NE(config.status().message().find(test.expected), std::string::npos)
        << config.status().message();
  }
  EXPECT_TRUE(LoadGatewayConfig(WriteTemp("server: {}\n"))->targets.empty());
  EXPECT_TRUE(LoadGatewayConfig("")->targets.empty());
  EXPECT_EQ(LoadGatewayConfig("/nonexistent.yaml").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace rampart::app

namespace rampart::app {
namespace {

TEST(GatewayConfig, ReadsTheGuardAndEachRoutesOverTheDefaults) {
  const std::string path = WriteTemp(R"(
gateway:
  upstreams: [{name: a, url: "http://10.0.0.5:8000/v1"}]
  models: [{name: m, endpoints: [{upstream: a}]}]
  routes:
    - name: strict
      match: {models: [strict]}
      target: m
      guard: {output: mask, block: [SECRET, CN_RESIDENT_ID], operators: {EMAIL_ADDRESS: hash,
              CN_MOBILE: "mask:3:2"}, types: [EMAIL_ADDRESS, CN_MOBILE, SECRET, CN_RESIDENT_ID]}
    - {name: plain, match: {models: [plain]}, target: m}
  guard:
    key_file: /etc/rampart/guard.key
    internal_domains: [corp.example.com]
    internal_path_roots: [/srv/secret]
    max_text_bytes: 65536
    defaults: {input: redact, output: detect}
)");
  Result<gateway::GatewayConfig> config = LoadGatewayConfig(path);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const gateway::GuardConfig& guard = config->guard;
  EXPECT_EQ(guard.key_file, "/etc/rampart/guard.key");
  EXPECT_EQ(guard.internal_domains, std::vector<std::string>{"corp.example.com"});
  EXPECT_EQ(guard.internal_path_roots, std::vector<std::string>{"/srv/secret"});
  EXPECT_EQ(guard.max_text_bytes, 65536u);
  EXPECT_EQ(guard.defaults.input, gateway::GuardMode::kRedact);
  EXPECT_EQ(guard.defaults.output, gateway::GuardMode::kDetect);
  ASSERT_TRUE(config->routes[0].guard.has_value());
  const gateway::GuardPolicy& strict = *config->routes[0].guard;
  EXPECT_EQ(strict.input, gateway::GuardMode::kRedact);  // from the defaults
  EXPECT_EQ(strict.output, gateway::GuardMode::kMask);
  EXPECT_EQ(strict.block, (std::vector<std::string>{"SECRET", "CN_RESIDENT_ID"}));
  EXPECT_EQ(strict.operators.at("EMAIL_ADDRESS").kind, guard::OperatorKind::kHash);
  EXPECT_EQ(strict.operators.at("CN_MOBILE"),
            (guard::Operator{.kind = guard::OperatorKind::kMask, .keep_first = 3, .keep_last = 2}));
  EXPECT_FALSE(config->routes[1].guard.has_value());
  EXPECT_EQ(&gateway::GuardPolicyFor(*config, "plain"), &guard.defaults);
  EXPECT_TRUE(gateway::Validate(*config).ok());
  const std::string described = gateway::DescribeRoutes(*config);
  EXPECT_NE(described.find("route strict: guard input redact, output mask, block [SECRET, "
                           "CN_RESIDENT_ID], operators {CN_MOBILE: mask:3:2, EMAIL_ADDRESS: hash}"),
            std::string::npos)
      << described;
  EXPECT_NE(described.find("guard defaults: input redact, output detect; key from "
                           "/etc/rampart/guard.key"),
            std::string::npos)
      << described;
}

TEST(GatewayConfig, NamesWhatIsWrongInTheGuard) {
  const struct {
    std::string_view yaml;
    std::string_view error;
  } cases[] = {
      {"gateway: {guard: {keyfile: x}}", "unknown key 'gateway.guard.keyfile'"},
      {"gateway: {guard: {defaults: {input: scrub}}}", "unknown guard mode 'scrub'"},
      {"gateway: {guard: {defaults: {operators: {CN_MOBILE: erase}}}}",
       "gateway.guard.defaults.operators.CN_MOBILE"},
      {"gateway: {guard: {defaults: {inputs: redact}}}",
       "unknown key 'gateway.guard.defaults.inputs'"},
  };
  for (const auto& test : cases) {
    Result<gateway::GatewayConfig> config = LoadGatewayConfig(WriteTemp(std::string(test.yaml)));
    ASSERT_FALSE(config.ok()) << test.yaml;
    EXPECT_NE(config.status().message().find(test.error), std::string::npos)
        << config.status().message();
  }
  gateway::GatewayConfig config;
  config.guard.defaults.block = {"PASSPORT"};
  const Status invalid = gateway::Validate(config);
  EXPECT_NE(invalid.message().find("guard.defaults: block: unknown entity type 'PASSPORT'"),
            std::string::npos)
      << invalid.message();
}

}  // namespace
}  // namespace rampart::app

namespace rampart::app {
namespace {

TEST(GatewayConfig, ReadsKnowledgeAnswersSettings) {
  const std::string path = WriteTemp(R"(
gateway:
  upstreams: [{name: a, url: "http://10.0.0.5:8000/v1"}]
  models: [{name: chat, endpoints: [{upstream: a}]}, {name: big, endpoints: [{upstream: a}]}]
  knowledge: {target: chat, max_passages: 8, score_threshold: 0.5}
  routes:
    - name: handbook
      match: {models: [handbook]}
      target: chat
      knowledge: {vector_store: vs_handbook, target: big, max_passages: 3, score_threshold: 0.2}
)");
  Result<gateway::GatewayConfig> config = LoadGatewayConfig(path);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ASSERT_TRUE(gateway::Validate(*config).ok()) << gateway::Validate(*config).ToString();
  EXPECT_EQ(config->knowledge.target, "chat");
  EXPECT_EQ(config->knowledge.max_passages, 8);
  EXPECT_DOUBLE_EQ(config->knowledge.score_threshold, 0.5);
  ASSERT_TRUE(config->routes[0].knowledge.has_value());
  EXPECT_EQ(config->routes[0].knowledge->vector_store, "vs_handbook");
  EXPECT_EQ(config->routes[0].knowledge->target, "big");
  EXPECT_EQ(config->routes[0].knowledge->max_passages, 3);
  EXPECT_DOUBLE_EQ(config->routes[0].knowledge->score_threshold, 0.2);
  EXPECT_FALSE(LoadGatewayConfig(WriteTemp("gateway: {knowledge: {store: x}}\n")).ok());
}

}  // namespace
}  // namespace rampart::app
