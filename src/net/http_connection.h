#pragma once

// Internal to src/net: what the HTTP server's two kinds of connection share. Plain HTTP runs on
// EventLoops (http_plain.cc), HTTPS on Boost.Asio and Beast (http_tls.cc); HttpServer
// (http_server.cc) owns the listening socket, the I/O threads and one engine.

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/beast/http/basic_parser.hpp>

#include "core/clock.h"
#include "core/in_flight.h"
#include "core/status.h"
#include "core/unique_function.h"
#include "net/http.h"
#include "net/http_server.h"

namespace rampart::net {

class HttpCore;
class HttpStream;

// A share of HttpServerOptions::max_body_bytes_in_flight held by one request being read; given
// back when it is destroyed (the request handed over, or its connection gone). Move-only.
class BodyReservation {
 public:
  BodyReservation() = default;
  BodyReservation(BodyReservation&& other) noexcept
      : core_(std::exchange(other.core_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  BodyReservation& operator=(BodyReservation&& other) noexcept;
  ~BodyReservation() { Release(); }

  // Adds `bytes` to the reservation; false (nothing added) when that would pass the limit.
  bool Grow(HttpCore& core, uint64_t bytes);
  void Release();

 private:
  HttpCore* core_ = nullptr;
  uint64_t bytes_ = 0;
};

// A connection's place under HttpServerOptions::max_connections, given back when destroyed.
class ConnectionSlot {
 public:
  ConnectionSlot() = default;
  explicit ConnectionSlot(HttpCore* core) : core_(core) {}
  ConnectionSlot(ConnectionSlot&& other) noexcept : core_(std::exchange(other.core_, nullptr)) {}
  ConnectionSlot& operator=(ConnectionSlot&&) = delete;
  ~ConnectionSlot();

 private:
  HttpCore* core_ = nullptr;
};

// What every connection reports to: the options, the handler, the count of requests in flight
// that a shutdown drains, and the limits shared by all connections. Thread safe.
class HttpCore {
 public:
  HttpCore(const HttpServerOptions& options, HttpHandler handler)
      : options_(options),
        handler_(std::move(handler)),
        clock_(options.clock != nullptr ? *options.clock : Clock::Coarse()) {}

  const HttpServerOptions& options() const { return options_; }
  // Now, for connection deadlines.
  SteadyTime Now() const { return clock_.Now(); }

  // A whole request was read: counts it in flight and hands it to the handler. An exception the
  // handler lets out is logged, and the responder it dropped answers 500.
  void Dispatch(HttpRequest&& request, Responder responder);
  // Its answer was written (`received`: when the request had been read).
  void Finished(SteadyTime received);
  // Its answer will never be written (the connection failed or closed first).
  void Abandoned();

  // A slot for a new connection, or nullopt over max_connections (counted as refused).
  std::optional<ConnectionSlot> OpenConnection();
  // Counts a refusal and tells options().on_refused.
  void Refused(HttpRefusal refusal);

  // Waits up to `timeout` until no request is in flight.
  void Drain(std::chrono::milliseconds timeout) { in_flight_.Drain(timeout); }
  HttpServer::Stats stats() const;

 private:
  friend class BodyReservation;
  friend class ConnectionSlot;

  const HttpServerOptions options_;
  HttpHandler handler_;
  const Clock& clock_;
  InFlight in_flight_;
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> handle_ns_{0};
  std::atomic<uint64_t> open_connections_{0};
  std::atomic<uint64_t> body_bytes_in_flight_{0};
  std::array<std::atomic<uint64_t>, kHttpRefusalKinds> refused_{};
};

// When the request a connection is reading must be whole (HttpServerOptions' header and body
// timeouts), in HttpCore::Now()'s times.
class RequestDeadline {
 public:
  explicit RequestDeadline(const HttpServerOptions& options) : options_(options) {}

  // The request's first bytes arrived at `now`: its head is due header_timeout later.
  void HeadStarted(SteadyTime now) {
    head_started_ = true;
    body_started_.reset();
    due_ = now + options_.header_timeout;
  }
  // Its head is whole at `now`: the body is due body_timeout later, plus a second for every
  // body_min_rate bytes it has brought so far (BodyReceived).
  void BodyStarted(SteadyTime now) {
    body_started_ = now;
    due_ = now + options_.body_timeout;
  }
  void BodyReceived(uint64_t total_bytes);
  // Back to waiting for a request (none of it read yet).
  void Reset() {
    head_started_ = false;
    body_started_.reset();
  }

  bool started() const { return head_started_; }
  bool reading_body() const { return body_started_.has_value(); }
  SteadyTime due() const { return due_; }
  // The refusal once due() has passed.
  HttpRefusal refusal() const {
    return reading_body() ? HttpRefusal::kBodyTimeout : HttpRefusal::kHeaderTimeout;
  }

 private:
  const HttpServerOptions& options_;
  bool head_started_ = false;
  std::optional<SteadyTime> body_started_;
  SteadyTime due_{};
};

// The 408 for a request whose head or body came too slowly.
HttpResponse TimeoutResponse(HttpRefusal refusal);

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
  // Answers the current request with a stream (Responder::StartStream), from any thread: makes
  // the stream the writer shares and starts writing on this connection's thread.
  virtual std::shared_ptr<HttpStream> StartStream(std::shared_ptr<Connection> self,
                                                  HttpResponseHead head) = 0;
  // On this connection's thread, posted by the stream: takes what its producer wrote and
  // writes it.
  virtual void PumpStream() = 0;
};

// Beast's HTTP/1.1 request parser (validation, chunked bodies, limits) writing straight into an
// HttpRequest: no header container in between, no copy out of it. Header names are lower-cased.
class RequestParser final : public boost::beast::http::basic_parser<true> {
 public:
  static constexpr uint32_t kHeaderLimit = 64 * 1024;
  // The most of a declared Content-Length reserved before the body arrives.
  static constexpr uint64_t kBodyReserve = 1024 * 1024;
  // Parsing stopped because the body would pass HttpServerOptions::max_body_bytes_in_flight.
  static inline const boost::system::error_code kBodiesInFlightError =
      boost::system::errc::make_error_code(boost::system::errc::not_enough_memory);

