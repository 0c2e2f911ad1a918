// HTTPS and mutual TLS on the HTTP server, with certificates made at test time.

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <new>

#include <openssl/ssl.h>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "net/http_server.h"
#include "net/peer_certificate.h"
#include "testing/eventually.h"
#include "testing/fake_clock.h"
#include "testing/test_certs.h"
#include "unread_answer.h"

namespace rampart::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
namespace fs = std::filesystem;
using tcp_socket = asio::ip::tcp::socket;
using testing::KeyAndCert;

constexpr int kConnectionFailed = -1;

class HttpTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    directory_ = fs::path(::testing::TempDir()) /
                 ("rampart_https_" + std::to_string(getpid()) + "_" + info->name());
    fs::create_directories(directory_);
    ca_ = testing::MakeCertificateAuthority("rampart test CA");
    server_cert_ = testing::MakeLeafCertificate(ca_, "rampart test server");
    client_cert_ = testing::MakeLeafCertificate(ca_, "rampart test client");
    Write("ca.pem", ca_.cert_pem);
    Write("server.pem", server_cert_.cert_pem);
    Write("server.key", server_cert_.key_pem);
  }

  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::seconds(5));
    server_.reset();
    fs::remove_all(directory_);
  }

  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(directory_ / name) << text;
    return (directory_ / name).string();
  }

  HttpTlsOptions Tls(bool mutual) const {
    return {.cert = (directory_ / "server.pem").string(),
            .key = (directory_ / "server.key").string(),
            .root_cert = (directory_ / "ca.pem").string(),
            .mutual = mutual};
  }

  // A server whose deadlines read clock_.
  Status Start(HttpTlsOptions tls, std::chrono::seconds idle_timeout = std::chrono::seconds(300),
               size_t max_connections = 4096) {
    HttpServerOptions options;
    options.idle_timeout = idle_timeout;
    options.max_connections = max_connections;
    options.clock = &clock_;
    options.address = "127.0.0.1";
    options.port = 0;
    options.threads = 1;
    options.tls = std::move(tls);
    auto started = HttpServer::Start(options, [this](HttpRequest&& request, Responder responder) {
      HttpResponse response;
      const bool big = request.path() == "/big";
      if (big) {
        response.body.assign(kUnreadBodyBytes, 'x');
      } else {
        response.body = "hello " + std::string(request.path()) + " " + request.body;
      }
      responder.Send(std::move(response));
      if (big) big_answered_.set_value();
    });
    if (!started.ok()) return started.status();
    server_ = std::move(started).value();
    return Status::Ok();
  }

  // POSTs /a then /b on one TLS connection that trusts `ca_pem`, presenting `identity` when given.
  // Returns the second status, or kConnectionFailed when the handshake, a write or a read fails.
  int Get(const std::string& ca_pem, const KeyAndCert* identity) {
    asio::io_context io;
    ssl::context context(ssl::context::tls_client);
    context.add_certificate_authority(asio::buffer(ca_pem));
    context.set_verify_mode(ssl::verify_peer);
    if (identity != nullptr) {
      context.use_certificate_chain(asio::buffer(identity->cert_pem));
      context.use_private_key(asio::buffer(identity->key_pem), ssl::context::pem);
    }
    beast::ssl_stream<beast::tcp_stream> stream(io, context);
    SSL_set_tlsext_host_name(stream.native_handle(), "localhost");
    stream.set_verify_callback(ssl::host_name_verification("localhost"));
    beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(10));
    beast::error_code error;
    beast::get_lowest_layer(stream).connect(
        asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), server_->port()), error);
    if (!error) stream.handshake(ssl::stream_base::client, error);
    int status = kConnectionFailed;
    beast::flat_buffer buffer;
    for (const char* target : {"/a", "/b"}) {
      if (error) return kConnectionFailed;
      http::request<http::string_body> request(http::verb::post, target, 11);
      request.set(http::field::host, "localhost");
      request.body() = std::string("body of ") + target;
      request.prepare_payload();
      http::write(stream, request, error);
      http::response<http::string_body> response;
      if (!error) http::read(stream, buffer, response, error);
      if (error) return kConnectionFailed;
      EXPECT_EQ(response.body(), std::string("hello ") + target + " body of " + target);
      status = response.result_int();
    }
    stream.shutdown(error);
    return status;
  }

  // Connects `stream` (whose context trusts the CA) to the server and shakes hands.
  beast::error_code Open(beast::ssl_stream<beast::tcp_stream>& stream) {
    SSL_set_tlsext_host_name(stream.native_handle(), "localhost");
    beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(10));
    beast::error_code error;
    beast::get_lowest_layer(stream).connect(
        asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), server_->port()), error);
    if (!error) stream.handshake(ssl::stream_base::client, error);
    return error;
  }

  ssl::context TrustingClientContext() const {
    ssl::context context(ssl::context::tls_client);
    context.add_certificate_authority(asio::buffer(ca_.cert_pem));
    context.set_verify_mode(ssl::verify_peer);
    return context;
  }

  // Writes `raw` on a new TLS connection that trusts the CA, then reads until the server ends it
  // (synchronous reads have no timeout here: start the server with a short idle timeout).
  std::string Exchange(const std::string& raw) {
    asio::io_context io;
    ssl::context context = TrustingClientContext();
    beast::ssl_stream<beast::tcp_stream> stream(io, context);
    beast::error_code error = Open(stream);
    if (!error) asio::write(stream, asio::buffer(raw), error);
    std::string received;
    char chunk[4096];
    while (!error) {
      const size_t n = stream.read_some(asio::buffer(chunk), error);
      received.append(chunk, n);
    }
    return received;
  }

  fs::path directory_;
  KeyAndCert ca_;
  KeyAndCert server_cert_;
  KeyAndCert client_cert_;
  std::promise<void> big_answered_;  // the handler has sent its answer to GET /big
  testing::FakeClock clock_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpTlsTest, HttpsServesClientsThatTrustTheServer) {
  ASSERT_TRUE(Start(Tls(/*mutual=*/false)).ok());
  EXPECT_EQ(Get(ca_.cert_pem, nullptr), 200);
  EXPECT_EQ(Get(ca_.cert_pem, &client_cert_), 200);  // a client certificate is simply not asked
  const KeyAndCert other_ca = testing::MakeCertificateAuthority("another CA");
  EXPECT_EQ(Get(other_ca.cert_pem, nullptr), kConnectionFailed);

  // Plain HTTP on the HTTPS port gets no HTTP answer.
  asio::io_context io;
  beast::tcp_stream plain(io);
  plain.expires_after(std::chrono::seconds(10));
  plain.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), server_->port()));
  http::request<http::empty_body> request(http::verb::get, "/a", 11);
  beast::error_code error;
  http::write(plain, request, error);
  beast::flat_buffer buffer;
  http::response<http::string_body> response;
  if (!error) http::read(plain, buffer, response, error);
  EXPECT_TRUE(error);
}

