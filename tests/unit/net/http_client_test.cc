// HttpClient against FakeUpstream: bodies, pooling, timeouts, cancellation, backpressure, TLS.

#include "net/http_client.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>

#include "testing/fake_upstream.h"
#include "testing/test_certs.h"

namespace rampart::net {
namespace {

using namespace std::chrono_literals;
using testing::FakeUpstream;
using testing::UpstreamBehaviour;
using testing::UpstreamFault;

constexpr auto kWait = std::chrono::seconds(10);

// Records what a call delivers; optionally pauses once `pause_at` pieces have arrived.
class RecordingSink final : public HttpResponseSink {
 public:
  explicit RecordingSink(int pause_at = 0) : pause_at_(pause_at) {}

  void OnHead(const HttpClientResponseHead& head) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++heads_;
    status_code_ = head.status;
    headers_ = head.headers;
  }
  bool OnBody(std::string_view piece) override {
    std::lock_guard<std::mutex> lock(mutex_);
    body_.append(piece);
    ++pieces_;
    changed_.notify_all();
    return pause_at_ == 0 || pieces_ < pause_at_;
  }
  void OnComplete(const Status& status, HttpClientError error) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++completions_;
    status_ = status;
    error_ = error;
    changed_.notify_all();
  }

  bool WaitDone() {
    return Wait([&] { return completions_ > 0; });
  }
  bool WaitPieces(int pieces) {
    return Wait([&] { return pieces_ >= pieces; });
  }
  void StopPausing() {
    std::lock_guard<std::mutex> lock(mutex_);
    pause_at_ = 0;
  }

  int heads() const { return Locked(heads_); }
  int pieces() const { return Locked(pieces_); }
  int completions() const { return Locked(completions_); }
  int status_code() const { return Locked(status_code_); }
  std::string body() const { return Locked(body_); }
  HttpHeaders headers() const { return Locked(headers_); }
  Status status() const { return Locked(status_); }
  HttpClientError error() const { return Locked(error_); }

 private:
  template <typename T>
  T Locked(const T& value) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return value;
  }
  template <typename Condition>
  bool Wait(Condition condition) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, kWait, condition);
  }

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  int pause_at_;
  int heads_ = 0;
  int pieces_ = 0;
  int completions_ = 0;
  int status_code_ = 0;
  std::string body_;
  HttpHeaders headers_;
  Status status_;
  HttpClientError error_ = HttpClientError::kNone;
};

HttpClientRequest Get(std::string target) {
  HttpClientRequest request;
  request.target = std::move(target);
  return request;
}

HttpClientRequest Chat(bool stream) {
  HttpClientRequest request;
  request.method = "POST";
  request.target = "/v1/chat/completions";
  request.headers.Add("Content-Type", "application/json");
  request.body =
      std::string(R"({"model":"fake-model","messages":[{"role":"user","content":"hi"}])") +
      (stream ? R"(,"stream":true})" : "}");
  return request;
}

class HttpClientTest : public ::testing::Test {
 protected:
  void SetUp() override { MakeClient({}); }

  void MakeClient(HttpClientOptions options) {
    client_.reset();
    auto created = HttpClient::Create(options);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    client_ = std::move(created).value();
  }

  Endpoint Upstream(const FakeUpstream& fake) const {
    auto endpoint = ParseEndpoint(fake.url());
    EXPECT_TRUE(endpoint.ok());
    return *endpoint;
  }

  // Fetches and waits for the result.
  HttpFetchResult Fetch(const Endpoint& endpoint, HttpClientRequest request) {
    auto done = std::make_shared<std::promise<HttpFetchResult>>();
    std::future<HttpFetchResult> result = done->get_future();
    client_->Fetch(endpoint, std::move(request),
                   [done](HttpFetchResult fetched) { done->set_value(std::move(fetched)); });
    if (result.wait_for(kWait) != std::future_status::ready) {
      ADD_FAILURE() << "no answer within " << kWait.count() << " s";
      return {};
    }
    return result.get();
  }
  HttpFetchResult Fetch(HttpClientRequest request) {
    return Fetch(Upstream(fake_), std::move(request));
  }

  std::shared_ptr<RecordingSink> Stream(HttpClientRequest request, int pause_at = 0,
                                        HttpCall* call = nullptr) {
    auto sink = std::make_shared<RecordingSink>(pause_at);
    HttpCall sent = client_->Send(Upstream(fake_), std::move(request), sink);
    if (call != nullptr) *call = sent;
    return sink;
  }

