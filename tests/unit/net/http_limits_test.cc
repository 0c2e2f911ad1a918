// The HTTP server's limits on slow and greedy clients: the idle, head and body deadlines (on a
// fake clock: no test waits for real time to pass), open connections, and the bytes of bodies
// being read at once.

#include <gtest/gtest.h>

#include <sys/socket.h>

#include <atomic>
#include <future>
#include <new>
#include <string>

#include "http_test_support.h"
#include "net/http_connection.h"
#include "testing/eventually.h"
#include "unread_answer.h"

namespace rampart::net {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A raw client connection with bounded receives.
class RawConnection {
 public:
  explicit RawConnection(uint16_t port) : socket_(context_) {
    socket_.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    BoundReceives(socket_);
  }
  void Send(const std::string& bytes) { asio::write(socket_, asio::buffer(bytes)); }
  // Everything until the server ends the connection.
  std::string ReadAll() { return ReadToEnd(socket_.native_handle()); }
  // Whether the server has sent anything (or ended the connection) yet, without waiting.
  bool AnythingToRead() {
    char byte = 0;
    return ::recv(socket_.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT) >= 0;
  }
  // Reads one whole response (the connection stays open).
  http::response<http::string_body> ReadResponse() {
    http::response<http::string_body> response;
    http::read(socket_, buffer_, response);
    return response;
  }
  void Close() { socket_.close(); }