// A TLS 1.3 client may send its request right behind its last handshake message, so that both
// arrive in one segment and the request is read off the socket with the handshake (curl does).
// The server must find it there: it once waited for the socket to become readable again, and the
// request hung until the idle timeout. This client runs TLS over memory buffers, to send the two
// together for certain.
TEST_F(HttpTlsTest, ARequestThatArrivesWithTheHandshakesEndIsAnswered) {
  ASSERT_TRUE(Start(Tls(/*mutual=*/false)).ok());
  SSL_CTX* context = SSL_CTX_new(TLS_client_method());
  ASSERT_NE(context, nullptr);
  SSL_CTX_set_min_proto_version(context, TLS1_3_VERSION);
  SSL* ssl = SSL_new(context);
  BIO* incoming = BIO_new(BIO_s_mem());  // from the server, for OpenSSL to read
  BIO* outgoing = BIO_new(BIO_s_mem());  // what OpenSSL wrote, to send
  SSL_set_bio(ssl, incoming, outgoing);
  SSL_set_connect_state(ssl);
  asio::io_context io;
  tcp_socket socket(io);
  socket.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), server_->port()));
  const timeval timeout{10, 0};
  setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  const auto flush = [&] {
    std::string bytes(static_cast<size_t>(BIO_pending(outgoing)), '\0');
    BIO_read(outgoing, bytes.data(), static_cast<int>(bytes.size()));
    asio::write(socket, asio::buffer(bytes));
  };
  const auto receive = [&] {
    char chunk[16384];
    const ssize_t got = ::recv(socket.native_handle(), chunk, sizeof(chunk), 0);
    if (got > 0) BIO_write(incoming, chunk, static_cast<int>(got));
    return got > 0;
  };
  // The handshake, with the client's last flight held back.
  while (SSL_do_handshake(ssl) != 1) {
    ASSERT_EQ(SSL_get_error(ssl, -1), SSL_ERROR_WANT_READ);
    flush();
    ASSERT_TRUE(receive()) << "the server ended the handshake";
  }
  const std::string request = "GET /a HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
  ASSERT_EQ(SSL_write(ssl, request.data(), static_cast<int>(request.size())),
            static_cast<int>(request.size()));
  flush();  // the Finished message and the request, in one write
  std::string answer;
  char plain[4096];
  while (answer.find("hello /a") == std::string::npos && receive()) {
    int read = 0;
    while ((read = SSL_read(ssl, plain, sizeof(plain))) > 0) answer.append(plain, read);
  }
  EXPECT_EQ(answer.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << answer;
  EXPECT_NE(answer.find("hello /a"), std::string::npos) << answer;
  SSL_free(ssl);
  SSL_CTX_free(context);
}

