#pragma once

// What the HTTP server's tests share: a blocking client, raw-socket helpers and a fixture whose
// servers run on a fake clock.

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/time.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "net/http_server.h"
#include "testing/fake_clock.h"

namespace rampart::net {

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

// Servers on loopback, port 0, two I/O threads, whose deadlines read `clock_`: a test moves it
// and calls CheckDeadlines() instead of waiting for real time to pass.
class HttpServerTest : public ::testing::Test {
 protected:
  void Start(HttpHandler handler, uint64_t max_body = 1 << 20,
             std::chrono::seconds idle_timeout = std::chrono::seconds(300),
             std::vector<int> cpus = {}, bool sched_batch = false) {
    StartWith(std::move(handler), [&](HttpServerOptions& options) {
      options.max_body_bytes = max_body;
      options.idle_timeout = idle_timeout;
      options.cpus = std::move(cpus);
      options.sched_batch = sched_batch;
    });
  }
  // Start, with `adjust` changing the options first.
  void StartWith(HttpHandler handler, const std::function<void(HttpServerOptions&)>& adjust) {
    HttpServerOptions options;
    options.address = "127.0.0.1";
    options.port = 0;
    options.threads = 2;
    options.max_body_bytes = 1 << 20;
    options.clock = &clock_;
    adjust(options);
    auto server = HttpServer::Start(options, std::move(handler));
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
    ASSERT_NE(server_->port(), 0);
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::seconds(5));
  }

  // Waits until the I/O threads have handled what clients sent before the call: the first
  // CheckDeadlines may run in a loop turn that began before those bytes were ready, the second
  // runs after the turn that collected them.
  void Settle() {
    server_->CheckDeadlines();
    server_->CheckDeadlines();
  }
  // Moves the servers' clock on by `by` and applies the deadlines.
  void Advance(std::chrono::nanoseconds by) {
    clock_.Advance(by);
    server_->CheckDeadlines();
  }

  testing::FakeClock clock_;
  std::unique_ptr<HttpServer> server_;
};

// Reads `fd` until the server ends the connection, which `ended` reports (false: the receive
// timeout or an error came first).
inline std::string ReadToEnd(int fd, bool* ended = nullptr) {
  std::string received;
  char chunk[4096];
  ssize_t n = 0;
  while ((n = ::recv(fd, chunk, sizeof(chunk), 0)) > 0) {
    received.append(chunk, static_cast<size_t>(n));
  }
  if (ended != nullptr) *ended = n == 0;
  return received;
}

// Gives `socket` a 10 s receive timeout, so a server that never answers or never closes fails
// the test instead of hanging it.
inline void BoundReceives(asio::ip::tcp::socket& socket) {
  const timeval timeout{10, 0};
  setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
}

// Writes `request` on a fresh connection and reads until the server closes it (or 10 s pass).
inline std::string Exchange(uint16_t port, const std::string& request) {
  asio::io_context context;
  asio::ip::tcp::socket socket(context);
  socket.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  BoundReceives(socket);
  asio::write(socket, asio::buffer(request));
  return ReadToEnd(socket.native_handle());
}

// Counts the occurrences of `needle` in `text`.
inline size_t Count(const std::string& text, const std::string& needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

// Answers with the request's method, target and body.
inline void Echo(HttpRequest&& request, Responder responder) {
  HttpResponse response;
  response.body = request.method + " " + request.target + " " + request.body;
  responder.Send(std::move(response));
}

}  // namespace rampart::net
