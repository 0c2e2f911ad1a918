// The gateway end to end inside one process: a real HTTP server with the /v1 front end, the
// Gateway, and fault-injecting fake upstreams (testing/fake_upstream.h) on loopback.

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "testing/fake_upstream.h"
#include "testing/gateway_harness.h"

namespace rampart::gateway {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using std::chrono::milliseconds;
using testing::FakeUpstream;
using testing::UpstreamBehaviour;
using testing::UpstreamFault;

constexpr std::string_view kChat =
    R"({"model":"chat","messages":[{"role":"user","content":"hi"}]})";
constexpr std::string_view kStream =
    R"({"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]})";

class GatewayCallTest : public ::testing::Test, protected GatewayHarness {
 protected:
  // Upstreams a, b (priorities 100, 90) serve "chat" (as "fake-model"); c serves "backup".
  GatewayConfig Config() {
    GatewayConfig config;
    for (auto* fake : {&a_, &b_, &c_}) {
      const std::string name = fake == &a_ ? "a" : fake == &b_ ? "b" : "c";
      UpstreamConfig upstream{.name = name, .url = fake->url() + "/v1"};
      upstream.first_byte_timeout = milliseconds(1500);
      upstream.idle_timeout = milliseconds(1500);
      config.upstreams.push_back(upstream);
    }
    config.targets.push_back(
        {.name = "chat",
         .endpoints = {{.upstream = "a", .model = "fake-model", .priority = 100},
                       {.upstream = "b", .model = "fake-model", .priority = 90}}});
    config.targets.push_back({.name = "backup", .endpoints = {{.upstream = "c"}}});
    RouteConfig route{.name = "guarded", .target = "chat", .fallbacks = {"backup"}};
    route.match.models = {"guarded"};
    config.routes.push_back(route);
    config.retry.base_backoff = milliseconds(1);
    config.retry.max_backoff = milliseconds(5);
    config.retry.max_retry_after = milliseconds(100);
    config.ejection.consecutive_failures = 2;
    config.keep_alive = milliseconds(100);
    return config;
  }

  void TearDown() override { Stop(); }

  FakeUpstream a_, b_, c_;
};

TEST_F(GatewayCallTest, ForwardsAWholeAnswerWithTheUpstreamsModelName) {
  Start(Config());
  Answer answer =
      Post("/v1/chat/completions",
           R"({"model":"chat","vendor_knob":3,"messages":[{"role":"user","content":"hi"}]})",
           {{"x-request-id", "abc-123"}});
  EXPECT_EQ(answer.status, 200) << answer.body;
  EXPECT_NE(answer.body.find("Hello from the fake"), std::string::npos);
  EXPECT_EQ(answer.raw["x-request-id"], "abc-123");
  EXPECT_NE(answer.raw["server-timing"].find("gateway;dur="), std::string::npos);
  EXPECT_EQ(a_.requests("/v1/chat/completions"), 1);
  EXPECT_NE(a_.last_body().find(R"("model":"fake-model")"), std::string::npos);
  EXPECT_NE(a_.last_body().find(R"("vendor_knob":3)"), std::string::npos);
  EXPECT_EQ(a_.last_header("x-request-id").value_or(""), "abc-123");
}

TEST_F(GatewayCallTest, StreamsEventsAndAsksForUsage) {
  Start(Config());
  Answer answer = Post("/v1/chat/completions", kStream);
  EXPECT_EQ(answer.status, 200);
  EXPECT_EQ(answer.raw[http::field::content_type], "text/event-stream");
  const std::string& body = answer.body;
  const size_t first = body.find("tok0");
  const size_t last = body.find("tok2");
  ASSERT_NE(first, std::string::npos) << body;
  ASSERT_NE(last, std::string::npos) << body;
  EXPECT_LT(first, last);
  EXPECT_EQ(body.substr(body.size() - 14), "data: [DONE]\n\n");
  EXPECT_NE(a_.last_body().find(R"("include_usage":true)"), std::string::npos);
  EXPECT_FALSE(!a_.last_body().empty() && body.find("\"error\"") != std::string::npos);
}

