// The guard in the gateway end to end: a real HTTP server with the /v1 front end, the Gateway
// with the fake detector, and fake upstreams on loopback.

#include <gtest/gtest.h>

#include "testing/access_fixture.h"
#include "testing/capturing_sink.h"
#include "testing/eventually.h"
#include "testing/fake_detector.h"
#include "testing/fake_upstream.h"
#include "testing/gateway_harness.h"

namespace rampart::gateway {
namespace {

using std::chrono::milliseconds;
using testing::FakeUpstream;
using testing::UpstreamFault;

// A whole HTTP answer the fake sends as it is.
std::string RawAnswer(std::string_view type, std::string_view body) {
  return fmt::format(
      "HTTP/1.1 200 OK\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
      type, body.size(), body);
}

std::string Chunk(std::string_view delta, std::string_view finish = "null") {
  return fmt::format(
      "data: {{\"id\":\"s\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\","
      "\"choices\":[{{\"index\":0,\"delta\":{},\"finish_reason\":{}}}]}}\n\n",
      delta, finish);
}

class GatewayGuardTest : public ::testing::Test, protected GatewayHarness {
 protected:
  GatewayConfig Config() {
    GatewayConfig config;
    UpstreamConfig upstream{.name = "a", .url = upstream_.url() + "/v1"};
    upstream.first_byte_timeout = milliseconds(3000);
    config.upstreams.push_back(upstream);
    UpstreamConfig spare{.name = "b", .url = spare_.url() + "/v1"};
    config.upstreams.push_back(spare);
    config.targets.push_back(
        {.name = "chat",
         .endpoints = {{.upstream = "a", .priority = 100}, {.upstream = "b", .priority = 90}}});
    config.retry.base_backoff = milliseconds(1);
    config.retry.max_backoff = milliseconds(5);
    config.guard.defaults =
        GuardPolicy{.input = GuardMode::kRedact, .output = GuardMode::kRedact, .block = {"SECRET"}};
    return config;
  }

  void Start(GatewayConfig config, const policy::AccessControl* access = nullptr) {
    GatewayOptions options;
    options.access = access;
    options.detector_factory =
        [](guard::DetectorOptions) -> Result<std::unique_ptr<guard::Detector>> {
      return std::unique_ptr<guard::Detector>(std::make_unique<testing::FakeDetector>());
    };
    GatewayHarness::Start(std::move(config), std::move(options));
  }

  void TearDown() override { Stop(); }

  std::pair<int, std::string> Post(std::string_view path, std::string_view body) {
    Answer answer = GatewayHarness::Post(path, body);
    return {answer.status, std::move(answer.body)};
  }

