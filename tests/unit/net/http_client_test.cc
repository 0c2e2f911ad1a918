// HttpClient against FakeUpstream: endpoints, headers, bodies, pooling, cancellation, backpressure.

#include "net/http_client.h"

#include <gtest/gtest.h>

#include "http_client_test_support.h"

namespace rampart::net {
namespace {

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

TEST_F(HttpClientTest, APooledConnectionClosedAsTheRequestArrivesIsReplacedOnce) {
  ASSERT_TRUE(Fetch(Get("/health")).status.ok());  // leaves its connection in the pool
  // The server reads the next request on that connection and closes it unanswered: the request
  // goes again on a new connection.
  fake_.PushOnce({.fault = UpstreamFault::kCloseUnanswered});
  HttpFetchResult result = Fetch(Get("/health"));
  ASSERT_TRUE(result.status.ok()) << result.status.ToString();
  EXPECT_EQ(fake_.requests("/health"), 3);
  EXPECT_EQ(client_->stats().connections_reused, 1u);
  EXPECT_EQ(client_->stats().connections_opened, 2u);
  EXPECT_EQ(client_->stats().retries, 1u);

  // Once only: when the new connection is closed unanswered too, the call fails.
  fake_.PushOnce({.fault = UpstreamFault::kCloseUnanswered});
  fake_.PushOnce({.fault = UpstreamFault::kCloseUnanswered});
  result = Fetch(Get("/health"));
  EXPECT_EQ(result.error, HttpClientError::kConnectionClosed) << result.status.ToString();
  EXPECT_NE(result.status.message().find("without responding"), std::string::npos);
  EXPECT_EQ(client_->stats().retries, 2u);
}

TEST_F(HttpClientTest, IdleConnectionsAreClosedAfterTheirTimeout) {
  MakeClient({.idle_connection_timeout = 50ms});
  ASSERT_TRUE(Fetch(Get("/health")).status.ok());
  EXPECT_TRUE(fake_.WaitFor([&] { return fake_.connections_closed() == 1; }));
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

TEST_F(HttpClientTest, DestroyingTheClientCompletesCallsInFlight) {
  fake_.PushOnce({.fault = UpstreamFault::kHang});
  auto sink = Stream(Get("/health"));
  ASSERT_TRUE(fake_.WaitFor([&] { return fake_.requests("/health") == 1; }));
  client_.reset();
  EXPECT_EQ(sink->completions(), 1);
  EXPECT_EQ(sink->error(), HttpClientError::kShutdown);
}

}  // namespace
}  // namespace rampart::net