  FakeUpstream fake_;
  std::unique_ptr<HttpClient> client_;
};

TEST(ParseEndpointTest, AcceptsHttpAndHttpsUrls) {
  auto plain = ParseEndpoint("http://upstream");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->tls);
  EXPECT_EQ(plain->host, "upstream");
  EXPECT_EQ(plain->port, 80);
  EXPECT_EQ(plain->path_prefix, "");

  auto secure = ParseEndpoint("https://vllm.internal:8443/openai/v1/");
  ASSERT_TRUE(secure.ok());
  EXPECT_TRUE(secure->tls);
  EXPECT_EQ(secure->port, 8443);
  EXPECT_EQ(secure->path_prefix, "/openai/v1");
  EXPECT_EQ(secure->Key(), "https://vllm.internal:8443");

  auto ipv6 = ParseEndpoint("http://[::1]:8000");
  ASSERT_TRUE(ipv6.ok());
  EXPECT_EQ(ipv6->host, "::1");
  EXPECT_EQ(ipv6->Key(), "http://[::1]:8000");
  EXPECT_EQ(ParseEndpoint("https://h")->port, 443);
}

TEST(ParseEndpointTest, RefusesBadUrls) {
  for (const char* url : {"", "ftp://h", "http://", "http://:80", "http://h:0", "http://h:65536",
                          "http://h:x", "http://h:", "http://user@h", "http://h/?q", "http://h#f",
                          "http://[::1", "http://[zz]", "http://h h", "http://h/a b"}) {
    auto endpoint = ParseEndpoint(url);
    ASSERT_FALSE(endpoint.ok()) << url;
    EXPECT_EQ(endpoint.status().code(), StatusCode::kInvalidArgument) << url;
    EXPECT_NE(endpoint.status().message().find("URL"), std::string::npos) << url;
  }
}

TEST(HttpHeadersTest, LooksNamesUpWithoutCase) {
  HttpHeaders headers;
  headers.Add("Content-Type", "text/event-stream");
  headers.Add("X-Request-Id", "1");
  headers.Add("x-request-id", "2");
  EXPECT_EQ(headers.Get("content-type"), "text/event-stream");
  EXPECT_EQ(headers.Get("X-REQUEST-ID"), "1");
  EXPECT_FALSE(headers.Get("retry-after").has_value());
  headers.Set("X-Request-ID", "3");
  EXPECT_EQ(headers.size(), 2u);
  EXPECT_EQ(headers.Get("x-request-id"), "3");
  EXPECT_EQ(headers.name(1), "X-Request-ID");
}

TEST_F(HttpClientTest, FetchesModelsAndSendsHeaders) {
  HttpClientRequest request = Get("/v1/models");
  request.headers.Add("Authorization", "Bearer secret");
  request.headers.Add("X-Extra", "yes");
  HttpFetchResult result = Fetch(std::move(request));
  ASSERT_TRUE(result.status.ok()) << result.status.ToString();
  EXPECT_EQ(result.error, HttpClientError::kNone);
  EXPECT_EQ(result.response.status, 200);
  EXPECT_EQ(result.response.headers.Get("CONTENT-TYPE"), "application/json");
  EXPECT_NE(result.response.body.find("fake-model"), std::string::npos);
  EXPECT_EQ(fake_.requests("/v1/models"), 1);
  EXPECT_EQ(fake_.last_header("authorization"), "Bearer secret");
  EXPECT_EQ(fake_.last_header("x-extra"), "yes");
  EXPECT_EQ(fake_.last_header("host"), "127.0.0.1:" + std::to_string(fake_.port()));
}

TEST_F(HttpClientTest, PostsBodiesAndPrefixesPaths) {
  auto endpoint = ParseEndpoint(fake_.url() + "/v1");
  ASSERT_TRUE(endpoint.ok());
  HttpClientRequest request;
  request.method = "POST";
  request.target = "/embeddings";
  request.body = R"({"model":"fake-model","input":"hello"})";
  HttpFetchResult result = Fetch(*endpoint, request);
  ASSERT_TRUE(result.status.ok()) << result.status.ToString();
  EXPECT_NE(result.response.body.find("embedding"), std::string::npos);
  EXPECT_EQ(fake_.requests("/v1/embeddings"), 1);
  EXPECT_EQ(fake_.last_body(), request.body);

  result = Fetch(Chat(/*stream=*/false));
  ASSERT_TRUE(result.status.ok());
  EXPECT_NE(result.response.body.find("chat.completion"), std::string::npos)
      << result.response.status << " " << result.response.body;
}

