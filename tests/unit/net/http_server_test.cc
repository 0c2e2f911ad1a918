#include "net/http_server.h"

#include <gtest/gtest.h>

#include <thread>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace rampart::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

// A blocking HTTP/1.1 client on one keep-alive connection.
class Client {
 public:
  explicit Client(uint16_t port) : stream_(context_) {
    stream_.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  }

  http::response<http::string_body> Send(http::verb verb, std::string target,
                                         std::string body = "") {
    http::request<http::string_body> request(verb, target, 11);
    request.set(http::field::host, "127.0.0.1");
    request.body() = std::move(body);
    request.prepare_payload();
    http::write(stream_, request);
    http::response<http::string_body> response;
    http::read(stream_, buffer_, response);
    return response;
  }

  // Sends only headers announcing a body of `length` bytes, then reads the answer.
  http::response<http::string_body> SendHeadersOnly(uint64_t length) {
    const std::string head =
        "POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(length) + "\r\n\r\n";
    asio::write(stream_.socket(), asio::buffer(head));
    http::response<http::string_body> response;
    http::read(stream_, buffer_, response);
    return response;
  }

 private:
  asio::io_context context_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
};

class HttpServerTest : public ::testing::Test {
 protected:
  void Start(HttpHandler handler, uint64_t max_body = 1 << 20) {
    HttpServerOptions options;
    options.address = "127.0.0.1";
    options.port = 0;
    options.threads = 2;
    options.max_body_bytes = max_body;
    auto server = HttpServer::Start(options, std::move(handler));
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
    ASSERT_NE(server_->port(), 0);
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::seconds(5));
  }

  std::unique_ptr<HttpServer> server_;
};

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

}  // namespace
}  // namespace rampart::net
