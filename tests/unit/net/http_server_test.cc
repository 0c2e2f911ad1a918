#include "net/http_server.h"
#include "http_test_support.h"
#include "unread_answer.h"

#include <gtest/gtest.h>

#include <sched.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "core/cpu_affinity.h"
#include "net/http_connection.h"

namespace rampart::net {
namespace {

TEST_F(HttpServerTest, ServesManyRequestsOnOneKeepAliveConnection) {
  Start([](HttpRequest&& request, Responder responder) {
    HttpResponse response;
    response.body = request.method + " " + std::string(request.path()) + " " +
                    std::string(request.query()) + " " + request.body + " " +
                    std::string(request.Header("x-test").value_or("-"));
    responder.Send(std::move(response));
  });
  Client client(server_->port());
  for (int i = 0; i < 50; ++i) {
    auto response = client.Send(http::verb::post, "/echo?n=" + std::to_string(i), "body");
    EXPECT_EQ(response.result_int(), 200);
    EXPECT_EQ(response.body(), "POST /echo n=" + std::to_string(i) + " body -");
    EXPECT_TRUE(response.keep_alive());
  }
  // A response is counted once its write completes; Shutdown waits for that.
  server_->Shutdown(std::chrono::seconds(5));
  EXPECT_EQ(server_->stats().requests, 50u);
}

TEST_F(HttpServerTest, EveryRequestCarriesItsConnectionsPeer) {
  std::mutex mutex;
  std::vector<std::shared_ptr<const Peer>> peers;
  Start([&](HttpRequest&& request, Responder responder) {
    {
      std::lock_guard lock(mutex);
      peers.push_back(request.peer);
    }
    responder.Send({});
  });
  Client client(server_->port());
  for (int i = 0; i < 3; ++i) client.Send(http::verb::get, "/", "");
  std::lock_guard lock(mutex);
  ASSERT_EQ(peers.size(), 3u);
  ASSERT_NE(peers[0], nullptr);
  EXPECT_EQ(peers[0]->address, "127.0.0.1");
  EXPECT_FALSE(peers[0]->has_certificate);
  // One Peer per connection, shared by its requests.
  EXPECT_EQ(peers[1], peers[0]);
  EXPECT_EQ(peers[2], peers[0]);
}

TEST_F(HttpServerTest, AnswersFromAnotherThread) {
  Start([](HttpRequest&&, Responder responder) {
    std::thread([responder = std::move(responder)]() mutable {
      responder.SendWith([] {
        HttpResponse response;
        response.status = 201;
        response.body = "later";
        return response;
      });
    }).detach();
  });
  Client client(server_->port());
  auto response = client.Send(http::verb::get, "/");
  EXPECT_EQ(response.result_int(), 201);
  EXPECT_EQ(response.body(), "later");
}

TEST_F(HttpServerTest, OversizedBodyGets413WithoutBeingRead) {
  Start([](HttpRequest&&, Responder responder) { responder.Send({}); }, /*max_body=*/1024);
  Client client(server_->port());
  auto response = client.SendHeadersOnly(1 << 30);
  EXPECT_EQ(response.result_int(), 413);
  EXPECT_NE(response.body().find("exceeds the 1024 byte limit"), std::string::npos);
  // The server keeps serving other connections.
  Client other(server_->port());
  EXPECT_EQ(other.Send(http::verb::get, "/").result_int(), 200);
}

TEST_F(HttpServerTest, DroppedResponderAnswers500) {
  Start([](HttpRequest&&, Responder) {});
  Client client(server_->port());
  auto response = client.Send(http::verb::get, "/");
  EXPECT_EQ(response.result_int(), 500);
  EXPECT_NE(response.body().find("dropped"), std::string::npos);
}

TEST_F(HttpServerTest, MalformedRequestGets400) {
  Start([](HttpRequest&&, Responder responder) { responder.Send({}); });
  asio::io_context context;
  asio::ip::tcp::socket socket(context);
  socket.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), server_->port()));
  asio::write(socket, asio::buffer(std::string("GARBAGE\r\n\r\n")));
  beast::flat_buffer buffer;
  http::response<http::string_body> response;
  http::read(socket, buffer, response);
  EXPECT_EQ(response.result_int(), 400);
}

