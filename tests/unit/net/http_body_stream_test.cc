// Streamed request bodies (HttpServerOptions::streamed_body, BodyReader): pieces as they arrive,
// chunked framing, the route's limit, a client that goes away, backpressure, and an answer given
// before the body was read. Other routes keep reading their bodies whole.

#include <gtest/gtest.h>

#include <sys/socket.h>

#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "http_test_support.h"
#include "testing/eventually.h"

namespace rampart::net {
namespace {

constexpr uint64_t kUploadLimit = 4 << 20;

// Reads a body to its end, then calls `done` with the body (or the error).
void ReadWhole(std::shared_ptr<BodyReader> reader, std::shared_ptr<std::string> so_far,
               std::shared_ptr<int> pieces, std::function<void(Result<std::string>, int)> done) {
  BodyReader* raw = reader.get();
  raw->Next([reader = std::move(reader), so_far, pieces,
             done = std::move(done)](Result<std::string> piece) mutable {
    if (!piece.ok()) {
      done(piece.status(), *pieces);
      return;
    }
    if (piece->empty()) {
      done(std::move(*so_far), *pieces);
      return;
    }
    ++*pieces;
    so_far->append(*piece);
    ReadWhole(std::move(reader), so_far, pieces, std::move(done));
  });
}

// /upload streams (limit kUploadLimit) and answers "<bytes> <pieces>", or the error's status;
// any other route echoes its whole body.
void UploadOrEcho(HttpRequest&& request, Responder responder) {
  if (!request.body_reader) {
    responder.Send({.status = 200, .body = "whole:" + request.body});
    return;
  }
  auto shared = std::make_shared<Responder>(std::move(responder));
  ReadWhole(request.body_reader, std::make_shared<std::string>(), std::make_shared<int>(0),
            [shared](Result<std::string> body, int pieces) {
              if (!body.ok()) {
                const int status = body.status().code() == StatusCode::kPayloadTooLarge ? 413 : 400;
                shared->Send({.status = status, .body = body.status().ToString()});
                return;
              }
              shared->Send({.status = 200,
                            .body = std::to_string(body->size()) + " " + std::to_string(pieces) +
                                    " " + body->substr(0, 16)});
            });
}

uint64_t StreamUploads(const HttpRequest& head) {
  return head.path() == "/upload" ? kUploadLimit : 0;
}

class HttpBodyStreamTest : public HttpServerTest {
 protected:
  void StartStreaming(HttpHandler handler) {
    StartWith(std::move(handler), [](HttpServerOptions& options) {
      options.max_body_bytes = 1 << 20;
      options.streamed_body = StreamUploads;
    });
  }
};

int SocketTo(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  timeval timeout{.tv_sec = 30, .tv_usec = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  return fd;
}

void SendAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t sent = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent <= 0) return;
    bytes.remove_prefix(static_cast<size_t>(sent));
  }
}

TEST_F(HttpBodyStreamTest, ADeclaredLengthBodyComesInPiecesAndOtherRoutesReadWhole) {
  StartStreaming(UploadOrEcho);
  Client client(server_->port());
  const std::string body(3 << 20, 'x');
  auto answer = client.Send(http::verb::post, "/upload", body);
  EXPECT_EQ(answer.result_int(), 200) << answer.body();
  const int pieces = std::stoi(answer.body().substr(answer.body().find(' ') + 1));
  EXPECT_EQ(answer.body().substr(0, answer.body().find(' ')), std::to_string(body.size()));
  EXPECT_GT(pieces, 1);
  // The same connection serves on, and another route reads its body whole, as before.
  answer = client.Send(http::verb::post, "/echo", "hello");
  EXPECT_EQ(answer.body(), "whole:hello");
  // A streamed route's body under the whole-body limit still streams; an empty one ends at once.
  answer = client.Send(http::verb::post, "/upload", "");
  EXPECT_EQ(answer.body(), "0 0 ");
}

TEST_F(HttpBodyStreamTest, AChunkedBodyIsHandedOverWithoutItsFraming) {
  StartStreaming(UploadOrEcho);
  const int fd = SocketTo(server_->port());
  SendAll(fd,
          "POST /upload HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
          "Transfer-Encoding: chunked\r\n\r\n");
  SendAll(fd, "5\r\nhello\r\n");
  SendAll(fd, "1;ext=1\r\n \r\n6\r\nworld!\r\n0\r\n\r\n");
  const std::string answer = ReadToEnd(fd);
  ::close(fd);
  EXPECT_NE(answer.find("200 OK"), std::string::npos) << answer;
  EXPECT_NE(answer.find("hello world!"), std::string::npos) << answer;
}