TEST_F(HttpClientTest, StreamsServerSentEventsAsTheyArrive) {
  auto sink = Stream(Chat(/*stream=*/true));
  ASSERT_TRUE(sink->WaitDone());
  ASSERT_TRUE(sink->status().ok()) << sink->status().ToString();
  EXPECT_EQ(sink->heads(), 1);
  EXPECT_EQ(sink->completions(), 1);
  EXPECT_EQ(sink->headers().Get("content-type"), "text/event-stream");
  const std::string body = sink->body();
  EXPECT_NE(body.find("data: {"), std::string::npos);
  EXPECT_NE(body.find("tok2"), std::string::npos);
  EXPECT_EQ(body.substr(body.size() - 14), "data: [DONE]\n\n");
  EXPECT_GE(sink->pieces(), 1);
}

TEST_F(HttpClientTest, ReusesAKeptAliveConnection) {
  ASSERT_TRUE(Fetch(Get("/health")).status.ok());
  ASSERT_TRUE(Fetch(Chat(/*stream=*/true)).status.ok());
  ASSERT_TRUE(Fetch(Get("/v1/models")).status.ok());
  EXPECT_EQ(fake_.connections_accepted(), 1);
  EXPECT_EQ(client_->stats().connections_opened, 1u);
  EXPECT_EQ(client_->stats().connections_reused, 2u);
  EXPECT_EQ(client_->stats().calls, 3u);
}

TEST_F(HttpClientTest, CallsPastTheConnectionLimitWaitForAFreeOne) {
  MakeClient({.max_connections_per_endpoint = 1});
  fake_.PushOnce({.fault = UpstreamFault::kDelayFirstByte, .delay = 100ms});
  auto first = Stream(Get("/health"));
  auto second = Stream(Get("/v1/models"));
  ASSERT_TRUE(first->WaitDone());
  ASSERT_TRUE(second->WaitDone());
  EXPECT_TRUE(first->status().ok());
  EXPECT_TRUE(second->status().ok()) << second->status().ToString();
  EXPECT_EQ(fake_.connections_accepted(), 1);
}

TEST_F(HttpClientTest, AWaitForAFreeConnectionTimesOut) {
  MakeClient({.max_connections_per_endpoint = 1});
  fake_.PushOnce({.fault = UpstreamFault::kHang});
  HttpCall hanging;
  auto first = Stream(Get("/health"), 0, &hanging);
  ASSERT_TRUE(fake_.WaitFor([&] { return fake_.requests("/health") == 1; }));
  HttpClientRequest request = Get("/health");
  request.timeouts.connect = 100ms;
  auto second = Stream(std::move(request));
  ASSERT_TRUE(second->WaitDone());
  EXPECT_EQ(second->error(), HttpClientError::kConnectTimeout);
  EXPECT_EQ(second->status().code(), StatusCode::kUnavailable);
  hanging.Cancel();
  ASSERT_TRUE(first->WaitDone());
}

TEST_F(HttpClientTest, ADeadPooledConnectionIsReplaced) {
  fake_.PushOnce({.fault = UpstreamFault::kCloseAfterAnswer});
  ASSERT_TRUE(Fetch(Get("/health")).status.ok());
  ASSERT_TRUE(fake_.WaitFor([&] { return fake_.connections_ended() == 1; }));
  HttpFetchResult result = Fetch(Get("/health"));
  ASSERT_TRUE(result.status.ok()) << result.status.ToString();
  EXPECT_EQ(fake_.connections_accepted(), 2);
  EXPECT_EQ(client_->stats().connections_reused, 0u);
  EXPECT_EQ(client_->stats().connections_opened, 2u);
}

TEST_F(HttpClientTest, IdleConnectionsAreClosedAfterTheirTimeout) {
  MakeClient({.idle_connection_timeout = 50ms});
  ASSERT_TRUE(Fetch(Get("/health")).status.ok());
  EXPECT_TRUE(fake_.WaitFor([&] { return fake_.connections_closed() == 1; }));
}