TEST_F(GatewayCallTest, FailsOverToTheNextPriorityAndEjects) {
  Start(Config());
  a_.SetBehaviour({.fault = UpstreamFault::kStatus, .status = 503});
  for (int i = 0; i < 3; ++i) {
    Answer answer = Post("/v1/chat/completions", kChat);
    EXPECT_EQ(answer.status, 200) << answer.body;
  }
  // Two failures in a row ejected a: the third call went straight to b.
  EXPECT_EQ(a_.requests("/v1/chat/completions"), 2);
  EXPECT_EQ(b_.requests("/v1/chat/completions"), 3);
  EXPECT_TRUE(MetricsShow(R"(rampart_gateway_ejections_total{upstream="a"} 1)"));
  EXPECT_TRUE(
      MetricsShow(R"(rampart_gateway_upstream_calls_total{upstream="a",outcome="http_503"} 2)"));
  EXPECT_TRUE(MetricsShow(R"(rampart_gateway_failovers_total{model="chat"} 3)"));
  EXPECT_TRUE(MetricsShow(R"(rampart_gateway_upstream_healthy{upstream="a"} 0)"));
}

TEST_F(GatewayCallTest, FallsBackAlongTheRouteWhenThePoolIsExhausted) {
  Start(Config());
  for (auto* fake : {&a_, &b_})
    fake->SetBehaviour({.fault = UpstreamFault::kStatus, .status = 500});
  Answer answer = Post("/v1/chat/completions",
                       R"({"model":"guarded","messages":[{"role":"user","content":"hi"}]})");
  EXPECT_EQ(answer.status, 200) << answer.body;
  EXPECT_EQ(c_.requests("/v1/chat/completions"), 1);
  EXPECT_EQ(a_.requests("/v1/chat/completions") + b_.requests("/v1/chat/completions"), 3);
  EXPECT_TRUE(MetricsShow(R"(rampart_gateway_fallbacks_total{route="guarded"} 1)"));
}

TEST_F(GatewayCallTest, WithoutAFallbackTheLastFailureIsAnswered) {
  GatewayConfig config = Config();
  config.targets[0].endpoints.pop_back();  // a alone
  Start(std::move(config));
  a_.SetBehaviour({.fault = UpstreamFault::kTooManyRequests, .retry_after = 7});
  Answer answer = Post("/v1/chat/completions", kChat);
  EXPECT_EQ(answer.status, 429) << answer.body;
  EXPECT_EQ(answer.raw["retry-after"], "7");
  EXPECT_NE(answer.body.find(R"("type":"rate_limit_error")"), std::string::npos);
  // Retry-After 7 s is over max_retry_after: no second call.
  EXPECT_EQ(a_.requests("/v1/chat/completions"), 1);
}

TEST_F(GatewayCallTest, CallersMistakesAreNotRetried) {
  Start(Config());
  a_.SetBehaviour({.fault = UpstreamFault::kStatus, .status = 400});
  Answer answer = Post("/v1/chat/completions", kChat);
  EXPECT_EQ(answer.status, 400) << answer.body;
  EXPECT_EQ(a_.requests("/v1/chat/completions"), 1);
  EXPECT_EQ(b_.requests("/v1/chat/completions"), 0);
}

