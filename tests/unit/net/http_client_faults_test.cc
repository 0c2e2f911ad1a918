// HttpClient against a misbehaving FakeUpstream: timeouts, limits, malformed and cut answers.

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "http_client_test_support.h"

namespace rampart::net {
namespace {

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

}  // namespace
}  // namespace rampart::net
