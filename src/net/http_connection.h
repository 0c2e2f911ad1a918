#pragma once

// Internal to src/net: what the HTTP server's two kinds of connection share. Plain HTTP runs on
// EventLoops (http_plain.cc), HTTPS on Boost.Asio and Beast (http_tls.cc); HttpServer
// (http_server.cc) owns the listening socket, the I/O threads and one engine.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <boost/beast/http/basic_parser.hpp>

#include "core/clock.h"
#include "core/in_flight.h"
#include "core/status.h"
#include "core/unique_function.h"
#include "net/http.h"
#include "net/http_server.h"

namespace rampart::net {

// What every connection reports to: the options, the handler, and the count of requests in
// flight that a shutdown drains. Thread safe.
class HttpCore {
 public:
  HttpCore(const HttpServerOptions& options, HttpHandler handler)
      : options_(options), handler_(std::move(handler)) {}

  const HttpServerOptions& options() const { return options_; }

  // A whole request was read: counts it in flight and hands it to the handler.
  void Dispatch(HttpRequest&& request, Responder responder) {
    in_flight_.Enter();
    handler_(std::move(request), std::move(responder));
  }
  // Its answer was written (`received`: when the request had been read).
  void Finished(SteadyTime received);
  // Its answer will never be written (the connection failed or closed first).
  void Abandoned();

  // Waits up to `timeout` until no request is in flight.
  void Drain(std::chrono::milliseconds timeout) { in_flight_.Drain(timeout); }
  HttpServer::Stats stats() const {
    return {requests_.load(std::memory_order_relaxed), handle_ns_.load(std::memory_order_relaxed)};
  }

 private:
  const HttpServerOptions options_;
  HttpHandler handler_;
  InFlight in_flight_;
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> handle_ns_{0};
};

// One client connection: read a request, hand it to the handler, write the answer, repeat. It
// lives on one I/O thread, kept alive by that thread's engine and by a Responder.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  virtual ~Connection() = default;
  // Writes the answer to the current request on this connection's thread, at once when called
  // there. `self` is this connection, handed over by the Responder.
  virtual void Answer(std::shared_ptr<Connection> self, HttpResponse response) = 0;
  virtual void AnswerWith(std::shared_ptr<Connection> self,
                          UniqueFunction<HttpResponse()> make_response) = 0;
};

// Beast's HTTP/1.1 request parser (validation, chunked bodies, limits) writing straight into an
// HttpRequest: no header container in between, no copy out of it. Header names are lower-cased.
class RequestParser final : public boost::beast::http::basic_parser<true> {
 public:
  static constexpr uint32_t kHeaderLimit = 64 * 1024;
  // The most of a declared Content-Length reserved before the body arrives.
  static constexpr uint64_t kBodyReserve = 1024 * 1024;

  // Bodies over `body_limit` bytes fail with http::error::body_limit, before any is read when
  // the length is declared.
  RequestParser(HttpRequest& request, uint64_t body_limit);

  unsigned version() const { return version_; }
  // `Expect: 100-continue` from an HTTP/1.1 client (RFC 9110 forbids answering 1.0 with 100).
  bool expects_continue() const { return expects_continue_; }

 private:
  using string_view = boost::beast::string_view;
  using error_code = boost::beast::error_code;

  void on_request_impl(boost::beast::http::verb, string_view method, string_view target,
                       int version, error_code&) override;
  void on_response_impl(int, string_view, int, error_code&) override {}
  void on_field_impl(boost::beast::http::field field, string_view name, string_view value,
                     error_code&) override;
  void on_header_impl(error_code&) override {}
  void on_body_init_impl(const boost::optional<uint64_t>& length, error_code&) override;
  size_t on_body_impl(string_view body, error_code&) override;
  void on_chunk_header_impl(uint64_t, string_view, error_code&) override {}
  size_t on_chunk_body_impl(uint64_t, string_view body, error_code&) override;
  void on_finish_impl(error_code&) override {}

  HttpRequest& request_;
  unsigned version_ = 11;
  bool expects_continue_ = false;
};

// The answer to `error` from RequestParser (413 or 400), or nullopt when it is not the
// request's fault (the connection failed or closed).
std::optional<HttpResponse> ParseErrorResponse(boost::beast::error_code error, uint64_t body_limit);

// Accepts and serves connections on the I/O threads.
class HttpEngine {
 public:
  virtual ~HttpEngine() = default;
  // Takes over `listener`, a listening socket, before the threads start.
  virtual Status Listen(int listener) = 0;
  // Serves on the calling thread, I/O thread number `index`, until Stop.
  virtual void Run(size_t index) = 0;
  // From the controlling thread while the I/O threads run: closes the listening socket and
  // returns once it is closed. Open connections keep being served.
  virtual void StopAccepting() = 0;
  // Makes every Run return; connections still open are closed when the engine is destroyed.
  virtual void Stop() = 0;
};

Result<std::unique_ptr<HttpEngine>> MakePlainEngine(HttpCore& core, size_t threads);
// Errors: InvalidArgument for certificate or key files that cannot be read or used.
Result<std::unique_ptr<HttpEngine>> MakeTlsEngine(HttpCore& core, size_t threads,
                                                  const HttpTlsOptions& tls);

// Appends an HTTP/1.x response head: status line, Server, Content-Type, the response's own
// headers, Content-Length and, where the version's default differs, Connection.
void FormatHead(const HttpResponse& response, unsigned version, bool keep_alive, std::string& out);

// The answer to a request that is not dispatched: {"error": message}.
HttpResponse ErrorResponse(int status, std::string_view message);

}  // namespace rampart::net