TEST_F(GatewayCallTest, GarbageIsA502AndNeverAHang) {
  GatewayConfig config = Config();
  config.targets[0].endpoints.pop_back();
  config.retry.max_attempts = 1;
  config.max_response_bytes = 1 << 20;
  Start(std::move(config));
  for (UpstreamBehaviour fault :
       {UpstreamBehaviour{.fault = UpstreamFault::kInvalidJson},
        UpstreamBehaviour{.fault = UpstreamFault::kHugeBody, .huge_bytes = 8 << 20},
        UpstreamBehaviour{.fault = UpstreamFault::kCloseMidResponse},
        UpstreamBehaviour{.fault = UpstreamFault::kRaw, .raw = "NOT HTTP\r\n\r\n"},
        UpstreamBehaviour{.fault = UpstreamFault::kHang}}) {
    a_.PushOnce(fault);
    Answer answer = Post("/v1/chat/completions", kChat);
    EXPECT_GE(answer.status, 502) << answer.body;
    EXPECT_LE(answer.status, 504) << answer.body;
    EXPECT_NE(answer.body.find(R"("type":"server_error")"), std::string::npos) << answer.body;
  }
}

TEST_F(GatewayCallTest, AStreamCutBeforeItsFirstTokenFailsOver) {
  Start(Config());
  a_.PushOnce({.fault = UpstreamFault::kCutStream, .chunks = 0});
  Answer answer = Post("/v1/chat/completions", kStream);
  EXPECT_EQ(answer.status, 200);
  EXPECT_NE(answer.body.find("tok2"), std::string::npos) << answer.body;
  EXPECT_EQ(answer.body.find("\"error\""), std::string::npos) << answer.body;
  EXPECT_EQ(b_.requests("/v1/chat/completions"), 1);
}

TEST_F(GatewayCallTest, AStreamCutAfterTokensEndsWithAnErrorEvent) {
  Start(Config());
  a_.PushOnce({.fault = UpstreamFault::kCutStream, .chunks = 2});
  Answer answer = Post("/v1/chat/completions", kStream);
  EXPECT_EQ(answer.status, 200);
  EXPECT_NE(answer.body.find("tok1"), std::string::npos) << answer.body;
  EXPECT_NE(answer.body.find(R"(data: {"error":{)"), std::string::npos) << answer.body;
  EXPECT_EQ(answer.body.find("[DONE]"), std::string::npos) << answer.body;
  EXPECT_EQ(b_.requests("/v1/chat/completions"), 0);  // tokens were sent: no second answer
  EXPECT_TRUE(MetricsShow(R"(rampart_gateway_broken_streams_total{route="direct"} 1)"));
}

TEST_F(GatewayCallTest, KeepsASlowStreamAlive) {
  Start(Config());
  a_.PushOnce({.fault = UpstreamFault::kDelayFirstByte, .delay = milliseconds(700)});
  Answer answer = Post("/v1/chat/completions", kStream);
  EXPECT_EQ(answer.status, 200);
  EXPECT_EQ(answer.body.rfind(": keep-alive\n\n", 0), 0u) << answer.body;
  EXPECT_NE(answer.body.find("tok2"), std::string::npos);
}

TEST_F(GatewayCallTest, ACallerGoneCancelsTheUpstreamCall) {
  Start(Config());
  a_.SetBehaviour({.fault = UpstreamFault::kStallStream, .chunks = 1});
  {
    asio::io_context context;
    asio::ip::tcp::socket socket(context);
    socket.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), server_->port()));
    const std::string request = fmt::format(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: {}\r\n\r\n{}",
        kStream.size(), kStream);
    asio::write(socket, asio::buffer(request));
    std::string received;
    char buffer[4096];
    while (received.find("tok0") == std::string::npos) {
      const size_t n = socket.read_some(asio::buffer(buffer));
      received.append(buffer, n);
    }
  }  // the caller hangs up mid-stream
  EXPECT_TRUE(a_.WaitFor([this] { return a_.connections_closed() >= 1; }));
}

