// Every KServe HTTP request but health probes yields one audit record; with a sync log the
// answer waits for its record, and a refused record answers 503 instead.

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <future>

#include "api/audit_http.h"
#include "api/kserve_http.h"
#include "net/http_connection.h"
#include "testing/capturing_sink.h"
#include "testing/recording_connection.h"

namespace rampart::api {
namespace {

using ::rampart::testing::CapturingSink;

using OneAnswer = ::rampart::testing::RecordingConnection;

class AuditHttpTest : public ::testing::Test {
 protected:
  void Start(CapturingSink::Options sink_options) {
    repository_ = std::filesystem::path(::testing::TempDir()) /
                  ("rampart_audit_http_" +
                   std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::create_directories(repository_ / "listed");
    sink_ = std::make_unique<CapturingSink>(sink_options);
    serve::ServerOptions options;
    options.repository = repository_;
    server_ = std::make_unique<serve::InferenceServer>(options, backends_);
    http_ = std::make_unique<KServeHttp>(*server_, KServeHttpOptions{.audit = sink_.get()});
  }
  void TearDown() override {
    if (http_ != nullptr) http_->Shutdown();
    std::filesystem::remove_all(repository_);
  }

  std::future<net::HttpResponse> Begin(
      std::string method, std::string target, std::string body = "",
      std::vector<std::pair<std::string, std::string>> headers = {}) {
    net::HttpRequest request;
    request.method = std::move(method);
    request.target = std::move(target);
    request.body = std::move(body);
    request.headers = std::move(headers);
    request.received = Clock::Real().Now();
    request.peer = std::make_shared<Peer>(Peer{.address = "10.1.2.3"});
    auto connection = std::make_shared<OneAnswer>();
    std::future<net::HttpResponse> answer = connection->answer();
    http_->Handle(std::move(request), net::Responder(connection));
    return answer;
  }
  net::HttpResponse Send(std::string method, std::string target, std::string body = "",
                         std::vector<std::pair<std::string, std::string>> headers = {}) {
    std::future<net::HttpResponse> answer =
        Begin(std::move(method), std::move(target), std::move(body), std::move(headers));
    EXPECT_EQ(answer.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    return answer.get();
  }

  std::filesystem::path repository_;
  backend::BackendRegistry backends_;
  std::unique_ptr<CapturingSink> sink_;
  std::unique_ptr<serve::InferenceServer> server_;
  std::unique_ptr<KServeHttp> http_;
};

TEST_F(AuditHttpTest, EveryRequestButHealthProbesYieldsOneRecord) {
  Start({});
  EXPECT_EQ(Send("GET", "/v2/health/live").status, 200);
  EXPECT_EQ(Send("GET", "/v2/health/ready").status, 200);
  EXPECT_TRUE(sink_->captured().empty());

  EXPECT_EQ(Send("GET", "/v2", "", {{"x-request-id", "req-one"}}).status, 200);
  const std::string traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  const net::HttpResponse missing =
      Send("POST", "/v2/models/absent/infer", R"({"inputs":[]})", {{"traceparent", traceparent}});
  EXPECT_NE(missing.status, 200);
  EXPECT_EQ(Send("GET", "/v2/models/bad%zz").status, 400);

  const std::vector<CapturingSink::Captured> captured = sink_->captured();
  ASSERT_EQ(captured.size(), 3u);
  const audit::AuditRecord& server = captured[0].record;
  EXPECT_EQ(server.api, "kserve_http");
  EXPECT_EQ(server.request_id, "req-one");
  EXPECT_EQ(server.action, "server:read");
  EXPECT_EQ(server.resource_type, "server");
  EXPECT_EQ(server.source_address, "10.1.2.3");
  EXPECT_EQ(server.status, 200);
  EXPECT_EQ(server.outcome, "ok");
  EXPECT_EQ(server.trace_id.size(), 32u);
  EXPECT_GT(server.time_unix_ns, 0);
  EXPECT_GE(server.latency_ns, 0);
  EXPECT_NE(captured[0].response.find("\"extensions\""), std::string::npos);

  const CapturingSink::Captured& infer = captured[1];
  EXPECT_EQ(infer.record.action, "model:infer");
  EXPECT_EQ(infer.record.resource, "absent");
  EXPECT_EQ(infer.record.trace_id, "0af7651916cd43dd8448eb211c80319c");  // the caller's trace
  EXPECT_EQ(infer.record.request_id, "req_0af7651916cd43dd8448eb211c80319c");
  EXPECT_EQ(infer.record.status, missing.status);
  EXPECT_NE(infer.record.outcome, "ok");
  EXPECT_EQ(infer.request, R"({"inputs":[]})");
  EXPECT_EQ(infer.response, missing.body);
  EXPECT_FALSE(infer.full);  // no policy, no audit:full

  EXPECT_EQ(captured[2].record.status, 400);
  EXPECT_EQ(captured[2].record.outcome, "invalid_argument");
}

TEST_F(AuditHttpTest, RequestsOffTheIoThreadAreRecordedWhenAnswered) {
  Start({});
  const net::HttpResponse index = Send("POST", "/v2/repository/index", "{}");
  EXPECT_EQ(index.status, 200);
  const std::vector<CapturingSink::Captured> captured = sink_->captured();
  ASSERT_EQ(captured.size(), 1u);
  EXPECT_EQ(captured[0].record.action, "repository:read");
  EXPECT_EQ(captured[0].request, "{}");
  EXPECT_EQ(captured[0].response, index.body);
}

TEST_F(AuditHttpTest, ASyncLogHoldsTheAnswerUntilTheRecordIsDurable) {
  Start({.sync = true, .hold = true});
  std::future<net::HttpResponse> answer = Begin("GET", "/v2");
  ASSERT_EQ(sink_->captured().size(), 1u);
  // Nothing may answer before the log says the record is durable.
  EXPECT_EQ(answer.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  sink_->Release();
  ASSERT_EQ(answer.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(answer.get().status, 200);
}

TEST_F(AuditHttpTest, ASyncLogThatRefusesTheRecordAnswers503) {
  Start({.sync = true, .refuse = Unavailable("the audit queue is full")});
  const net::HttpResponse refused = Send("GET", "/v2");
  EXPECT_EQ(refused.status, 503);
  EXPECT_NE(refused.body.find("audit queue is full"), std::string::npos) << refused.body;
  EXPECT_EQ(sink_->captured().size(), 1u);
}

TEST_F(AuditHttpTest, ABatchedLogThatRefusesStillAnswers) {
  Start({.sync = false, .refuse = Unavailable("the audit queue is full")});
  EXPECT_EQ(Send("GET", "/v2").status, 200);
  EXPECT_EQ(sink_->captured().size(), 1u);
}

TEST(OutcomeOfTest, NamesTheErrorKind) {
  EXPECT_EQ(OutcomeOf(200), "ok");
  EXPECT_EQ(OutcomeOf(401), "unauthenticated");
  EXPECT_EQ(OutcomeOf(403), "forbidden");
  EXPECT_EQ(OutcomeOf(429), "rate_limited");
  EXPECT_EQ(OutcomeOf(503), "unavailable");
  EXPECT_EQ(OutcomeOf(418), "client_error");
  EXPECT_EQ(OutcomeOf(599), "internal");
}

}  // namespace
}  // namespace rampart::api