 private:
  asio::io_context context_;
  asio::ip::tcp::socket socket_;
  beast::flat_buffer buffer_;
};

class HttpLimitsTest : public HttpServerTest {
 protected:
  uint64_t Refused(HttpRefusal refusal) const {
    return server_->stats().refused[static_cast<size_t>(refusal)];
  }
};

TEST_F(HttpLimitsTest, IdleConnectionIsClosedAtTheTimeout) {
  Start(Echo, 1 << 20, /*idle_timeout=*/seconds(30));
  RawConnection client(server_->port());
  client.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(client.ReadResponse().result_int(), 200);
  Settle();
  Advance(seconds(30) - milliseconds(1));
  EXPECT_FALSE(client.AnythingToRead());  // still open, waiting for the next request
  Advance(milliseconds(1));
  EXPECT_EQ(client.ReadAll(), "");  // closed, without an answer: no request was begun
  EXPECT_EQ(Refused(HttpRefusal::kHeaderTimeout), 0u);
}

// A connection that never sends a byte is closed at the header timeout, not the (longer) idle
// timeout: silent connections cannot hold the places under max_connections for long.
TEST_F(HttpLimitsTest, ANewConnectionsFirstByteIsDueAtTheHeaderTimeout) {
  StartWith(Echo, [](HttpServerOptions& options) {
    options.idle_timeout = seconds(300);
    options.header_timeout = seconds(20);
  });
  RawConnection silent(server_->port());
  Settle();  // accepted and waiting
  Advance(seconds(20) - milliseconds(1));
  EXPECT_FALSE(silent.AnythingToRead());
  Advance(milliseconds(1));
  EXPECT_EQ(silent.ReadAll(), "");
  EXPECT_EQ(Refused(HttpRefusal::kHeaderTimeout), 0u);  // no request was begun
}

// An answer whose building throws (out of memory) ends the connection, and the request no
// longer counts as in flight: a shutdown does not wait for an answer that cannot come.
TEST_F(HttpLimitsTest, AnAnswerThatCannotBeBuiltEndsTheConnection) {
  Start([](HttpRequest&&, Responder responder) {
    responder.SendWith([]() -> HttpResponse { throw std::bad_alloc(); });
  });
  RawConnection client(server_->port());
  client.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(client.ReadAll(), "");
  const auto started = std::chrono::steady_clock::now();
  server_->Shutdown(seconds(20));
  EXPECT_LT(std::chrono::steady_clock::now() - started, seconds(10));
  EXPECT_EQ(server_->stats().requests, 0u);
}

// An answer the client does not take (it stops reading) is given up after the idle timeout:
// the connection is closed and the request stops counting as in flight, so a shutdown does not
// wait for it.
TEST_F(HttpLimitsTest, AnswerTheClientDoesNotTakeIsGivenUpAfterTheTimeout) {
  std::promise<void> answered;
  Start(
      [&](HttpRequest&&, Responder responder) {
        HttpResponse response;
        response.body.assign(kUnreadBodyBytes, 'x');
        responder.Send(std::move(response));
        answered.set_value();
      },
      1 << 20, /*idle_timeout=*/seconds(30));
  RawConnection client(server_->port());
  client.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  answered.get_future().wait();  // and never read
  ExpectShutdownGivesUpTheUnreadAnswer(*server_, clock_, seconds(30));
}

// The head must be whole within the header timeout of its first byte, however its bytes trickle
// in (a client sending a header line now and then holds no connection).
TEST_F(HttpLimitsTest, AHeadTricklingInIsAnswered408AtTheHeaderTimeout) {
  StartWith(Echo, [](HttpServerOptions& options) { options.header_timeout = seconds(20); });
  RawConnection client(server_->port());
  client.Send("GET / HTTP/1.1\r\n");
  Settle();
  for (const char* line : {"X-A: 1\r\n", "X-B: 2\r\n", "X-C: 3\r\n"}) {
    Advance(seconds(6));  // 18 s in all
    client.Send(line);
    Settle();
  }
  Advance(seconds(1));
  EXPECT_FALSE(client.AnythingToRead());
  Advance(seconds(1));  // 20 s after the first byte
  const std::string received = client.ReadAll();
  EXPECT_EQ(received.rfind("HTTP/1.1 408 Request Timeout\r\n", 0), 0u) << received;
  EXPECT_NE(received.find("--http-header-timeout-secs"), std::string::npos) << received;
  EXPECT_EQ(Refused(HttpRefusal::kHeaderTimeout), 1u);
}

// A body must keep the minimum rate: each body_min_rate bytes buy a second more than the body
// timeout. One that keeps it is read however long it takes in all.
TEST_F(HttpLimitsTest, ABodyKeepingTheMinimumRateIsReadHoweverLongItTakes) {
  StartWith(Echo, [](HttpServerOptions& options) {
    options.body_timeout = seconds(2);
    options.body_min_rate = 100;
  });
  RawConnection client(server_->port());
  client.Send(
      "POST /slow HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 1000\r\n\r\n");
  Settle();
  for (int part = 0; part < 10; ++part) {
    client.Send(std::string(100, 'a'));
    Settle();
    // 100 bytes every 0.9 s keep the rate: due 2 s + (part + 1) s after the body began.
    Advance(milliseconds(900));
    if (part < 9) {
      EXPECT_FALSE(client.AnythingToRead()) << "part " << part;
    }
  }
  const std::string received = client.ReadAll();
  EXPECT_EQ(received.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << received.substr(0, 200);
  EXPECT_EQ(Refused(HttpRefusal::kBodyTimeout), 0u);
}

TEST_F(HttpLimitsTest, ABodyTricklingBelowTheMinimumRateIsAnswered408) {
  StartWith(Echo, [](HttpServerOptions& options) {
    options.body_timeout = seconds(20);
    options.body_min_rate = 500;
  });
  RawConnection client(server_->port());
  client.Send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" +
              std::string(100, 'a'));
  Settle();
  Advance(milliseconds(20199));  // 100 bytes at 500 B/s buy 200 ms
  EXPECT_FALSE(client.AnythingToRead());
  Advance(milliseconds(1));
  const std::string received = client.ReadAll();
  EXPECT_EQ(received.rfind("HTTP/1.1 408 Request Timeout\r\n", 0), 0u) << received;
  EXPECT_NE(received.find("--http-body-min-rate"), std::string::npos) << received;
  EXPECT_EQ(Refused(HttpRefusal::kBodyTimeout), 1u);
}

TEST_F(HttpLimitsTest, ConnectionsPastTheLimitAreAnswered503AndTheOthersServeOn) {
  std::atomic<int> told{0};
  StartWith(Echo, [&](HttpServerOptions& options) {
    options.max_connections = 2;
    options.on_refused = [&](HttpRefusal refusal) {
      if (refusal == HttpRefusal::kConnections) ++told;
    };
  });
  // Two connections in, each proven by an answer.
  auto first = std::make_unique<Client>(server_->port());
  Client second(server_->port());
  EXPECT_EQ(first->Send(http::verb::get, "/").result_int(), 200);
  EXPECT_EQ(second.Send(http::verb::get, "/").result_int(), 200);
  // (Sending nothing: bytes the server had not drained when it closed would reset the
  // connection, a race this test need not run.)
  RawConnection third(server_->port());
  const std::string refused = third.ReadAll();
  EXPECT_EQ(refused.rfind("HTTP/1.1 503 Service Unavailable\r\n", 0), 0u) << refused;
  EXPECT_NE(refused.find("Retry-After: 1\r\n"), std::string::npos) << refused;
  EXPECT_NE(refused.find("--http-max-connections"), std::string::npos) << refused;
  EXPECT_EQ(Refused(HttpRefusal::kConnections), 1u);
  EXPECT_EQ(told.load(), 1);
  EXPECT_EQ(second.Send(http::verb::get, "/").result_int(), 200);  // unaffected
  // A connection that ends makes room.
  first.reset();
  ASSERT_TRUE(testing::Eventually([&] { return server_->stats().open_connections == 1; }));
  Client fourth(server_->port());
  EXPECT_EQ(fourth.Send(http::verb::get, "/").result_int(), 200);
}

TEST_F(HttpLimitsTest, BodiesPastTheBytesInFlightAreAnswered503UntilTheOthersAreRead) {
  StartWith(Echo, [](HttpServerOptions& options) { options.max_body_bytes_in_flight = 1000; });
  RawConnection holding(server_->port());
  holding.Send("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 800\r\n\r\n");
  Settle();
  EXPECT_EQ(server_->stats().body_bytes_in_flight, 800u);  // declared, counted in full

  RawConnection declared(server_->port());
  declared.Send("POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 300\r\n\r\n" +
                std::string(300, 'b'));
  const std::string refused = declared.ReadAll();
  EXPECT_EQ(refused.rfind("HTTP/1.1 503 Service Unavailable\r\n", 0), 0u) << refused;
  EXPECT_NE(refused.find("--http-max-body-bytes-in-flight"), std::string::npos) << refused;
  // A chunked body counts as its chunks arrive.
  RawConnection chunked(server_->port());
  chunked.Send("POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n100\r\n" +
               std::string(256, 'c') + "\r\n");
  EXPECT_EQ(chunked.ReadAll().rfind("HTTP/1.1 503 ", 0), 0u);
  EXPECT_EQ(Refused(HttpRefusal::kBodiesInFlight), 2u);

  // Once the held body is read and handed over, its bytes are free again.
  holding.Send(std::string(800, 'a'));
  EXPECT_EQ(holding.ReadResponse().result_int(), 200);
  Settle();
  EXPECT_EQ(server_->stats().body_bytes_in_flight, 0u);
  Client again(server_->port());
  EXPECT_EQ(again.Send(http::verb::post, "/b", std::string(300, 'b')).result_int(), 200);
}

TEST_F(HttpLimitsTest, ABodyGivenUpMidwayFreesItsBytes) {
  StartWith(Echo, [](HttpServerOptions& options) { options.max_body_bytes_in_flight = 1000; });
  {
    RawConnection gone(server_->port());
    gone.Send("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 900\r\n\r\nabc");
    Settle();
    EXPECT_EQ(server_->stats().body_bytes_in_flight, 900u);
  }
  ASSERT_TRUE(testing::Eventually([&] { return server_->stats().body_bytes_in_flight == 0; }));
}

TEST(RequestDeadline, TheHeadIsDueFromItsFirstByteAndTheBodyAtItsMinimumRate) {
  HttpServerOptions options;
  options.header_timeout = seconds(20);
  options.body_timeout = seconds(10);
  options.body_min_rate = 1000;
  RequestDeadline deadline(options);
  EXPECT_FALSE(deadline.started());
  const SteadyTime start = SteadyTime() + seconds(100);
  deadline.HeadStarted(start);
  EXPECT_EQ(deadline.due(), start + seconds(20));
  EXPECT_EQ(deadline.refusal(), HttpRefusal::kHeaderTimeout);
  deadline.BodyStarted(start + seconds(1));
  EXPECT_EQ(deadline.due(), start + seconds(11));
  deadline.BodyReceived(2500);  // 2.5 s more
  EXPECT_EQ(deadline.due(), start + milliseconds(13500));
  EXPECT_EQ(deadline.refusal(), HttpRefusal::kBodyTimeout);
  deadline.BodyReceived(uint64_t{1} << 62);  // capped far inside the clock's range
  EXPECT_GT(deadline.due(), start);
  deadline.Reset();
  EXPECT_FALSE(deadline.started());

  options.body_min_rate = 0;  // the body timeout alone
  RequestDeadline absolute(options);
  absolute.HeadStarted(start);
  absolute.BodyStarted(start);
  absolute.BodyReceived(1 << 20);
  EXPECT_EQ(absolute.due(), start + seconds(10));
}

}  // namespace
}  // namespace rampart::net
