// KServeHttp's routing and its answers to failures, through a connection that records what is
// sent (no sockets), over a server whose repository is an empty folder.

#include "api/kserve_http.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <new>

#include "api/http_status.h"
#include "net/http_connection.h"
#include "testing/recording_connection.h"

// This file replaces the global operator new and delete with malloc and free, a pair GCC's
// mismatch check cannot see through.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace {

// Allocations on the thread that armed this of at least `fail_at` bytes throw std::bad_alloc: how
// a test meets a server out of memory. 0 = off.
thread_local size_t fail_at = 0;

}  // namespace

void* operator new(size_t size) {
  if (fail_at != 0 && size >= fail_at) throw std::bad_alloc();
  if (void* memory = std::malloc(size == 0 ? 1 : size)) return memory;
  throw std::bad_alloc();
}
void operator delete(void* memory) noexcept { std::free(memory); }
void operator delete(void* memory, size_t) noexcept { std::free(memory); }

namespace rampart::api {
namespace {

using testing::RecordingConnection;

class KServeHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repository_ = std::filesystem::path(::testing::TempDir()) /
                  ("rampart_kserve_http_" +
                   std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::create_directories(repository_);
    serve::ServerOptions options;
    options.repository = repository_;
    server_ = std::make_unique<serve::InferenceServer>(options, backends_);
    http_ = std::make_unique<KServeHttp>(*server_, KServeHttpOptions{});
  }
  void TearDown() override {
    http_->Shutdown();
    std::filesystem::remove_all(repository_);
  }

  net::HttpResponse Send(std::string method, std::string target, std::string body = "",
                         std::vector<std::pair<std::string, std::string>> headers = {}) {
    net::HttpRequest request;
    request.method = std::move(method);
    request.target = std::move(target);
    request.body = std::move(body);
    request.headers = std::move(headers);
    auto connection = std::make_shared<RecordingConnection>();
    std::future<net::HttpResponse> answer = connection->answer();
    http_->Handle(std::move(request), net::Responder(connection));
    EXPECT_EQ(answer.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    return answer.get();
  }

  std::filesystem::path repository_;
  backend::BackendRegistry backends_;
  std::unique_ptr<serve::InferenceServer> server_;
  std::unique_ptr<KServeHttp> http_;
};

// A quota's or a tenant's share's refusal (ResourceExhausted) asks the client to slow down.
TEST(KServeHttpStatusTest, ResourceExhaustedIs429) {
  EXPECT_EQ(KServeHttpStatus(ResourceExhausted("tenant 'acme' is over its 50% share")), 429);
  net::HttpResponse refusal = KServeError(ResourceExhausted("tenant 'acme' is over its share"));
  EXPECT_EQ(refusal.status, 429);
  EXPECT_EQ(refusal.body, R"({"error":"tenant 'acme' is over its share"})");
  EXPECT_EQ(KServeHttpStatus(InvalidArgument("bad")), 400);
}

TEST_F(KServeHttpTest, UnknownPathsAre404AndKnownOnesWithAnotherMethod405) {
  EXPECT_EQ(Send("GET", "/v2").status, 200);
  EXPECT_EQ(Send("GET", "/v2/health/live").status, 200);
  const net::HttpResponse unknown = Send("GET", "/v3/models");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(unknown.body, R"({"error":"no route for /v3/models"})");
  EXPECT_EQ(Send("GET", "/v2/models/m/versions/1/infer/more").status, 404);
  const net::HttpResponse method = Send("DELETE", "/v2/models/m/infer");
  EXPECT_EQ(method.status, 405);
  EXPECT_EQ(method.body, R"({"error":"method DELETE is not allowed on /v2/models/m/infer"})");
  EXPECT_EQ(Send("GET", "/v2/repository/index").status, 405);
}

TEST_F(KServeHttpTest, PathCapturesAreCheckedAsTritonDoes) {
  const net::HttpResponse version = Send("GET", "/v2/models/m/versions/latest");
  EXPECT_EQ(version.status, 404);
  EXPECT_EQ(version.body, R"({"error":"'latest' is not a valid model version"})");
  const net::HttpResponse name = Send("GET", "/v2/models/bad%zzname");
  EXPECT_EQ(name.status, 400);
  EXPECT_EQ(name.body, R"({"error":"malformed model name in /v2/models/bad%zzname"})");
  // Percent-escapes are decoded: the model asked for is "a b".
  const net::HttpResponse escaped = Send("GET", "/v2/models/a%20b/config");
  EXPECT_EQ(escaped.status, 404);
  EXPECT_NE(escaped.body.find("'a b'"), std::string::npos) << escaped.body;
}

TEST_F(KServeHttpTest, TheRepositoryIndexIsReadOffTheCallingThread) {
  std::filesystem::create_directories(repository_ / "later");
  const net::HttpResponse index = Send("POST", "/v2/repository/index", "{}");
  EXPECT_EQ(index.status, 200);
  EXPECT_EQ(index.body, R"([{"name":"later"}])");
}

TEST_F(KServeHttpTest, RunningOutOfMemoryWhileDecodingAnswers503) {
  // A body whose decoded tensor takes an allocation of its size: refused by the armed allocator.
  const std::string elements(1 << 20, 'x');
  std::string body =
      R"({"inputs":[{"name":"x","shape":[1],"datatype":"BYTES","data":[")" + elements + R"("]}]})";
  const size_t bytes = body.size();
  fail_at = 1 << 20;
  net::HttpResponse parsing = Send("POST", "/v2/models/m/infer", std::move(body));
  fail_at = 0;
  // simdjson reports its allocation failure rather than throwing: the same answer.
  EXPECT_EQ(parsing.status, 503);
  EXPECT_EQ(parsing.body,
            fmt::format(R"({{"error":"out of memory while parsing {} bytes of JSON"}})", bytes));

  // A small JSON head and a binary tensor: the tensor's allocation throws.
  const std::string head = R"({"inputs":[{"name":"x","shape":[1048576],"datatype":"UINT8",)"
                           R"("parameters":{"binary_data_size":1048576}}]})";
  std::string binary = head + std::string(1 << 20, '\x01');
  fail_at = 1 << 20;
  net::HttpResponse decoding =
      Send("POST", "/v2/models/m/infer", std::move(binary),
           {{"inference-header-content-length", std::to_string(head.size())}});
  fail_at = 0;
  EXPECT_EQ(decoding.status, 503);
  EXPECT_EQ(decoding.body, R"({"error":"out of memory while decoding the request"})");
}

}  // namespace
}  // namespace rampart::api