TEST_F(HttpServerTest, ResponseHeadFollowsTheRequestsVersionAndKeepAlive) {
  Start([](HttpRequest&&, Responder responder) {
    HttpResponse response;
    response.status = 404;
    response.headers.emplace_back("X-Note", "one\r\nInjected: yes");
    response.body = "{}";
    responder.Send(std::move(response));
  });
  // HTTP/1.0 without keep-alive: answered as 1.0, then closed.
  const std::string old = Exchange(server_->port(), "GET / HTTP/1.0\r\n\r\n");
  EXPECT_EQ(old.rfind("HTTP/1.0 404 Not Found\r\n", 0), 0u) << old;
  EXPECT_NE(old.find("\r\nContent-Length: 2\r\n"), std::string::npos) << old;
  EXPECT_NE(old.find("\r\nX-Note: one  Injected: yes\r\n"), std::string::npos) << old;
  EXPECT_EQ(old.find("\r\nInjected"), std::string::npos) << old;
  EXPECT_EQ(old.substr(old.size() - 6), "\r\n\r\n{}");
  // HTTP/1.1 asking to close: says so.
  const std::string closing =
      Exchange(server_->port(), "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(closing.rfind("HTTP/1.1 404 Not Found\r\n", 0), 0u) << closing;
  EXPECT_NE(closing.find("\r\nConnection: close\r\n"), std::string::npos) << closing;
}

TEST_F(HttpServerTest, HeadIsAnsweredWithoutABodyAndTheConnectionGoesOn) {
  Start([](HttpRequest&& request, Responder responder) {
    HttpResponse response;
    response.status = request.path() == "/v2" ? 405 : 200;
    response.body = "{\"error\":\"Method Not Allowed\"}";
    responder.Send(std::move(response));
  });
  // HEAD then GET on one connection: any body after the HEAD answer would be read as the start
  // of the GET's answer.
  const std::string received = Exchange(server_->port(),
                                        "HEAD /v2 HTTP/1.1\r\nHost: x\r\n\r\nGET /v2/x "
                                        "HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  const std::string head_answer =
      "HTTP/1.1 405 Method Not Allowed\r\nServer: rampart\r\nContent-Type: application/json\r\n"
      "Content-Length: 30\r\n\r\n";
  EXPECT_EQ(received.rfind(head_answer, 0), 0u) << received;
  EXPECT_EQ(received.substr(head_answer.size()).rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << received;
  EXPECT_EQ(received.substr(received.size() - 30), "{\"error\":\"Method Not Allowed\"}");
}

// The handler keeps each request unanswered until the test lets it go.
struct HeldRequests {
  std::mutex mutex;
  std::condition_variable arrived;
  std::vector<std::pair<std::shared_ptr<const std::atomic<bool>>, Responder>> held;

  void Hold(HttpRequest&& request, Responder responder) {
    std::lock_guard lock(mutex);
    held.emplace_back(request.client_gone, std::move(responder));
    arrived.notify_all();
  }
  bool WaitFor(size_t count) {
    std::unique_lock lock(mutex);
    return arrived.wait_for(lock, std::chrono::seconds(10), [&] { return held.size() >= count; });
  }
  // Polls the request's flag (set by the server's I/O thread, which notifies nobody).
  bool Gone(size_t index, std::chrono::milliseconds within) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    std::shared_ptr<const std::atomic<bool>> gone;
    {
      std::lock_guard lock(mutex);
      gone = held.at(index).first;
    }
    while (!gone->load()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }
};

TEST_F(HttpServerTest, ClientHangingUpOnAnUnansweredRequestIsNoticed) {
  HeldRequests requests;
  Start([&](HttpRequest&& request, Responder responder) {
    requests.Hold(std::move(request), std::move(responder));
  });
  // One client waits for its answer on a keep-alive connection; another hangs up.
  Client waiting(server_->port());
  std::thread waiter([&] { EXPECT_EQ(waiting.Send(http::verb::get, "/").result_int(), 200); });
  ASSERT_TRUE(requests.WaitFor(1));
  {
    asio::io_context context;
    asio::ip::tcp::socket socket(context);
    socket.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), server_->port()));
    asio::write(socket, asio::buffer(std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n")));
    ASSERT_TRUE(requests.WaitFor(2));
  }  // closed
  EXPECT_TRUE(requests.Gone(1, std::chrono::seconds(10)));
  // Long enough for the sweep to arm the waiting client's watch (one to two periods).
  EXPECT_FALSE(requests.Gone(0, std::chrono::milliseconds(50)));
  // Answering either is harmless; the waiting client gets its answer.
  std::lock_guard lock(requests.mutex);
  for (auto& [gone, responder] : requests.held) responder.Send({});
  waiter.join();
}

TEST_F(HttpServerTest, IoThreadsRunOnTheirCpus) {
  const int target = AllowedCpus().back();
  Start(
      [](HttpRequest&&, Responder responder) {
        HttpResponse response;
        response.body = std::to_string(sched_getcpu());
        responder.Send(std::move(response));
      },
      1 << 20, std::chrono::seconds(300), {target});
  for (int i = 0; i < 4; ++i) {  // two threads: connections go to each in turn
    Client client(server_->port());
    EXPECT_EQ(client.Send(http::verb::get, "/").body(), std::to_string(target));
  }
}

TEST_F(HttpServerTest, IoThreadsUseBatchSchedulingWhenAsked) {
  for (bool sched_batch : {false, true}) {
    Start(
        [](HttpRequest&&, Responder responder) {
          HttpResponse response;
          response.body = sched_getscheduler(0) == SCHED_BATCH ? "batch" : "normal";
          responder.Send(std::move(response));
        },
        1 << 20, std::chrono::seconds(300), {}, sched_batch);
    for (int i = 0; i < 2; ++i) {  // both threads
      Client client(server_->port());
      EXPECT_EQ(client.Send(http::verb::get, "/").body(), sched_batch ? "batch" : "normal");
    }
    server_->Shutdown(std::chrono::seconds(5));
    server_.reset();
  }
}

// A client that sends its whole body without asking `Expect: 100-continue` (Python's requests,
// tritonclient.http) is refused after the headers, while it is still sending: it must get the
// 413, not a reset. 64 MiB outgrows what loopback socket buffers can hold, so the server must
// read on after answering.
TEST_F(HttpServerTest, ARefusedClientStillSendingItsBodyReadsTheAnswer) {
  Start(Echo, /*max_body=*/1024);
  asio::io_context context;
  asio::ip::tcp::socket socket(context);
  socket.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), server_->port()));
  BoundReceives(socket);
  const int fd = socket.native_handle();
  constexpr size_t kBody = size_t{64} << 20;
  auto sent = std::async(std::launch::async, [fd] {
    const std::string head =
        "POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(kBody) + "\r\n\r\n";
    if (::send(fd, head.data(), head.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(head.size())) {
      return false;
    }
    const std::string chunk(1 << 16, 'x');
    for (size_t done = 0; done < kBody; done += chunk.size()) {
      if (::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL) !=
          static_cast<ssize_t>(chunk.size())) {
        return false;  // reset by the server
      }
    }
    ::shutdown(fd, SHUT_WR);
    return true;
  });
  bool ended = false;
  const std::string received = ReadToEnd(fd, &ended);
  EXPECT_TRUE(sent.get()) << "the server reset the connection while the client was sending";
  EXPECT_EQ(received.rfind("HTTP/1.1 413 ", 0), 0u) << received;
  EXPECT_NE(received.find("exceeds the 1024 byte limit"), std::string::npos) << received;
  EXPECT_TRUE(ended);  // a clean end of stream after the answer
}