TEST_F(HttpClientTest, FirstByteTimeout) {
  fake_.PushOnce({.fault = UpstreamFault::kHang});
  HttpClientRequest request = Chat(/*stream=*/true);
  request.timeouts.first_byte = 100ms;
  HttpFetchResult result = Fetch(std::move(request));
  EXPECT_EQ(result.error, HttpClientError::kFirstByteTimeout);
  EXPECT_EQ(result.status.code(), StatusCode::kUnavailable);
  EXPECT_NE(result.status.message().find("no response"), std::string::npos);
  // The connection is closed, not pooled.
  EXPECT_TRUE(fake_.WaitFor([&] { return fake_.connections_closed() == 1; }));
}

TEST_F(HttpClientTest, AFirstByteWithinItsTimeoutIsFine) {
  fake_.PushOnce({.fault = UpstreamFault::kDelayFirstByte, .delay = 50ms});
  HttpClientRequest request = Get("/health");
  request.timeouts.first_byte = 5s;
  EXPECT_TRUE(Fetch(std::move(request)).status.ok());
}

TEST_F(HttpClientTest, IdleTimeoutBetweenChunks) {
  fake_.PushOnce({.fault = UpstreamFault::kStallStream, .chunks = 1});
  HttpClientRequest request = Chat(/*stream=*/true);
  request.timeouts.idle = 100ms;
  auto sink = Stream(std::move(request));
  ASSERT_TRUE(sink->WaitDone());
  EXPECT_EQ(sink->error(), HttpClientError::kIdleTimeout);
  EXPECT_EQ(sink->heads(), 1);
  EXPECT_NE(sink->body().find("tok0"), std::string::npos);
  EXPECT_TRUE(fake_.WaitFor([&] { return fake_.connections_closed() == 1; }));
}

TEST_F(HttpClientTest, TotalDeadline) {
  fake_.PushOnce({.fault = UpstreamFault::kStallStream, .chunks = 1});
  HttpClientRequest request = Chat(/*stream=*/true);
  request.timeouts.total = 150ms;
  auto sink = Stream(std::move(request));
  ASSERT_TRUE(sink->WaitDone());
  EXPECT_EQ(sink->error(), HttpClientError::kDeadlineExceeded);
  EXPECT_EQ(sink->completions(), 1);
}

TEST_F(HttpClientTest, ConnectionRefused) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  ::close(fd);  // bound, never listened: the port refuses
  auto endpoint = ParseEndpoint("http://127.0.0.1:" + std::to_string(ntohs(address.sin_port)));
  HttpFetchResult result = Fetch(*endpoint, Get("/health"));
  EXPECT_EQ(result.error, HttpClientError::kConnectFailed);
  EXPECT_EQ(result.status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(client_->stats().connections_failed, 1u);
}

TEST_F(HttpClientTest, ConnectTimeout) {
  // A listener whose accept queue is full drops further connection attempts unanswered.
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(listener, 0), 0);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
  std::vector<int> fillers;
  for (int i = 0; i < 4; ++i) {  // more than the queue holds; the rest wait in SYN_SENT
    const int filler = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    ::connect(filler, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    fillers.push_back(filler);
  }
  auto endpoint = ParseEndpoint("http://127.0.0.1:" + std::to_string(ntohs(address.sin_port)));
  HttpClientRequest request = Get("/health");
  request.timeouts.connect = 200ms;
  HttpFetchResult result = Fetch(*endpoint, std::move(request));
  EXPECT_EQ(result.error, HttpClientError::kConnectTimeout) << result.status.ToString();
  EXPECT_NE(result.status.message().find("timed out"), std::string::npos);
  for (int filler : fillers) ::close(filler);
  ::close(listener);
}

TEST_F(HttpClientTest, CancelMidStreamClosesTheConnection) {
  fake_.PushOnce({.fault = UpstreamFault::kStallStream, .chunks = 1});
  HttpCall call;
  auto sink = Stream(Chat(/*stream=*/true), 0, &call);
  ASSERT_TRUE(sink->WaitPieces(1));
  call.Cancel();
  ASSERT_TRUE(sink->WaitDone());
  EXPECT_EQ(sink->error(), HttpClientError::kCancelled);
  EXPECT_EQ(sink->status().code(), StatusCode::kCancelled);
  EXPECT_TRUE(fake_.WaitFor([&] { return fake_.connections_closed() == 1; }));
  call.Cancel();  // again, and after the end: nothing more
  ASSERT_TRUE(Fetch(Get("/health")).status.ok());
  EXPECT_EQ(sink->completions(), 1);
  EXPECT_EQ(fake_.connections_accepted(), 2);  // the cancelled connection was not pooled
}