  FakeUpstream upstream_, spare_;
};

TEST_F(GatewayGuardTest, NoModelSeesThePromptsEntities) {
  Start(Config());
  auto [status, body] =
      Post("/v1/chat/completions", R"({"model":"chat","messages":[{"role":"user","content":)"
                                   R"("我的手机13800138000，邮箱 zs@example.com"}]})");
  EXPECT_EQ(status, 200) << body;
  const std::string sent = upstream_.last_body();
  EXPECT_EQ(sent.find("13800138000"), std::string::npos) << sent;
  EXPECT_NE(sent.find("138****8000"), std::string::npos) << sent;
  EXPECT_NE(sent.find("EMAIL_ADDRESS_"), std::string::npos) << sent;  // hashed user part
  EXPECT_NE(sent.find("@example.com"), std::string::npos) << sent;
  EXPECT_TRUE(MetricsShow(
      R"(rampart_guard_entities_total{type="CN_MOBILE",direction="input",action="redacted"} 1)"));
}

// The audit stage's record of a real call: PII counts by type (never values), tokens, route and
// target; and the guard API's own record.
TEST_F(GatewayGuardTest, EveryCallAndGuardRequestIsRecorded) {
  testing::CapturingSink sink({});
  audit_ = &sink;
  Start(Config());
  const std::string prompt =
      R"({"model":"chat","messages":[{"role":"user","content":"call 13800138000"}]})";
  auto [status, body] = Post("/v1/chat/completions", prompt);
  ASSERT_EQ(status, 200) << body;
  // The record is handed over once the call has completed, just after its answer went out.
  ASSERT_TRUE(testing::Eventually([&] { return sink.captured().size() == 1; }));
  const testing::CapturingSink::Captured call = sink.captured()[0];
  EXPECT_EQ(call.record.api, "openai");
  EXPECT_EQ(call.record.action, "chat:create");
  EXPECT_EQ(call.record.resource, "chat");
  EXPECT_EQ(call.record.target, "chat");
  EXPECT_EQ(call.record.route, "direct");
  EXPECT_EQ(call.record.status, 200);
  EXPECT_EQ(call.record.pii_input, (audit::NamedCounts<int>{{"CN_MOBILE", 1}}));
  EXPECT_GT(call.record.tokens_in, 0);
  EXPECT_GT(call.record.tokens_out, 0);
  EXPECT_EQ(call.record.source_address, "127.0.0.1");
  EXPECT_FALSE(call.record.request_id.empty());
  // The request as forwarded: the input guard's redaction holds in the log too.
  EXPECT_EQ(call.request.find("13800138000"), std::string::npos) << call.request;
  EXPECT_NE(call.request.find("138****8000"), std::string::npos) << call.request;
  EXPECT_EQ(call.response, body);  // as the caller got it

  std::tie(status, body) = Post("/v1/guard/pii/detect", R"({"text":"call 13800138000"})");
  ASSERT_EQ(status, 200) << body;
  const std::vector<testing::CapturingSink::Captured> captured = sink.captured();
  ASSERT_EQ(captured.size(), 2u);
  EXPECT_EQ(captured[1].record.api, "guard");
  EXPECT_EQ(captured[1].record.action, "guard:detect");
  EXPECT_EQ(captured[1].record.status, 200);
  EXPECT_EQ(captured[1].response, body);

  // The front end's own routes are recorded too: the model list and the routing table.
  Answer models = Get("/v1/models");
  ASSERT_EQ(models.status, 200) << models.body;
  Answer routes = Get("/v1/admin/routes");
  ASSERT_EQ(routes.status, 200) << routes.body;
  const std::vector<testing::CapturingSink::Captured> all = sink.captured();
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[2].record.action, "models:read");
  EXPECT_EQ(all[2].record.api, "openai");
  EXPECT_EQ(all[2].record.status, 200);
  EXPECT_EQ(all[3].record.action, "admin:routes:read");
  EXPECT_EQ(all[3].record.resource_type, "route");
  EXPECT_EQ(all[3].response, routes.body);
}

TEST_F(GatewayGuardTest, ABlockedPromptIsRefusedBeforeAnyModel) {
  Start(Config());
  auto [status, body] =
      Post("/v1/chat/completions",
           R"({"model":"chat","messages":[{"role":"user","content":"sk-abcdefghijklmnopqrst"}]})");
  EXPECT_EQ(status, 400);
  EXPECT_NE(body.find("the text contains data the guard blocks: SECRET"), std::string::npos)
      << body;
  EXPECT_NE(body.find(R"("type":"invalid_request_error")"), std::string::npos) << body;
  EXPECT_EQ(body.find("sk-abc"), std::string::npos) << body;
  EXPECT_EQ(upstream_.total_requests(), 0);
  EXPECT_TRUE(MetricsShow(R"(rampart_guard_blocked_requests_total{route="direct"} 1)"));
}

TEST_F(GatewayGuardTest, AnEntitySplitAcrossStreamEventsIsMaskedAndFlushedBeforeDone) {
  Start(Config());
  const std::string events =
      Chunk(R"({"role":"assistant","content":""})") + Chunk(R"({"content":"我的手机138"})") +
      Chunk(R"({"content":"00138000"})") + Chunk("{}", "\"stop\"") + "data: [DONE]\n\n";
  upstream_.PushOnce({.fault = UpstreamFault::kRaw, .raw = RawAnswer("text/event-stream", events)});
  auto [status, body] =
      Post("/v1/chat/completions",
           R"({"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]})");
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body.find("00138000"), std::string::npos) << body;
  // Text near digits waits for what follows (a context word may come after a number), so the
  // masked number may go out with the words before it.
  EXPECT_NE(body.find("我的手机"), std::string::npos) << body;
  const size_t masked = body.find("138****8000");
  ASSERT_NE(masked, std::string::npos) << body;
  const size_t done = body.find("data: [DONE]");
  ASSERT_NE(done, std::string::npos) << body;
  EXPECT_LT(masked, done);
  EXPECT_TRUE(MetricsShow(
      R"(rampart_guard_entities_total{type="CN_MOBILE",direction="output",action="redacted"} 1)"));
}