  // A streamed body passed its route's limit (HttpServerOptions::streamed_body).
  static inline const boost::system::error_code kStreamLimitError =
      boost::system::errc::make_error_code(boost::system::errc::file_too_large);

  // Bodies over `body_limit` bytes fail with http::error::body_limit, before any is read when
  // the length is declared. The body's bytes are reserved against the server's bodies in
  // flight (all of a declared length at once, chunks as they come); past that limit parsing
  // fails with kBodiesInFlightError. The reservation is held until the parser is destroyed.
  //
  // With `stream_sink` set and HttpServerOptions::streamed_body given, a request whose route
  // streams its body (streamed()) appends its body's bytes to *stream_sink instead, reserves
  // nothing, and is limited by the route's limit: a declared length over it sets over_limit()
  // (parsing goes on, for the consumer to be told); bytes past it fail with kStreamLimitError.
  RequestParser(HttpRequest& request, uint64_t body_limit, HttpCore& core,
                std::string* stream_sink = nullptr);

  bool streamed() const { return stream_limit_ > 0; }
  bool over_limit() const { return over_limit_; }
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
  void on_header_impl(error_code& error) override;
  void on_body_init_impl(const boost::optional<uint64_t>& length, error_code&) override;
  size_t on_body_impl(string_view body, error_code&) override;
  void on_chunk_header_impl(uint64_t size, string_view, error_code& error) override;
  // Takes a piece of a streamed body; false (and `error` set) past the route's limit.
  bool TakeStreamed(string_view body, error_code& error);
  size_t on_chunk_body_impl(uint64_t, string_view body, error_code&) override;
  void on_finish_impl(error_code&) override {}

  HttpRequest& request_;
  HttpCore& core_;
  BodyReservation reservation_;
  std::string* stream_sink_ = nullptr;
  uint64_t whole_limit_ = 0;   // max_body_bytes, checked here when streaming is possible
  uint64_t stream_limit_ = 0;  // the route's limit; 0: the body is read whole
  uint64_t streamed_bytes_ = 0;
  bool over_limit_ = false;
  unsigned version_ = 11;
  bool expects_continue_ = false;
};

// The answer to `error` from RequestParser (413, 503 or 400), or nullopt when it is not the
// request's fault (the connection failed or closed); the refusal is counted on `core`.
std::optional<HttpResponse> ParseErrorResponse(boost::beast::error_code error, HttpCore& core);

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
  // From the controlling thread while the I/O threads run: applies every connection's deadline
  // on its thread, and returns once all have (HttpServer::CheckDeadlines).
  virtual void CheckDeadlines() = 0;
};

Result<std::unique_ptr<HttpEngine>> MakePlainEngine(HttpCore& core, size_t threads);
// Errors: InvalidArgument for certificate or key files that cannot be read or used.
Result<std::unique_ptr<HttpEngine>> MakeTlsEngine(HttpCore& core, size_t threads,
                                                  const HttpTlsOptions& tls);

// Appends an HTTP/1.x response head: status line, Server, Content-Type, the response's own
// headers, Content-Length and, where the version's default differs, Connection.
void FormatHead(const HttpResponse& response, unsigned version, bool keep_alive, std::string& out);
// Appends a head's first lines: status line, Server, Content-Type and `headers` (line breaks in
// values written as spaces), each ending in CRLF; the caller adds the rest and the blank line.
void FormatHeadLines(int status, std::string_view content_type,
                     const std::vector<std::pair<std::string, std::string>>& headers,
                     unsigned version, std::string& out);

// The answer to a request that is not dispatched: {"error": message}.
HttpResponse ErrorResponse(int status, std::string_view message);

}  // namespace rampart::net