TEST_F(HttpClientTest, CancelRightAfterSendCompletesOnce) {
  for (int i = 0; i < 20; ++i) {
    HttpCall call;
    auto sink = Stream(Get("/health"), 0, &call);
    call.Cancel();
    ASSERT_TRUE(sink->WaitDone());
    EXPECT_EQ(sink->completions(), 1);
    EXPECT_TRUE(sink->error() == HttpClientError::kCancelled ||
                sink->error() == HttpClientError::kNone);
  }
}

TEST_F(HttpClientTest, APausedSinkHoldsTheServerBack) {
  constexpr uint64_t kBody = 128ull << 20;
  fake_.PushOnce({.fault = UpstreamFault::kHugeBody, .huge_bytes = kBody});
  HttpClientRequest request = Get("/huge");
  request.max_response_bytes = kBody;
  request.timeouts.idle = 50ms;  // shorter than the pause below: a paused call does not idle out
  HttpCall call;
  auto sink = Stream(std::move(request), /*pause_at=*/1, &call);
  ASSERT_TRUE(sink->WaitPieces(1));
  // The fake's writes stall once the socket buffers are full: the client reads nothing more.
  ASSERT_TRUE(fake_.WaitFor([&] { return fake_.stalls() >= 2; }))
      << fake_.body_bytes_sent() << " " << sink->pieces() << " " << sink->completions() << " "
      << sink->status().ToString();
  EXPECT_LT(fake_.body_bytes_sent(), 32ull << 20);
  EXPECT_EQ(sink->pieces(), 1);
  EXPECT_EQ(sink->completions(), 0);
  sink->StopPausing();
  call.Resume();
  ASSERT_TRUE(sink->WaitDone());
  ASSERT_TRUE(sink->status().ok()) << sink->status().ToString();
  EXPECT_EQ(sink->body().size(), kBody);
}

TEST_F(HttpClientTest, ResponsesOverTheLimitFail) {
  fake_.PushOnce({.fault = UpstreamFault::kHugeBody, .huge_bytes = 2 << 20});
  HttpClientRequest request = Get("/huge");
  request.max_response_bytes = 1 << 20;
  HttpFetchResult result = Fetch(std::move(request));
  EXPECT_EQ(result.error, HttpClientError::kResponseTooLarge);
  EXPECT_EQ(result.status.code(), StatusCode::kPayloadTooLarge);

  request = Chat(/*stream=*/true);  // chunked: the limit counts the chunks as they come
  request.max_response_bytes = 100;
  result = Fetch(std::move(request));
  EXPECT_EQ(result.error, HttpClientError::kResponseTooLarge);
}