TEST_F(GatewayCallTest, KeepsEveryUpstreamConnectionForReuse) {
  // More calls at once than the HTTP client keeps idle by default (128), fewer than the
  // upstream's max_connections: every connection the first wave opened serves the second, none
  // is closed and opened again.
  constexpr int kCalls = 140;
  Start(Config());
  a_.SetBehaviour({.fault = UpstreamFault::kDelayFirstByte,
                   .delay = milliseconds(1000)});  // under first_byte_timeout
  const auto wave = [this] {
    std::atomic<int> answered = 0;
    std::vector<std::thread> callers;
    for (int i = 0; i < kCalls; ++i) {
      callers.emplace_back([&] {
        if (Post("/v1/chat/completions", kChat).status == 200) ++answered;
      });
    }
    for (std::thread& caller : callers) caller.join();
    return answered.load();
  };
  ASSERT_EQ(wave(), kCalls);
  // Each call waits at the upstream, so all of them were there at once.
  ASSERT_EQ(a_.connections_accepted(), kCalls);
  ASSERT_EQ(wave(), kCalls);
  EXPECT_EQ(a_.connections_accepted(), kCalls);
  EXPECT_EQ(a_.connections_ended(), 0);
}

TEST_F(GatewayCallTest, BadRequestsGetOpenAiErrors) {
  Start(Config());
  const struct {
    std::string_view path;
    std::string_view body;
    int status;
    std::string_view expected;
  } cases[] = {
      {"/v1/chat/completions", "{nope", 400, R"("param":null)"},
      {"/v1/chat/completions", R"({"model":"chat","messages":"hi"})", 400, R"("param":"messages")"},
      {"/v1/chat/completions", R"({"model":"gpt-9","messages":[{"role":"user","content":"x"}]})",
       404, R"("code":"model_not_found")"},
      {"/v1/chat/completions",
       R"({"model":"chat","n":99,"messages":[{"role":"user","content":"x"}]})", 400,
       R"("param":"n")"},
      {"/v1/nothing", "{}", 404, R"("type":"invalid_request_error")"},
  };
  for (const auto& test : cases) {
    Answer answer = Post(test.path, test.body);
    EXPECT_EQ(answer.status, test.status) << test.body << " -> " << answer.body;
    EXPECT_NE(answer.body.find(test.expected), std::string::npos) << answer.body;
    EXPECT_FALSE(answer.raw["x-request-id"].empty());
  }
  EXPECT_EQ(a_.total_requests(), 0);
}

TEST_F(GatewayCallTest, HealthChecksTakeAnUpstreamOutAndBringItBack) {
  GatewayConfig config = Config();
  config.upstreams[0].engine = Engine::kVllm;  // checked on /health
  config.health_check.interval = milliseconds(100);
  config.health_check.unhealthy_threshold = 1;
  Start(std::move(config));
  a_.SetBehaviour({.fault = UpstreamFault::kStatus, .status = 503});
  EXPECT_TRUE(MetricsShow(R"(rampart_gateway_upstream_healthy{upstream="a"} 0)"));
  const int calls_before = a_.requests("/v1/chat/completions");
  EXPECT_EQ(Post("/v1/chat/completions", kChat).status, 200);
  EXPECT_EQ(a_.requests("/v1/chat/completions"), calls_before);  // b answered, a was not asked
  a_.SetBehaviour({});
  EXPECT_TRUE(MetricsShow(R"(rampart_gateway_upstream_healthy{upstream="a"} 1)"));
  EXPECT_EQ(Post("/v1/chat/completions", kChat).status, 200);
  EXPECT_EQ(a_.requests("/v1/chat/completions"), calls_before + 1);
}

TEST_F(GatewayCallTest, ReloadKeepsTheOldTableWhenTheNewOneIsInvalid) {
  Start(Config());
  GatewayConfig broken = Config();
  broken.routes[0].target = "ghost";
  EXPECT_FALSE(gateway_->Reload(broken).ok());
  EXPECT_EQ(Post("/v1/chat/completions", kChat).status, 200);
  GatewayConfig renamed = Config();
  renamed.targets[0].name = "chat-v2";
  renamed.routes.clear();
  ASSERT_TRUE(gateway_->Reload(renamed).ok());
  EXPECT_EQ(Post("/v1/chat/completions", kChat).status, 404);
}

}  // namespace
}  // namespace rampart::gateway
