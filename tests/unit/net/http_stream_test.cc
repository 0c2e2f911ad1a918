// Streamed answers (Responder::StartStream, StreamWriter) on the plain and TLS engines, read by
// Beast's client-side parser.

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include <openssl/ssl.h>
#include <boost/asio/ssl.hpp>
#include <boost/beast/ssl.hpp>

#include "http_test_support.h"
#include "net/http_server.h"
#include "testing/eventually.h"
#include "testing/test_certs.h"

namespace rampart::net {
namespace {

namespace ssl = asio::ssl;
namespace fs = std::filesystem;
using std::chrono::seconds;
using Parser = http::response_parser<http::string_body>;

// A streamed answer the handler started, for the test to write.
struct Opened {
  StreamWriter writer;
  std::shared_ptr<const std::atomic<bool>> client_gone;
};

// The streams the handler started, in order.
class Streams {
 public:
  void Add(Opened opened) {
    std::lock_guard lock(mutex_);
    opened_.push_back(std::move(opened));
    added_.notify_all();
  }
  // The next stream started (waits up to 10 s; an empty writer then).
  Opened Next() {
    std::unique_lock lock(mutex_);
    if (!added_.wait_for(lock, seconds(10), [&] { return !opened_.empty(); })) return {};
    Opened next = std::move(opened_.front());
    opened_.pop_front();
    return next;
  }

 private:
  std::mutex mutex_;
  std::condition_variable added_;
  std::deque<Opened> opened_;
};

// One client connection, plain or TLS, with blocking reads bounded to 10 s.
class TestClient {
  template <typename F>
  auto With(F&& f) {
    return tls_ ? f(*tls_) : f(*plain_);
  }

 public:
  TestClient(uint16_t port, ssl::context* tls) {
    const asio::ip::tcp::endpoint server(asio::ip::make_address("127.0.0.1"), port);
    if (tls != nullptr) {
      tls_.emplace(io_, *tls);
      SSL_set_tlsext_host_name(tls_->native_handle(), "localhost");
      beast::get_lowest_layer(*tls_).connect(server);
      BoundReceives(beast::get_lowest_layer(*tls_).socket());
      tls_->handshake(ssl::stream_base::client);
    } else {
      plain_.emplace(io_);
      plain_->connect(server);
      BoundReceives(plain_->socket());
    }
  }

  void Write(const std::string& raw) {
    With([&](auto& stream) { asio::write(stream, asio::buffer(raw)); });
  }
  // Reads a response into `parser`.
  beast::error_code Read(Parser& parser) {
    beast::error_code error;
    With([&](auto& stream) { http::read(stream, buffer_, parser, error); });
    return error;
  }
  // Reads until `parser`'s body holds at least `bytes`.
  beast::error_code ReadBody(Parser& parser, size_t bytes) {
    beast::error_code error;
    while (!error && !parser.is_done() && parser.get().body().size() < bytes) {
      With([&](auto& stream) { http::read_some(stream, buffer_, parser, error); });
    }
    return error;
  }
  // Reads raw bytes until the server ends the connection; `clean`: with an orderly end.
  std::string ReadToEnd(bool* clean) {
    std::string received(static_cast<const char*>(buffer_.data().data()), buffer_.size());
    buffer_.clear();
    beast::error_code error;
    char chunk[4096];
    while (!error) {
      const size_t n =
          With([&](auto& stream) { return stream.read_some(asio::buffer(chunk), error); });
      received.append(chunk, n);
    }
    *clean = error == asio::error::eof;
    return received;
  }
  // Hangs up at once (no TLS goodbye).
  void Close() {
    beast::error_code ignored;
    auto& socket = tls_ ? beast::get_lowest_layer(*tls_).socket() : plain_->socket();
    socket.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
  }
  // Receives into a small kernel buffer, so that an unread stream fills up soon.
  void ShrinkReceiveBuffer() {
    auto& socket = tls_ ? beast::get_lowest_layer(*tls_).socket() : plain_->socket();
    const int bytes = 4096;
    setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
  }