TEST_F(HttpServerTest, PipelinedRequestsAreAnsweredInOrder) {
  Start(Echo);
  // Three requests in one write; the handler answers each before returning.
  const std::string received = Exchange(
      server_->port(),
      "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\none"
      "GET /b HTTP/1.1\r\nHost: x\r\n\r\n"
      "POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nthree");
  EXPECT_EQ(Count(received, "HTTP/1.1 200 OK\r\n"), 3u) << received;
  const size_t a = received.find("POST /a one");
  const size_t b = received.find("GET /b ");
  const size_t c = received.find("POST /c three");
  ASSERT_NE(a, std::string::npos) << received;
  ASSERT_NE(b, std::string::npos) << received;
  ASSERT_NE(c, std::string::npos) << received;
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
}

// A client that ends its side right after its request (a half-close) is still answered, and the
// server then ends the connection instead of waiting out the idle timeout; so it does after half
// a request. The request and the end of stream must reach the server as one event: the client's
// I/O thread is held by another request while it sends both. (Two I/O threads take connections
// in turn, so the first and third connections share one.)
TEST_F(HttpServerTest, HalfClosedClientIsAnsweredAndTheConnectionEnds) {
  for (bool whole : {true, false}) {
    std::promise<void> entered;
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    Start([&](HttpRequest&& request, Responder responder) {
      if (request.target == "/hold") {
        entered.set_value();
        released.wait();
      }
      Echo(std::move(request), std::move(responder));
    });
    asio::io_context context;
    asio::ip::tcp::socket socket(context);  // the first connection
    socket.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), server_->port()));
    BoundReceives(socket);
    const std::string request = "POST /half HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi";
    {  // one whole exchange first: the connection is open and idle on its thread
      asio::write(socket, asio::buffer(request));
      beast::flat_buffer buffer;
      http::response<http::string_body> response;
      http::read(socket, buffer, response);
      ASSERT_EQ(response.body(), "POST /half hi");
    }
    Client other(server_->port());   // the second, on the other thread
    Client holder(server_->port());  // the third, on the first one's thread
    std::thread held([&] { EXPECT_EQ(holder.Send(http::verb::get, "/hold").result_int(), 200); });
    entered.get_future().wait();
    asio::write(socket, asio::buffer(whole ? request : request.substr(0, 20)));
    ::shutdown(socket.native_handle(), SHUT_WR);
    release.set_value();
    held.join();

    bool ended = false;
    const std::string received = ReadToEnd(socket.native_handle(), &ended);
    EXPECT_TRUE(ended) << "the server did not end the connection";  // not the receive timeout
    if (whole) {
      EXPECT_EQ(received.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << received;
      EXPECT_NE(received.find("POST /half hi"), std::string::npos) << received;
    } else {
      EXPECT_EQ(received, "");
    }
    server_->Shutdown(std::chrono::seconds(5));
    server_.reset();
  }
}