TEST_F(GatewayGuardTest, ABlockedAnswerIsRefusedWithoutBlamingTheUpstream) {
  Start(Config());
  const std::string answer =
      R"({"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"use sk-abcdefghijklmnopqrst"},"finish_reason":"stop"}]})";
  upstream_.PushOnce({.fault = UpstreamFault::kRaw, .raw = RawAnswer("application/json", answer)});
  auto [status, body] = Post("/v1/chat/completions",
                             R"({"model":"chat","messages":[{"role":"user","content":"x"}]})");
  EXPECT_EQ(status, 400) << body;
  EXPECT_NE(body.find(R"("code":"guard_blocked")"), std::string::npos) << body;
  EXPECT_EQ(body.find("sk-abc"), std::string::npos) << body;
  EXPECT_EQ(spare_.total_requests(), 0);  // not retried elsewhere

  const std::string stream = Chunk(R"({"role":"assistant","content":"ok "})") +
                             Chunk(R"({"content":"sk-abcdefghijklmnopqrst"})") +
                             Chunk("{}", "\"stop\"") + "data: [DONE]\n\n";
  upstream_.PushOnce({.fault = UpstreamFault::kRaw, .raw = RawAnswer("text/event-stream", stream)});
  auto [stream_status, streamed] =
      Post("/v1/chat/completions",
           R"({"model":"chat","stream":true,"messages":[{"role":"user","content":"x"}]})");
  EXPECT_EQ(stream_status, 200);
  EXPECT_NE(streamed.find(R"("code":"guard_blocked")"), std::string::npos) << streamed;
  EXPECT_EQ(streamed.find("sk-abc"), std::string::npos) << streamed;
  EXPECT_EQ(streamed.find("[DONE]"), std::string::npos) << streamed;
  EXPECT_EQ(spare_.total_requests(), 0);
  EXPECT_TRUE(MetricsShow(R"(rampart_guard_blocked_requests_total{route="direct"} 2)"));
}