TEST_F(HttpClientTest, ReadsChunkedAndCloseDelimitedBodies) {
  fake_.PushOnce({.fault = UpstreamFault::kRaw,
                  .raw = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                         "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer: x\r\n\r\n"});
  HttpFetchResult result = Fetch(Get("/chunked"));
  ASSERT_TRUE(result.status.ok()) << result.status.ToString();
  EXPECT_EQ(result.response.body, "hello world");

  fake_.PushOnce({.fault = UpstreamFault::kRaw,
                  .raw = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end"});
  result = Fetch(Get("/close"));
  ASSERT_TRUE(result.status.ok()) << result.status.ToString();
  EXPECT_EQ(result.response.body, "until the end");

  fake_.PushOnce(
      {.fault = UpstreamFault::kRaw, .raw = "HTTP/1.0 200 OK\r\nContent-Length: 4\r\n\r\nbody"});
  result = Fetch(Get("/length"));
  ASSERT_TRUE(result.status.ok()) << result.status.ToString();
  EXPECT_EQ(result.response.body, "body");
}

TEST_F(HttpClientTest, MalformedResponsesFail) {
  for (const char* raw : {"garbage\r\n\r\n", "HTTP/1.1 2000 OK\r\n\r\n",
                          "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
                          "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n",
                          "HTTP/1.1 200 OK\r\nBad Header\r\n\r\n"}) {
    fake_.PushOnce({.fault = UpstreamFault::kRaw, .raw = raw});
    HttpFetchResult result = Fetch(Get("/bad"));
    EXPECT_EQ(result.error, HttpClientError::kMalformedResponse) << raw;
    EXPECT_EQ(result.status.code(), StatusCode::kUnavailable) << raw;
  }
}

TEST_F(HttpClientTest, ConnectionClosedMidResponse) {
  fake_.PushOnce({.fault = UpstreamFault::kCloseMidResponse});
  HttpFetchResult result = Fetch(Chat(/*stream=*/false));
  EXPECT_EQ(result.error, HttpClientError::kConnectionClosed);
  EXPECT_EQ(result.response.status, 200);

  fake_.PushOnce({.fault = UpstreamFault::kCutStream, .chunks = 2});
  auto sink = Stream(Chat(/*stream=*/true));
  ASSERT_TRUE(sink->WaitDone());
  EXPECT_EQ(sink->error(), HttpClientError::kConnectionClosed);
  EXPECT_NE(sink->body().find("tok1"), std::string::npos);
  EXPECT_EQ(sink->body().find("tok2"), std::string::npos);

  fake_.PushOnce({.fault = UpstreamFault::kRaw, .raw = ""});
  result = Fetch(Get("/nothing"));
  EXPECT_EQ(result.error, HttpClientError::kConnectionClosed);
  EXPECT_NE(result.status.message().find("without responding"), std::string::npos);
}

TEST_F(HttpClientTest, ErrorStatusesAreResponsesNotFailures) {
  fake_.PushOnce({.fault = UpstreamFault::kStatus, .status = 503});
  HttpFetchResult result = Fetch(Chat(/*stream=*/false));
  ASSERT_TRUE(result.status.ok());
  EXPECT_EQ(result.response.status, 503);

  fake_.PushOnce({.fault = UpstreamFault::kTooManyRequests, .retry_after = 7});
  result = Fetch(Chat(/*stream=*/false));
  EXPECT_EQ(result.response.status, 429);
  EXPECT_EQ(result.response.headers.Get("retry-after"), "7");

  fake_.PushOnce({.fault = UpstreamFault::kInvalidJson});
  result = Fetch(Chat(/*stream=*/false));
  EXPECT_EQ(result.response.status, 200);
  EXPECT_NE(result.response.body.find("oops"), std::string::npos);
  EXPECT_EQ(fake_.connections_accepted(), 1);  // all on one kept-alive connection
}

TEST_F(HttpClientTest, AnUpstreamThatDoesNotReadTheRequestTimesOut) {
  fake_.PushOnce({.fault = UpstreamFault::kStopReading});
  HttpClientRequest request = Chat(/*stream=*/false);
  request.body.assign(16 << 20, ' ');  // more than the socket buffers take
  request.timeouts.first_byte = 200ms;
  HttpFetchResult result = Fetch(std::move(request));
  EXPECT_EQ(result.error, HttpClientError::kFirstByteTimeout);
  EXPECT_NE(result.status.message().find("did not take the request"), std::string::npos);

  fake_.PushOnce({.fault = UpstreamFault::kReadSlowly, .delay = 1ms});
  request = Chat(/*stream=*/false);
  request.body.resize(request.body.size() + 32 * 1024, ' ');
  result = Fetch(std::move(request));
  EXPECT_TRUE(result.status.ok()) << result.status.ToString();
}

TEST_F(HttpClientTest, InvalidRequestsAreRefused) {
  HttpFetchResult result = Fetch(Get("no-slash"));
  EXPECT_EQ(result.error, HttpClientError::kInvalidRequest);
  EXPECT_EQ(result.status.code(), StatusCode::kInvalidArgument);
  HttpClientRequest request = Get("/health");
  request.headers.Add("X-Injected", "a\r\nEvil: yes");
  EXPECT_EQ(Fetch(std::move(request)).error, HttpClientError::kInvalidRequest);
  request = Get("/health");
  request.headers.Add("Content-Length", "5");
  EXPECT_EQ(Fetch(std::move(request)).error, HttpClientError::kInvalidRequest);
  request = Get("/health");
  request.method = "GE T";
  EXPECT_EQ(Fetch(std::move(request)).error, HttpClientError::kInvalidRequest);
  EXPECT_EQ(fake_.total_requests(), 0);
}

TEST_F(HttpClientTest, DestroyingTheClientCompletesCallsInFlight) {
  fake_.PushOnce({.fault = UpstreamFault::kHang});
  auto sink = Stream(Get("/health"));
  ASSERT_TRUE(fake_.WaitFor([&] { return fake_.requests("/health") == 1; }));
  client_.reset();
  EXPECT_EQ(sink->completions(), 1);
  EXPECT_EQ(sink->error(), HttpClientError::kShutdown);
}

TEST(HttpClientCreateTest, RefusesUnusableTlsFiles) {
  auto created = HttpClient::Create({.tls = {.ca_file = "/nonexistent/ca.pem"}});
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), StatusCode::kInvalidArgument);
  created = HttpClient::Create({.tls = {.cert_file = "/tmp/cert.pem"}});
  EXPECT_FALSE(created.ok());
  EXPECT_FALSE(HttpClient::Create({.threads = 0}).ok());
}

class HttpClientTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = std::filesystem::path(::testing::TempDir()) /
                 ("rampart_client_tls_" + std::to_string(getpid()) + "_" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(directory_);
    ca_ = testing::MakeCertificateAuthority("rampart test CA");
    server_ = testing::MakeLeafCertificate(ca_, "rampart test upstream");
    client_identity_ = testing::MakeLeafCertificate(ca_, "rampart test gateway");
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(directory_ / name) << text;
    return (directory_ / name).string();
  }

  HttpFetchResult FetchWith(HttpClientTlsOptions tls, const std::string& url) {
    auto client = HttpClient::Create({.tls = std::move(tls)});
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    auto endpoint = ParseEndpoint(url);
    EXPECT_TRUE(endpoint.ok());
    std::promise<HttpFetchResult> done;
    (*client)->Fetch(*endpoint, Get("/v1/models"),
                     [&](HttpFetchResult result) { done.set_value(std::move(result)); });
    auto future = done.get_future();
    EXPECT_EQ(future.wait_for(kWait), std::future_status::ready);
    return future.get();
  }

  std::filesystem::path directory_;
  testing::KeyAndCert ca_, server_, client_identity_;
};

TEST_F(HttpClientTlsTest, FetchesOverHttpsTrustingTheGivenCa) {
  FakeUpstream fake({.tls_cert_pem = server_.cert_pem, .tls_key_pem = server_.key_pem});
  const std::string ca = Write("ca.pem", ca_.cert_pem);
  HttpFetchResult result = FetchWith({.ca_file = ca}, fake.url());  // by IP address
  ASSERT_TRUE(result.status.ok()) << result.status.ToString();
  EXPECT_EQ(result.response.status, 200);
  // By name: resolved, sent as SNI and checked against the certificate.
  result = FetchWith({.ca_file = ca}, "https://localhost:" + std::to_string(fake.port()));
  ASSERT_TRUE(result.status.ok()) << result.status.ToString();
  EXPECT_EQ(fake.requests("/v1/models"), 2);
}

TEST_F(HttpClientTlsTest, AnUntrustedServerFails) {
  FakeUpstream fake({.tls_cert_pem = server_.cert_pem, .tls_key_pem = server_.key_pem});
  const testing::KeyAndCert other = testing::MakeCertificateAuthority("some other CA");
  HttpFetchResult result = FetchWith({.ca_file = Write("other.pem", other.cert_pem)}, fake.url());
  EXPECT_EQ(result.error, HttpClientError::kTlsFailed);
  EXPECT_NE(result.status.message().find("certificate verify failed"), std::string::npos)
      << result.status.message();
  EXPECT_EQ(fake.total_requests(), 0);
}

TEST_F(HttpClientTlsTest, MutualTls) {
  FakeUpstream fake({.tls_cert_pem = server_.cert_pem,
                     .tls_key_pem = server_.key_pem,
                     .client_ca_pem = ca_.cert_pem});
  const std::string ca = Write("ca.pem", ca_.cert_pem);
  HttpFetchResult result = FetchWith({.ca_file = ca,
                                      .cert_file = Write("client.pem", client_identity_.cert_pem),
                                      .key_file = Write("client.key", client_identity_.key_pem)},
                                     fake.url());
  ASSERT_TRUE(result.status.ok()) << result.status.ToString();
  // Without a certificate the server refuses (TLS 1.3 says so after the client's handshake).
  result = FetchWith({.ca_file = ca}, fake.url());
  EXPECT_FALSE(result.status.ok());
  EXPECT_TRUE(result.error == HttpClientError::kTlsFailed ||
              result.error == HttpClientError::kConnectionClosed ||
              result.error == HttpClientError::kSendFailed)
      << HttpClientErrorName(result.error);
  EXPECT_EQ(fake.requests("/v1/models"), 1);
}

}  // namespace
}  // namespace rampart::net