 private:
  asio::io_context io_;
  std::optional<beast::tcp_stream> plain_;
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls_;
  beast::flat_buffer buffer_;
};

// Every test runs on plain HTTP (false) and on HTTPS (true).
class HttpStreamTest : public HttpServerTest, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    if (!GetParam()) return;
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = info->name();  // "Test/Tls"
    for (char& c : name) c = c == '/' ? '_' : c;
    directory_ = fs::path(::testing::TempDir()) /
                 ("rampart_stream_" + std::to_string(getpid()) + "_" + name);
    fs::create_directories(directory_);
    ca_ = testing::MakeCertificateAuthority("rampart test CA");
    const testing::KeyAndCert server = testing::MakeLeafCertificate(ca_, "rampart test server");
    std::ofstream(directory_ / "server.pem") << server.cert_pem;
    std::ofstream(directory_ / "server.key") << server.key_pem;
    client_tls_.add_certificate_authority(asio::buffer(ca_.cert_pem));
    client_tls_.set_verify_mode(ssl::verify_peer);
  }
  void TearDown() override {
    HttpServerTest::TearDown();
    if (!directory_.empty()) fs::remove_all(directory_);
  }

  // A server whose handler starts a stream with `head` for every request.
  void StartStreams(HttpResponseHead head = {}, seconds idle_timeout = seconds(300)) {
    head.headers.emplace_back("x-request-id", "r-1");
    head.headers.emplace_back("Server-Timing", "queue;dur=1");
    StartWith(
        [this, head](HttpRequest&& request, Responder responder) {
          streams_.Add({responder.StartStream(head), request.client_gone});
        },
        [&](HttpServerOptions& options) {
          options.idle_timeout = idle_timeout;
          if (GetParam()) {
            options.tls = HttpTlsOptions{.cert = (directory_ / "server.pem").string(),
                                         .key = (directory_ / "server.key").string()};
          }
        });
  }
  std::unique_ptr<TestClient> Connect() {
    return std::make_unique<TestClient>(server_->port(), GetParam() ? &client_tls_ : nullptr);
  }

  // Writes `chunk` until the queue stays at max_queued_bytes or more while the server writes what
  // it can (the client not reading): unchanged over a few rounds of the I/O threads, so the
  // kernels' buffers are full. Returns the chunks written.
  size_t FillUntilStuck(StreamWriter& writer, const std::string& chunk, uint64_t max_queued) {
    size_t written = 0;
    int unchanged = 0;
    uint64_t last = 0;
    while (unchanged < 5) {
      if (writer.queued_bytes() < max_queued) {
        StreamWriter::WriteResult result = StreamWriter::kQueued;
        while (result == StreamWriter::kQueued) {
          result = writer.Write(chunk);
          if (result != StreamWriter::kClosed) ++written;
        }
        if (result == StreamWriter::kClosed) {
          ADD_FAILURE() << "the stream closed";
          return written;
        }
      }
      Settle();
      const uint64_t queued = writer.queued_bytes();
      unchanged = queued >= max_queued && queued == last ? unchanged + 1 : 0;
      last = queued;
    }
    return written;
  }

  static constexpr const char* kGet = "GET /stream HTTP/1.1\r\nHost: localhost\r\n\r\n";

  Streams streams_;
  fs::path directory_;
  testing::KeyAndCert ca_;
  ssl::context client_tls_{ssl::context::tls_client};
};

TEST_P(HttpStreamTest, ChunksArriveFramedAndTheConnectionServesOn) {
  StartStreams();
  auto client = Connect();
  for (int round = 0; round < 2; ++round) {
    client->Write(kGet);
    Opened opened = streams_.Next();
    std::thread producer([&] {
      EXPECT_EQ(opened.writer.Write("data: one\n\n"), StreamWriter::kQueued);
      EXPECT_EQ(opened.writer.Write(""), StreamWriter::kQueued);  // ignored
      EXPECT_EQ(opened.writer.Write("data: two\n\n"), StreamWriter::kQueued);
      opened.writer.Finish();
      EXPECT_EQ(opened.writer.Write("late"), StreamWriter::kClosed);
    });
    Parser parser;
    ASSERT_FALSE(client->Read(parser));
    producer.join();
    const auto& response = parser.get();
    EXPECT_EQ(response.result_int(), 200);
    EXPECT_TRUE(response.chunked());
    EXPECT_TRUE(response.keep_alive());
    EXPECT_EQ(response[http::field::content_type], "text/event-stream");
    EXPECT_EQ(response["x-request-id"], "r-1");
    EXPECT_EQ(response["Server-Timing"], "queue;dur=1");
    EXPECT_EQ(response.body(), "data: one\n\ndata: two\n\n");
  }
  server_->Shutdown(seconds(5));
  EXPECT_EQ(server_->stats().requests, 2u);
}