TEST_F(GatewayGuardTest, TheApiDetectsRedactsAndRestores) {
  GatewayConfig config = Config();
  config.guard.max_text_bytes = 4096;
  Start(std::move(config));
  const std::string text = "手机13800138000 mail zs@example.com";
  auto [status, body] = Post("/v1/guard/pii/detect", fmt::format(R"({{"text":"{}"}})", text));
  EXPECT_EQ(status, 200) << body;
  EXPECT_EQ(
      body,
      R"({"entities":[{"type":"CN_MOBILE","text":"13800138000","start":6,"end":17,"score":0.9},)"
      R"({"type":"EMAIL_ADDRESS","text":"zs@example.com","start":23,"end":37,"score":0.5}]})");
  std::tie(status, body) = Post("/v1/guard/pii/detect",
                                fmt::format(R"({{"text":"{}","types":["EMAIL_ADDRESS"]}})", text));
  EXPECT_EQ(body.find("CN_MOBILE"), std::string::npos) << body;

  std::tie(status, body) = Post(
      "/v1/guard/pii/redact",
      fmt::format(
          R"({{"text":"{}","operators":{{"CN_MOBILE":"tokenize","EMAIL_ADDRESS":"replace"}}}})",
          text));
  EXPECT_EQ(status, 200) << body;
  EXPECT_NE(body.find(R"("operator":"tokenize")"), std::string::npos) << body;
  EXPECT_NE(body.find(R"("start":6,"end":17)"), std::string::npos) << body;
  const size_t open = body.find("<<PII:CN_MOBILE:");
  ASSERT_NE(open, std::string::npos) << body;
  const std::string token = body.substr(open, body.find(">>", open) + 2 - open);
  EXPECT_NE(body.find(R"("text":"手机)" + token + R"( mail [EMAIL_ADDRESS]")"), std::string::npos)
      << body;

  std::tie(status, body) =
      Post("/v1/guard/pii/restore", fmt::format(R"({{"text":"call {} now"}})", token));
  EXPECT_EQ(status, 200) << body;
  EXPECT_EQ(body, R"({"text":"call 13800138000 now"})");
  EXPECT_TRUE(MetricsShow(
      R"(rampart_guard_entities_total{type="CN_MOBILE",direction="api",action="detected"} 1)"));

  const struct {
    std::string_view path;
    std::string body;
    int status;
    std::string_view expected;
  } bad[] = {
      {"/v1/guard/pii/detect", "{nope", 400, "not valid JSON"},
      {"/v1/guard/pii/detect", R"({"types":[]})", 400, "'text' is required"},
      {"/v1/guard/pii/detect", R"({"text":"x","types":["NAME"]})", 400, "unknown entity type"},
      {"/v1/guard/pii/redact", R"({"text":"x","operators":{"CN_MOBILE":"erase"}})", 400,
       "unknown operator"},
      {"/v1/guard/pii/redact",
       R"({"text":"sk-abcdefghijklmnopqrst","operators":{"SECRET":"block"}})", 400,
       "blocks: SECRET"},
      {"/v1/guard/pii/detect", "{\"text\":\"\xff\xfe\"}", 400, "UTF-8"},
      {"/v1/guard/pii/detect", fmt::format(R"({{"text":"{}"}})", std::string(5000, '1')), 413,
       "at most 4096"},
      {"/v1/guard/pii/erase", R"({"text":"x"})", 404, "no route"},
  };
  for (const auto& test : bad) {
    std::tie(status, body) = Post(test.path, test.body);
    EXPECT_EQ(status, test.status) << test.body << " -> " << body;
    EXPECT_NE(body.find(test.expected), std::string::npos) << body;
    EXPECT_NE(body.find(R"({"error":{"message":)"), std::string::npos) << body;
  }
}

// Tokens and hashes are made with the caller's tenant's keys: a token made for one tenant
// restores for that tenant only, even for a caller of another tenant allowed guard:restore.
TEST_F(GatewayGuardTest, ATokenMadeForOneTenantDoesNotRestoreForAnother) {
  testing::AccessFixture access(R"(
roles:
  - name: analyst
rules:
  - id: analysts-guard
    effect: permit
    principal: {role: analyst}
    action: "guard:*"
)");
  Start(Config(), &access.control());
  const auto as = [](const std::string& key) {
    return std::vector<std::pair<std::string, std::string>>{{"authorization", "Bearer " + key}};
  };
  Answer redacted = GatewayHarness::Post(
      "/v1/guard/pii/redact", R"({"text":"call 13800138000","operators":{"CN_MOBILE":"tokenize"}})",
      as(access.analyst_key()));  // tenant acme
  ASSERT_EQ(redacted.status, 200) << redacted.body;
  const size_t open = redacted.body.find("<<PII:CN_MOBILE:");
  ASSERT_NE(open, std::string::npos) << redacted.body;
  const std::string token = redacted.body.substr(open, redacted.body.find(">>", open) + 2 - open);
  const std::string restore = fmt::format(R"({{"text":"{}"}})", token);

  Answer same = GatewayHarness::Post("/v1/guard/pii/restore", restore, as(access.analyst_key()));
  EXPECT_EQ(same.status, 200) << same.body;
  EXPECT_EQ(same.body, R"({"text":"13800138000"})");
  Answer other = GatewayHarness::Post("/v1/guard/pii/restore", restore, as(access.thrifty_key()));
  EXPECT_EQ(other.status, 200) << other.body;
  EXPECT_EQ(other.body.find("13800138000"), std::string::npos) << other.body;
  EXPECT_NE(other.body.find(token), std::string::npos) << other.body;  // left as it was
}

TEST_F(GatewayGuardTest, AConfigThatNeedsADetectorNeedsOne) {
  auto gateway = Gateway::Create(Config(), GatewayOptions{}, registry_);
  ASSERT_FALSE(gateway.ok());
  EXPECT_NE(gateway.status().message().find("without a PII detector"), std::string::npos);
}

}  // namespace
}  // namespace rampart::gateway