TEST_F(HttpServerTest, ChunkedBodyIsAssembled) {
  Start(Echo);
  const std::string received = Exchange(
      server_->port(),
      "POST /chunks HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
      "5\r\nhello\r\n1;note=x\r\n \r\n5\r\nworld\r\n0\r\n\r\n");
  EXPECT_EQ(received.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << received;
  EXPECT_NE(received.find("POST /chunks hello world"), std::string::npos) << received;
}

TEST_F(HttpServerTest, ExpectContinueGetsAnInterimAnswerFirst) {
  Start(Echo);
  asio::io_context context;
  asio::ip::tcp::socket socket(context);
  socket.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), server_->port()));
  asio::write(socket,
              asio::buffer(std::string("POST /wait HTTP/1.1\r\nHost: x\r\n"
                                       "Content-Length: 4\r\nExpect: 100-continue\r\n\r\n")));
  std::string interim(25, '\0');
  asio::read(socket, asio::buffer(interim));
  EXPECT_EQ(interim, "HTTP/1.1 100 Continue\r\n\r\n");
  asio::write(socket, asio::buffer(std::string("body")));
  beast::flat_buffer buffer;
  http::response<http::string_body> response;
  http::read(socket, buffer, response);
  EXPECT_EQ(response.result_int(), 200);
  EXPECT_EQ(response.body(), "POST /wait body");
}

TEST_F(HttpServerTest, AnHttp10ClientGetsNoInterimAnswer) {
  Start(Echo);
  // RFC 9110: a server must not send 100 Continue to an HTTP/1.0 client. This one sends its body
  // only once the server has handled its headers alone (where it would answer 100); only the
  // final answer may come back.
  asio::io_context context;
  asio::ip::tcp::socket socket(context);
  socket.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), server_->port()));
  BoundReceives(socket);
  asio::write(socket,
              asio::buffer(std::string(
                  "POST /old HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")));
  Settle();
  asio::write(socket, asio::buffer(std::string("body")));
  const std::string received = ReadToEnd(socket.native_handle());
  EXPECT_EQ(received.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << received;
  EXPECT_EQ(received.find("100 Continue"), std::string::npos) << received;
}