TEST_P(HttpStreamTest, AnHttp10ClientGetsABodyThatEndsWithTheConnection) {
  StartStreams();
  auto client = Connect();
  client->Write("GET /stream HTTP/1.0\r\n\r\n");
  Opened opened = streams_.Next();
  opened.writer.Write("first ");
  opened.writer.Write("second");
  opened.writer.Finish();
  bool clean = false;
  const std::string received = client->ReadToEnd(&clean);
  EXPECT_TRUE(clean);
  EXPECT_EQ(received.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << received;
  EXPECT_EQ(received.find("Transfer-Encoding"), std::string::npos) << received;
  EXPECT_EQ(received.find("Content-Length"), std::string::npos) << received;
  EXPECT_EQ(received.substr(received.find("\r\n\r\n") + 4), "first second");
}

TEST_P(HttpStreamTest, ManySmallChunksArriveInOrder) {
  StartStreams();
  auto client = Connect();
  client->Write(kGet);
  Opened opened = streams_.Next();
  std::string expected;
  for (int i = 0; i < 5000; ++i) expected += "data: " + std::to_string(i) + "\n\n";
  std::thread producer([&] {
    for (int i = 0; i < 5000; ++i) opened.writer.Write("data: " + std::to_string(i) + "\n\n");
    opened.writer.Finish();
  });
  Parser parser;
  ASSERT_FALSE(client->Read(parser));
  producer.join();
  EXPECT_EQ(parser.get().body(), expected);
}

// A client that reads slowly fills the queue to its bound; the producer stops at kFull and
// resumes when told the queue drained.
TEST_P(HttpStreamTest, ASlowReaderBoundsTheQueueAndResumes) {
  HttpResponseHead head;
  head.max_queued_bytes = 64 * 1024;
  StartStreams(head);
  auto client = Connect();
  client->Write(kGet);
  Opened opened = streams_.Next();
  const std::string chunk(4096, 'x');
  const size_t written = FillUntilStuck(opened.writer, chunk, head.max_queued_bytes);
  // Stopped at the bound, with one chunk at most past it.
  EXPECT_GE(opened.writer.queued_bytes(), head.max_queued_bytes);
  EXPECT_LT(opened.writer.queued_bytes(), head.max_queued_bytes + chunk.size());
  // (Whether it drains before the client reads depends on what the kernels still buffer.)
  std::promise<void> drained;
  opened.writer.OnDrained([&] { drained.set_value(); });
  auto resumed = drained.get_future();
  std::thread producer([&] {
    resumed.wait();
    EXPECT_LT(opened.writer.queued_bytes(), head.max_queued_bytes / 2);
    for (int i = 0; i < 10; ++i) opened.writer.Write(chunk);
    opened.writer.Finish();
  });
  Parser parser;
  parser.body_limit(boost::none);
  ASSERT_FALSE(client->Read(parser));
  producer.join();
  EXPECT_EQ(parser.get().body().size(), (written + 10) * chunk.size());
}

TEST_P(HttpStreamTest, AClientHangingUpIsReportedToTheProducer) {
  StartStreams();
  auto client = Connect();
  client->Write(kGet);
  Opened opened = streams_.Next();
  std::promise<void> closed;
  opened.writer.OnClosed([&] { closed.set_value(); });
  opened.writer.Write("data: one\n\n");
  Parser parser;
  ASSERT_FALSE(client->ReadBody(parser, 11));
  EXPECT_FALSE(opened.writer.closed());
  client->Close();
  ASSERT_EQ(closed.get_future().wait_for(seconds(10)), std::future_status::ready);
  EXPECT_TRUE(opened.writer.closed());
  EXPECT_TRUE(opened.client_gone->load());
  EXPECT_EQ(opened.writer.Write("dropped"), StreamWriter::kClosed);
  EXPECT_TRUE(testing::Eventually([&] { return server_->stats().open_connections == 0; }));
  EXPECT_EQ(server_->stats().requests, 0u);  // never written to its end
}

TEST_P(HttpStreamTest, AbortLeavesTheClientABrokenBody) {
  StartStreams();
  auto client = Connect();
  client->Write(kGet);
  Opened opened = streams_.Next();
  bool told = false;
  opened.writer.OnClosed([&] { told = true; });
  opened.writer.Write("data: one\n\n");
  Parser parser;
  ASSERT_FALSE(client->ReadBody(parser, 11));
  opened.writer.Abort();
  EXPECT_TRUE(opened.writer.closed());
  EXPECT_TRUE(client->Read(parser));  // an error: the body never ends
  EXPECT_FALSE(parser.is_done());
  EXPECT_EQ(parser.get().body(), "data: one\n\n");
  EXPECT_FALSE(told);  // the producer ended it itself
}

TEST_P(HttpStreamTest, ADroppedWriterAbortsItsStream) {
  StartStreams();
  auto client = Connect();
  client->Write(kGet);
  {
    Opened opened = streams_.Next();
    opened.writer.Write("data: one\n\n");
  }
  Parser parser;
  EXPECT_TRUE(client->Read(parser));
  EXPECT_FALSE(parser.is_done());
}

// The idle timeout applies to a client that does not take what is written, never to a stream
// waiting for its producer.
TEST_P(HttpStreamTest, AStreamWaitingForItsProducerOutlivesTheIdleTimeout) {
  StartStreams({}, /*idle_timeout=*/seconds(5));
  auto client = Connect();
  client->Write(kGet);
  Opened opened = streams_.Next();
  opened.writer.Write("data: one\n\n");
  Parser parser;
  ASSERT_FALSE(client->ReadBody(parser, 11));
  Settle();
  Advance(std::chrono::hours(1));
  Settle();
  EXPECT_FALSE(opened.writer.closed());
  opened.writer.Write("data: two\n\n");
  opened.writer.Finish();
  ASSERT_FALSE(client->Read(parser));
  EXPECT_EQ(parser.get().body(), "data: one\n\ndata: two\n\n");
}

TEST_P(HttpStreamTest, AClientThatStopsReadingIsClosedAtTheIdleTimeout) {
  HttpResponseHead head;
  head.max_queued_bytes = 64 * 1024;
  StartStreams(head, /*idle_timeout=*/seconds(30));
  auto client = Connect();
  client->ShrinkReceiveBuffer();
  client->Write(kGet);
  Opened opened = streams_.Next();
  std::promise<void> closed;
  opened.writer.OnClosed([&] { closed.set_value(); });
  FillUntilStuck(opened.writer, std::string(4096, 'x'), head.max_queued_bytes);
  // The server has found the socket full, and set its deadline.
  Advance(seconds(30) - std::chrono::milliseconds(1));
  EXPECT_FALSE(opened.writer.closed());
  // A write still under way when the buffers filled moves the deadline on: the idle timeout
  // counts from the last progress.
  for (int i = 0; i < 20 && !opened.writer.closed(); ++i) {
    Advance(std::chrono::milliseconds(1));
    Settle();
    if (!opened.writer.closed()) Advance(seconds(30) - std::chrono::milliseconds(1));
  }
  ASSERT_EQ(closed.get_future().wait_for(seconds(10)), std::future_status::ready);
  EXPECT_EQ(opened.writer.Write("dropped"), StreamWriter::kClosed);
  const auto started = std::chrono::steady_clock::now();
  server_->Shutdown(seconds(20));  // nothing left in flight
  EXPECT_LT(std::chrono::steady_clock::now() - started, seconds(10));
}

TEST_P(HttpStreamTest, ShutdownWaitsForAStreamToFinish) {
  StartStreams();
  const uint16_t port = server_->port();
  auto client = Connect();
  client->Write(kGet);
  Opened opened = streams_.Next();
  opened.writer.Write("data: one\n\n");
  std::thread shutdown([&] { server_->Shutdown(seconds(20)); });
  // Once the listener is closed the shutdown is draining.
  EXPECT_TRUE(testing::Eventually([&] {
    asio::io_context io;
    asio::ip::tcp::socket socket(io);
    beast::error_code error;
    socket.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), error);
    return static_cast<bool>(error);
  }));
  opened.writer.Write("data: two\n\n");
  opened.writer.Finish();
  Parser parser;
  EXPECT_FALSE(client->Read(parser));
  EXPECT_EQ(parser.get().body(), "data: one\n\ndata: two\n\n");
  shutdown.join();
  EXPECT_EQ(server_->stats().requests, 1u);
}

// A stream still open when the server goes is ended as lost; its writer drops what follows.
TEST_P(HttpStreamTest, AStreamOutlivingTheServerIsClosed) {
  StartStreams();
  auto client = Connect();
  client->Write(kGet);
  Opened opened = streams_.Next();
  opened.writer.Write("data: one\n\n");
  std::atomic<bool> told{false};
  opened.writer.OnClosed([&] { told = true; });
  server_->Shutdown(std::chrono::milliseconds(0));
  server_.reset();
  EXPECT_TRUE(told.load());
  EXPECT_TRUE(opened.writer.closed());
  EXPECT_EQ(opened.writer.Write("dropped"), StreamWriter::kClosed);
  opened.writer.Finish();
}

INSTANTIATE_TEST_SUITE_P(PlainAndTls, HttpStreamTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& param) {
                           return param.param ? "Tls" : "Plain";
                         });

}  // namespace
}  // namespace rampart::net