// A refused request whose body is still on its way (no `Expect: 100-continue`) gets its answer:
// the server reads and drops the rest before it says goodbye, as over plain HTTP, rather than
// closing on unread input, which resets the connection under the answer.
TEST_F(HttpTlsTest, ARefusedClientStillSendingItsBodyReadsTheAnswer) {
  HttpTlsOptions tls = Tls(/*mutual=*/false);
  HttpServerOptions options;
  options.address = "127.0.0.1";
  options.port = 0;
  options.threads = 1;
  options.max_body_bytes = 1024;
  options.clock = &clock_;
  options.tls = tls;
  auto started =
      HttpServer::Start(options, [](HttpRequest&&, Responder responder) { responder.Send({}); });
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  server_ = std::move(started).value();
  asio::io_context io;
  ssl::context context = TrustingClientContext();
  beast::ssl_stream<beast::tcp_stream> stream(io, context);
  ASSERT_FALSE(Open(stream));
  const std::string head =
      "POST /big HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1048576\r\n\r\n";
  asio::write(stream, asio::buffer(head + std::string(256 * 1024, 'x')));
  http::response<http::string_body> response;
  beast::flat_buffer buffer;
  beast::error_code error;
  http::read(stream, buffer, response, error);
  ASSERT_FALSE(error) << error.message();
  EXPECT_EQ(response.result_int(), 413);
  EXPECT_NE(response.body().find("exceeds the 1024 byte limit"), std::string::npos);
}

// An answer whose building throws (out of memory) ends the connection without counting the
// request in flight for ever.
TEST_F(HttpTlsTest, AnAnswerThatCannotBeBuiltEndsTheConnection) {
  HttpServerOptions options;
  options.address = "127.0.0.1";
  options.port = 0;
  options.threads = 1;
  options.clock = &clock_;
  options.tls = Tls(/*mutual=*/false);
  auto started = HttpServer::Start(options, [](HttpRequest&&, Responder responder) {
    responder.SendWith([]() -> HttpResponse { throw std::bad_alloc(); });
  });
  ASSERT_TRUE(started.ok());
  server_ = std::move(started).value();
  EXPECT_EQ(Get(ca_.cert_pem, nullptr), kConnectionFailed);
  const auto begun = std::chrono::steady_clock::now();
  server_->Shutdown(std::chrono::seconds(20));
  EXPECT_LT(std::chrono::steady_clock::now() - begun, std::chrono::seconds(10));
  EXPECT_EQ(server_->stats().requests, 0u);
}