TEST(RequestParser, ADeclaredLengthIsNotReservedBeyondABound) {
  HttpRequest request;
  HttpCore core(HttpServerOptions{}, nullptr);
  RequestParser parser(request, /*body_limit=*/uint64_t{1} << 30, core);
  // The headers and the first byte of the body.
  const std::string head = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 500000000\r\n\r\nx";
  boost::beast::error_code error;
  size_t used = parser.put(asio::buffer(head), error);
  if (!error && used < head.size()) used += parser.put(asio::buffer(head.substr(used)), error);
  ASSERT_TRUE(!error || error == http::error::need_more) << error.message();
  ASSERT_EQ(request.body, "x");
  // A declared length must not hold half a gigabyte; the body grows as it arrives.
  EXPECT_LE(request.body.capacity(), RequestParser::kBodyReserve);
}

// Found by fuzz/http_request_fuzzer.cc (fuzz/regressions/http_request_fuzzer): an empty chunked
// body whose final chunk is split across reads ("0\r\n", then "\r", then "\n"), fed as the
// connections feed the parser.
TEST(RequestParser, AFinalChunkSplitAcrossReadsEndsTheRequest) {
#ifndef NDEBUG
  // Beast 1.74 asserts that a final chunk parsed again holds at least 5 bytes; the code after the
  // assertion handles 3 or 4 (Beast relaxed it upstream, boostorg/beast#2861). Release builds,
  // which compile assertions out, parse it; a Debug build (make asan) aborts.
  GTEST_SKIP() << "Beast 1.74's parser asserts on this stream in builds with assertions";
#endif
  HttpRequest request;
  HttpCore core(HttpServerOptions{}, nullptr);
  RequestParser parser(request, /*body_limit=*/1024, core);
  std::string unparsed;
  for (std::string_view read :
       {"POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n", "\r", "\n"}) {
    EXPECT_FALSE(parser.is_done());
    unparsed += read;
    boost::beast::error_code error;
    unparsed.erase(0, parser.put(asio::buffer(unparsed), error));
    ASSERT_TRUE(!error || error == http::error::need_more) << error.message();
  }
  EXPECT_TRUE(parser.is_done());
  EXPECT_EQ(unparsed, "");
  EXPECT_EQ(request.target, "/x");
  EXPECT_EQ(request.body, "");
}

TEST_F(HttpServerTest, OversizedHeaderGets400) {
  Start(Echo);
  const std::string received =
      Exchange(server_->port(),
               "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(70000, 'a') + "\r\n\r\n");
  EXPECT_EQ(received.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u) << received.substr(0, 200);
  EXPECT_NE(received.find("header limit"), std::string::npos) << received.substr(0, 300);
}

// Bodies far larger than the read buffer and the socket buffers: the request arrives in many
// reads and the answer leaves in many writes, resumed as the client drains its socket.
TEST_F(HttpServerTest, LargeBodiesTravelBothWays) {
  Start(
      [](HttpRequest&& request, Responder responder) {
        HttpResponse response;
        response.body = request.body + request.body;  // 12 MiB back
        responder.Send(std::move(response));
      },
      /*max_body=*/8 << 20);
  std::string body(6 << 20, '\0');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>('a' + i % 26);
  Client client(server_->port());
  for (int i = 0; i < 2; ++i) {  // and the connection is still usable afterwards
    auto response = client.Send(http::verb::post, "/big", body);
    EXPECT_EQ(response.result_int(), 200);
    ASSERT_EQ(response.body().size(), 2 * body.size());
    EXPECT_TRUE(response.body().compare(0, body.size(), body) == 0);
    EXPECT_TRUE(response.body().compare(body.size(), body.size(), body) == 0);
  }
}

TEST_F(HttpServerTest, ManyConnectionsAtOnce) {
  Start(Echo);
  constexpr int kClients = 40;
  constexpr int kRequests = 25;
  std::atomic<int> answered{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      Client client(server_->port());
      for (int i = 0; i < kRequests; ++i) {
        const std::string body = std::to_string(c) + ":" + std::to_string(i);
        auto response = client.Send(http::verb::post, "/many", body);
        if (response.result_int() == 200 && response.body() == "POST /many " + body) {
          answered.fetch_add(1);
        }
      }
    });
  }
  for (auto& client : clients) client.join();
  EXPECT_EQ(answered.load(), kClients * kRequests);
  server_->Shutdown(std::chrono::seconds(5));
  EXPECT_EQ(server_->stats().requests, static_cast<uint64_t>(kClients * kRequests));
}