TEST_F(HttpBodyStreamTest, BodiesOverTheRoutesLimitAreAnswered413ByTheHandler) {
  StartStreaming(UploadOrEcho);
  {  // declared: told at the first piece, before any is read
    Client client(server_->port());
    auto answer = client.Send(http::verb::post, "/upload", std::string(kUploadLimit + 1, 'y'));
    EXPECT_EQ(answer.result_int(), 413) << answer.body();
  }
  {  // chunked: told once the chunks pass it
    const int fd = SocketTo(server_->port());
    SendAll(fd, "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    const std::string chunk(1 << 20, 'z');
    std::thread sender([&] {
      for (int i = 0; i < 5; ++i) SendAll(fd, "100000\r\n" + chunk + "\r\n");
      SendAll(fd, "0\r\n\r\n");
    });
    const std::string answer = ReadToEnd(fd);
    ::shutdown(fd, SHUT_RDWR);
    sender.join();
    ::close(fd);
    EXPECT_NE(answer.find("413"), std::string::npos) << answer.substr(0, 200);
  }
  // Whole bodies keep their own limit (max_body_bytes), refused by the server as before.
  Client client(server_->port());
  EXPECT_EQ(client.SendHeadersOnly((1 << 20) + 1).result_int(), 413);
}

TEST_F(HttpBodyStreamTest, MalformedChunkedFramingIsAnError) {
  StartStreaming(UploadOrEcho);
  const int fd = SocketTo(server_->port());
  SendAll(fd,
          "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
          "chunked\r\n\r\n5\r\nhelloXX\r\n0\r\n\r\n");
  const std::string answer = ReadToEnd(fd);
  ::close(fd);
  EXPECT_NE(answer.find("400"), std::string::npos) << answer;
  // Refused by the server when the bad framing comes with the head, by the consumer after.
  EXPECT_NE(answer.find("malformed"), std::string::npos) << answer;
}

TEST_F(HttpBodyStreamTest, AClientGoneMidBodyIsAnErrorForTheConsumer) {
  std::promise<Status> told;
  StartStreaming([&](HttpRequest&& request, Responder responder) {
    auto shared = std::make_shared<Responder>(std::move(responder));
    ReadWhole(request.body_reader, std::make_shared<std::string>(), std::make_shared<int>(0),
              [&, shared](Result<std::string> body, int) {
                told.set_value(body.status());
                shared->Send({.status = 500});
              });
  });
  const int fd = SocketTo(server_->port());
  SendAll(fd, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n");
  SendAll(fd, std::string(5000, 'a'));
  ::close(fd);
  auto future = told.get_future();
  ASSERT_EQ(future.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  const Status status = future.get();
  EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
}

TEST_F(HttpBodyStreamTest, ABodyIsReadNoFasterThanItsConsumerTakesIt) {
  std::mutex mutex;
  std::shared_ptr<BodyReader> held;
  std::shared_ptr<Responder> responder_held;
  std::atomic<uint64_t> taken{0};
  StartStreaming([&](HttpRequest&& request, Responder responder) {
    std::lock_guard lock(mutex);
    held = request.body_reader;
    responder_held = std::make_shared<Responder>(std::move(responder));
    held->Next([&](Result<std::string> piece) { taken += piece.ok() ? piece->size() : 0; });
  });
  const uint64_t size = kUploadLimit;  // far more than the socket buffers hold
  const int fd = SocketTo(server_->port());
  std::atomic<bool> sent{false};
  std::thread sender([&] {
    SendAll(fd, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(size) +
                    "\r\n\r\n");
    SendAll(fd, std::string(size, 'b'));
    sent = true;
  });
  ASSERT_TRUE(testing::Eventually([&] { return taken.load() > 0; }));
  Settle();
  // One piece taken, no more asked for: the rest waits in the client and the socket buffers.
  EXPECT_LE(taken.load(), 64u * 1024);
  EXPECT_FALSE(sent.load());
  // The consumer reads on: the whole body comes through.
  std::shared_ptr<BodyReader> reader;
  {
    std::lock_guard lock(mutex);
    reader = held;
  }
  std::promise<Result<std::string>> whole;
  ReadWhole(reader, std::make_shared<std::string>(), std::make_shared<int>(0),
            [&](Result<std::string> body, int) { whole.set_value(std::move(body)); });
  auto result = whole.get_future().get();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->size() + taken.load(), size);
  sender.join();
  responder_held->Send({.status = 200, .body = "ok"});
  const std::string answer = [&] {
    char buffer[256];
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    return std::string(buffer, n > 0 ? static_cast<size_t>(n) : 0);
  }();
  ::close(fd);
  EXPECT_NE(answer.find("200 OK"), std::string::npos) << answer;
}

TEST_F(HttpBodyStreamTest, AnAnswerBeforeTheBodyEndedClosesTheConnection) {
  StartStreaming([](HttpRequest&& request, Responder responder) {
    responder.Send({.status = 400, .body = "no"});
    request.body_reader->Next([](Result<std::string> piece) {
      EXPECT_EQ(piece.status().code(), StatusCode::kCancelled);
    });
  });
  const int fd = SocketTo(server_->port());
  SendAll(fd, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12345");
  const std::string answer = ReadToEnd(fd);
  ::close(fd);
  EXPECT_NE(answer.find("400 Bad Request"), std::string::npos) << answer;
  EXPECT_NE(answer.find("Connection: close"), std::string::npos) << answer;
}

}  // namespace
}  // namespace rampart::net