TEST_F(HttpTlsTest, HeadIsAnsweredWithoutABodyAndTheConnectionGoesOn) {
  ASSERT_TRUE(Start(Tls(/*mutual=*/false)).ok());
  const std::string received = Exchange(
      "HEAD /a HTTP/1.1\r\nHost: localhost\r\n\r\n"
      "GET /b HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
  // The HEAD answer's head says how long the body would be ("hello /a ") and nothing follows it.
  const size_t end_of_head = received.find("\r\n\r\n");
  ASSERT_NE(end_of_head, std::string::npos) << received;
  EXPECT_NE(received.find("Content-Length: 9\r\n"), std::string::npos) << received;
  EXPECT_EQ(received.compare(end_of_head + 4, 17, "HTTP/1.1 200 OK\r\n"), 0) << received;
  EXPECT_EQ(received.substr(received.size() - 9), "hello /b ") << received;
}

// As over plain HTTP: an answer the client does not take (it stops reading) is given up after
// the idle timeout, so a shutdown does not wait for it.
TEST_F(HttpTlsTest, AnAnswerTheClientDoesNotTakeIsGivenUpAfterTheTimeout) {
  ASSERT_TRUE(Start(Tls(/*mutual=*/false), /*idle_timeout=*/std::chrono::seconds(30)).ok());
  asio::io_context io;
  ssl::context context = TrustingClientContext();
  beast::ssl_stream<beast::tcp_stream> stream(io, context);
  ASSERT_FALSE(Open(stream));
  asio::write(stream, asio::buffer(std::string("GET /big HTTP/1.1\r\nHost: localhost\r\n\r\n")));
  big_answered_.get_future().wait();  // and never read
  ExpectShutdownGivesUpTheUnreadAnswer(*server_, clock_, std::chrono::seconds(30));
}

// Past the connection limit an HTTPS connection is closed at once: no handshake is spent on it.
TEST_F(HttpTlsTest, ConnectionsPastTheLimitAreClosedWithoutAHandshake) {
  ASSERT_TRUE(Start(Tls(/*mutual=*/false), std::chrono::seconds(300), /*max_connections=*/1).ok());
  asio::io_context io;
  ssl::context context = TrustingClientContext();
  beast::ssl_stream<beast::tcp_stream> held(io, context);
  ASSERT_FALSE(Open(held));
  beast::ssl_stream<beast::tcp_stream> refused(io, context);
  EXPECT_TRUE(Open(refused));
  EXPECT_EQ(server_->stats().refused[static_cast<size_t>(HttpRefusal::kConnections)], 1u);
  beast::error_code ignored;
  held.shutdown(ignored);
  beast::get_lowest_layer(held).close();
  ASSERT_TRUE(testing::Eventually([&] { return server_->stats().open_connections == 0; }));
  EXPECT_EQ(Get(ca_.cert_pem, nullptr), 200);
}

TEST_F(HttpTlsTest, MutualTlsRequiresAClientCertificateFromTheRootCa) {
  ASSERT_TRUE(Start(Tls(/*mutual=*/true)).ok());
  EXPECT_EQ(Get(ca_.cert_pem, &client_cert_), 200);
  EXPECT_EQ(Get(ca_.cert_pem, nullptr), kConnectionFailed);
  const KeyAndCert other_ca = testing::MakeCertificateAuthority("another CA");
  const KeyAndCert stranger = testing::MakeLeafCertificate(other_ca, "stranger");
  EXPECT_EQ(Get(ca_.cert_pem, &stranger), kConnectionFailed);
}

TEST_F(HttpTlsTest, MutualTlsRequestsCarryTheVerifiedClientCertificate) {
  std::mutex mutex;
  std::vector<std::shared_ptr<const Peer>> peers;
  HttpServerOptions options;
  options.address = "127.0.0.1";
  options.port = 0;
  options.threads = 1;
  options.tls = Tls(/*mutual=*/true);
  auto started = HttpServer::Start(options, [&](HttpRequest&& request, Responder responder) {
    {
      std::lock_guard lock(mutex);
      peers.push_back(request.peer);
    }
    HttpResponse response;
    response.body = "hello " + std::string(request.path()) + " " + request.body;
    responder.Send(std::move(response));
  });
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  server_ = std::move(started).value();
  const KeyAndCert workload = testing::MakeLeafCertificate(
      ca_, "web.svc.acme.internal",
      "URI:spiffe://acme.internal/ns/prod/sa/web,DNS:batch.acme.internal,email:ops@acme.example");
  ASSERT_EQ(Get(ca_.cert_pem, &workload), 200);

  std::lock_guard lock(mutex);
  ASSERT_EQ(peers.size(), 2u);
  ASSERT_NE(peers[0], nullptr);
  EXPECT_EQ(peers[1], peers[0]);  // one per connection
  const Peer& peer = *peers[0];
  EXPECT_EQ(peer.address, "127.0.0.1");
  ASSERT_TRUE(peer.has_certificate);
  EXPECT_EQ(peer.certificate.subject, "CN=web.svc.acme.internal");
  EXPECT_EQ(peer.certificate.common_name, "web.svc.acme.internal");
  EXPECT_EQ(peer.certificate.dns_names,
            (std::vector<std::string>{"localhost", "batch.acme.internal"}));
  EXPECT_EQ(peer.certificate.uris,
            (std::vector<std::string>{"spiffe://acme.internal/ns/prod/sa/web"}));
  EXPECT_EQ(peer.certificate.emails, (std::vector<std::string>{"ops@acme.example"}));
  // The same conversion from PEM, as the gRPC front end gets the certificate.
  const Result<PeerCertificate> from_pem = PeerCertificateFromPem(workload.cert_pem);
  ASSERT_TRUE(from_pem.ok()) << from_pem.status().ToString();
  EXPECT_EQ(from_pem->sha256_fingerprint, peer.certificate.sha256_fingerprint);
  EXPECT_EQ(from_pem->sha256_fingerprint.size(), 64u);
  EXPECT_EQ(from_pem->uris, peer.certificate.uris);
}

TEST_F(HttpTlsTest, OneWayTlsPeersHaveNoCertificate) {
  std::mutex mutex;
  std::shared_ptr<const Peer> seen;
  HttpServerOptions options;
  options.address = "127.0.0.1";
  options.port = 0;
  options.threads = 1;
  options.tls = Tls(/*mutual=*/false);
  auto started = HttpServer::Start(options, [&](HttpRequest&& request, Responder responder) {
    {
      std::lock_guard lock(mutex);
      seen = request.peer;
    }
    HttpResponse response;
    response.body = "hello " + std::string(request.path()) + " " + request.body;
    responder.Send(std::move(response));
  });
  ASSERT_TRUE(started.ok());
  server_ = std::move(started).value();
  ASSERT_EQ(Get(ca_.cert_pem, nullptr), 200);
  std::lock_guard lock(mutex);
  ASSERT_NE(seen, nullptr);
  EXPECT_EQ(seen->address, "127.0.0.1");
  EXPECT_FALSE(seen->has_certificate);
}

TEST(PeerCertificateTest, RefusesWhatIsNotACertificate) {
  EXPECT_EQ(PeerCertificateFromPem("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PeerCertificateFromPem("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(PeerCertificateFromX509(nullptr).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(HttpTlsTest, UnusableFilesFailAtStart) {
  HttpTlsOptions missing_key = Tls(false);
  missing_key.key = (directory_ / "absent.key").string();
  Status status = Start(missing_key);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("absent.key"), std::string::npos) << status.message();

  HttpTlsOptions mutual_without_root = Tls(true);
  mutual_without_root.root_cert.clear();
  EXPECT_EQ(Start(mutual_without_root).code(), StatusCode::kInvalidArgument);

  HttpTlsOptions wrong_key = Tls(false);
  wrong_key.key = Write("client.key", client_cert_.key_pem);  // not the certificate's key
  EXPECT_EQ(Start(wrong_key).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rampart::net