// Out of descriptors, a connection waits in the listen backlog (no busy retrying); once
// descriptors are free again it is accepted and answered without another connection arriving.
TEST_F(HttpServerTest, ConnectionsWaitOutAShortageOfDescriptors) {
  Start(Echo);
  Client first(server_->port());  // the first connection: on the thread that accepts
  ASSERT_EQ(first.Send(http::verb::get, "/first").result_int(), 200);
  asio::io_context context;
  asio::ip::tcp::socket socket(context);
  socket.open(asio::ip::tcp::v4());  // its descriptor exists before the shortage
  BoundReceives(socket);

  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  const int lowest_free = dup(0);
  ASSERT_GE(lowest_free, 0);
  close(lowest_free);
  rlimit scarce = saved;
  scarce.rlim_cur = static_cast<rlim_t>(lowest_free);  // no new descriptor in this process
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &scarce), 0);
  // On loopback the connection is queued for accept before connect returns; the accepting
  // thread sees it no later than the request that follows on `first`, so once that is
  // answered, accepting it has failed.
  socket.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), server_->port()));
  const std::string request = "GET /waited HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  const ssize_t sent = ::send(socket.native_handle(), request.data(), request.size(), 0);
  const int status = first.Send(http::verb::get, "/meanwhile").result_int();
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  ASSERT_EQ(sent, static_cast<ssize_t>(request.size()));
  EXPECT_EQ(status, 200);

  bool ended = false;
  const std::string received = ReadToEnd(socket.native_handle(), &ended);
  EXPECT_TRUE(ended) << "no answer within the receive timeout";
  EXPECT_NE(received.find("GET /waited "), std::string::npos) << received;
}

TEST(HttpServer, BindFailureIsUnavailable) {
  HttpServerOptions options;
  options.address = "127.0.0.1";
  options.port = 0;
  auto first = HttpServer::Start(options, [](HttpRequest&&, Responder) {});
  ASSERT_TRUE(first.ok());
  options.port = (*first)->port();
  auto second = HttpServer::Start(options, [](HttpRequest&&, Responder) {});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  (*first)->Shutdown(std::chrono::milliseconds(100));
}

// A listener opened ahead holds its port (the app opens HTTP's before loading models): a second
// one is refused with the OS's reason alone, and a connection made before the server starts is
// answered once it does.
TEST(HttpServer, AListenerOpenedAheadHoldsThePortUntilTheServerTakesIt) {
  Result<Listener> listener = Listener::Open("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  const uint16_t port = listener->port();
  ASSERT_NE(port, 0);
  Result<Listener> second = Listener::Open("127.0.0.1", port);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(second.status().message(), "address already in use");
  EXPECT_EQ(Listener::Open("localhost", 0).status().code(), StatusCode::kInvalidArgument);

  asio::io_context context;
  asio::ip::tcp::socket early(context);
  early.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  BoundReceives(early);
  asio::write(early, asio::buffer(std::string("GET /early HTTP/1.1\r\nHost: x\r\nConnection: "
                                              "close\r\n\r\n")));

  HttpServerOptions options;
  options.threads = 1;
  auto server = HttpServer::Start(
      options,
      [](HttpRequest&& request, Responder responder) {
        HttpResponse response;
        response.body = std::string(request.path());
        responder.Send(std::move(response));
      },
      std::move(listener).value());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_EQ((*server)->port(), port);
  EXPECT_NE(ReadToEnd(early.native_handle()).find("/early"), std::string::npos);
  (*server)->Shutdown(std::chrono::milliseconds(100));

  // Start without a listener still names the address in its error.
  Result<Listener> holder = Listener::Open("127.0.0.1", 0);
  ASSERT_TRUE(holder.ok());
  HttpServerOptions taken;
  taken.address = "127.0.0.1";
  taken.port = holder->port();
  auto refused = HttpServer::Start(taken, [](HttpRequest&&, Responder) {});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            fmt::format("cannot listen on 127.0.0.1:{}: address already in use", taken.port));
}

}  // namespace
}  // namespace rampart::net
