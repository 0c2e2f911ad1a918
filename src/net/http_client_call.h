#pragma once

// HttpClient's insides, shared by http_client.cc (threads, pools) and http_client_call.cc (one
// call's connect, write and read). Not part of the net module's interface.
//
// Everything here lives on one I/O thread (its endpoint's) and is touched only there, except
// ClientShared (atomic) and the HttpCall::State members marked otherwise.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>  // before Boost.Asio 1.74, whose awaitable.hpp needs std::exchange
#include <vector>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/basic_parser.hpp>

#include "core/clock.h"
#include "net/http_client.h"

namespace rampart::net::client {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using Executor = asio::io_context::executor_type;
using Socket = asio::basic_stream_socket<tcp, Executor>;
using TlsStream = ssl::stream<Socket>;
using Resolver = asio::ip::basic_resolver<tcp, Executor>;
using Timer = asio::basic_waitable_timer<std::chrono::steady_clock,
                                         asio::wait_traits<std::chrono::steady_clock>, Executor>;
using Call = HttpCall::State;

// What a client's pools share: its counters, and whether it is being destroyed.
struct ClientShared {
  std::atomic<bool> closing{false};
  std::atomic<uint64_t> opened{0};
  std::atomic<uint64_t> reused{0};
  std::atomic<uint64_t> failed{0};
  std::atomic<uint64_t> retries{0};
  std::atomic<uint64_t> calls{0};
};

class Pool;

// One connection to an endpoint, plain or TLS. Owned by the call using it, or by its pool while
// idle.
class ClientConnection {
 public:
  // Reserved once per connection and reused by its calls: reads take at most this much.
  static constexpr size_t kReadBytes = 16 * 1024;

  explicit ClientConnection(const Executor& executor) : socket_(executor) {}

  Socket& Lowest() { return tls_ ? tls_->next_layer() : socket_; }
  bool tls() const { return tls_.has_value(); }
  // Wraps the connected socket in TLS (before the handshake).
  TlsStream& StartTls(ssl::context& context) { return tls_.emplace(std::move(socket_), context); }

  template <typename Buffers, typename Handler>
  void AsyncReadSome(const Buffers& buffers, Handler&& handler) {
    if (tls_) {
      tls_->async_read_some(buffers, std::forward<Handler>(handler));
    } else {
      socket_.async_read_some(buffers, std::forward<Handler>(handler));
    }
  }
  template <typename Buffers, typename Handler>
  void AsyncWrite(const Buffers& buffers, Handler&& handler) {
    if (tls_) {
      asio::async_write(*tls_, buffers, std::forward<Handler>(handler));
    } else {
      asio::async_write(socket_, buffers, std::forward<Handler>(handler));
    }
  }

  // An idle connection the server has closed or reset (or sent unasked-for bytes on) reads as
  // ready; a live one would block.
  bool LooksAlive();
  // Closes the socket at once (pending operations end with operation_aborted).
  void Close();

  std::optional<Resolver> resolver;  // while resolving the host
  boost::beast::flat_buffer buffer;  // bytes read and not yet parsed
  // The head of the response being read: kept here so kept-alive calls reuse its memory.
  HttpHeaders response_headers;
  SteadyTime idle_since{};

 private:
  Socket socket_;  // until StartTls moves it into tls_
  std::optional<TlsStream> tls_;
};

// Beast's response parser, handing the head and body pieces to its call without copies.
class ResponseParser final : public boost::beast::http::basic_parser<false> {
 public:
  explicit ResponseParser(Call& call);

 private:
  using string_view = boost::beast::string_view;
  using error_code = boost::beast::error_code;
  void on_request_impl(boost::beast::http::verb, string_view, string_view, int,
                       error_code&) override {}
  void on_response_impl(int status, string_view reason, int version, error_code&) override;
  void on_field_impl(boost::beast::http::field, string_view name, string_view value,
                     error_code&) override;
  void on_header_impl(error_code& error) override;
  void on_body_init_impl(const boost::optional<uint64_t>&, error_code&) override {}
  size_t on_body_impl(string_view body, error_code& error) override;
  void on_chunk_header_impl(uint64_t, string_view, error_code&) override {}
  size_t on_chunk_body_impl(uint64_t, string_view body, error_code& error) override;
  void on_finish_impl(error_code&) override {}

  Call& call_;
};

// One endpoint's connections and the calls to it, on the endpoint's I/O thread.
class Pool {
 public:
  Pool(Endpoint endpoint, asio::io_context& context, const HttpClientOptions& options,
       ssl::context* tls, ClientShared& stats);

  const Endpoint& endpoint() const { return endpoint_; }
  const std::string& key() const { return key_; }
  const std::string& host_header() const { return host_header_; }
  const Executor& executor() const { return executor_; }
  ssl::context* tls() const { return tls_; }
  ClientShared& stats() { return stats_; }  // also `closing`
  bool shutting_down() const { return shutting_down_; }

  // Starts `call` on a pooled connection, a new one, or queues it for one.
  void Start(const std::shared_ptr<Call>& call);
  // The call is done with its connection; a reusable one goes to a waiting call or the idle
  // list, any other is closed.
  void Release(std::shared_ptr<ClientConnection> connection, bool reusable);
  // Replaces a connection that failed before its request was written by a fresh one for `call`.
  void Reconnect(const std::shared_ptr<Call>& call, std::shared_ptr<ClientConnection> failed);
  // Forgets a call that ended (it may be waiting for a connection).
  void Forget(Call& call);
  // Ends every call and closes every connection (the client is being destroyed).
  void Shutdown();

 private:
  void OpenFor(const std::shared_ptr<Call>& call);
  void ArmSweep();
  void Sweep();

  const Endpoint endpoint_;
  const std::string key_;
  const std::string host_header_;
  Executor executor_;
  const HttpClientOptions& options_;
  ssl::context* tls_;  // null for http endpoints
  ClientShared& stats_;
  size_t open_ = 0;                                      // connections open or being opened
  std::vector<std::shared_ptr<ClientConnection>> idle_;  // most recently used last
  std::deque<std::shared_ptr<Call>> waiting_;            // for a connection, oldest first
  Call* active_ = nullptr;  // calls started and not done: an intrusive list
  Timer sweep_;
  bool sweeping_ = false;
  bool shutting_down_ = false;
};

}  // namespace rampart::net::client

namespace rampart::net {

// One call: the request, its connection while it has one, the parser, the timer, the sink.
class HttpCall::State : public std::enable_shared_from_this<HttpCall::State> {
 public:
  // `head` is the formatted request head, or empty with `invalid` set.
  State(client::Pool& pool, std::shared_ptr<HttpResponseSink> sink, std::string head,
        HttpClientRequest&& request, Status invalid);

  // On the pool's thread, as the pool takes the call: its connect timeout starts.
  void Begin();
  // Why the request cannot be sent (OK when it can).
  const Status& invalid() const { return invalid_; }
  // Given a connection by the pool: `fresh` ones are connected first.
  void Use(std::shared_ptr<client::ClientConnection> connection, bool fresh);
  void Cancel();
  void Resume();
  // Ends the call with `status` (not OK) unless it ended already.
  void Fail(Status status, HttpClientError error);

  const client::Executor& executor() const { return pool_.executor(); }

  // For ResponseParser.
  void OnStatusLine(int status, std::string_view reason, int version);
  void OnField(std::string_view name, std::string_view value) {
    connection_->response_headers.Add(name, value);
  }
  void OnHeadParsed();
  // Returns false to stop the parser (the call failed or the sink threw).
  bool OnBodyPiece(std::string_view piece);
  bool sink_ok() const { return sink_failure_.ok(); }

  // The pool's intrusive list of calls in flight, and what keeps each alive while it is (a
  // paused call has no operation pending to hold it).
  State* previous = nullptr;
  State* next = nullptr;
  std::shared_ptr<State> self;

 private:
  enum class Phase { kQueued, kConnecting, kSending, kWaitingFirstByte, kReading, kDone };

  void Connect();
  void OnConnected();
  void Write();
  void OnWritten(const boost::system::error_code& error);
  // Replaces a reused connection that failed before the server can have acted on the request
  // with a new one, once per call; false when the connection was new or already replaced.
  bool RetryOnNewConnection();
  void Read();
  void OnRead(const boost::system::error_code& error, size_t bytes);
  void Parse();
  void OnParseError(const boost::system::error_code& error);
  void Finish();
  void Complete(const Status& status, HttpClientError error);
  void SetPhaseDeadline(SteadyTime deadline);
  void ArmTimer();
  void OnTimer(uint64_t generation);
  // Runs `body`, a step of the call; an exception from it (or from the sink) ends the call.
  template <typename Body>
  void Step(Body&& body);

  client::Pool& pool_;
  std::shared_ptr<HttpResponseSink> sink_;
  std::string head_;  // the request's status line and fields
  std::string body_;
  Status invalid_;  // why the request cannot be sent, if it cannot
  const HttpClientTimeouts timeouts_;
  const uint64_t max_response_bytes_;
  const bool head_request_;
  std::shared_ptr<client::ClientConnection> connection_;
  std::optional<client::ResponseParser> parser_;
  std::string reason_;
  int status_ = 0;
  int version_ = 11;
  Phase phase_ = Phase::kQueued;
  client::Timer timer_;
  SteadyTime total_deadline_;
  SteadyTime phase_deadline_;
  SteadyTime timer_due_{};
  uint64_t timer_generation_ = 0;
  bool timer_pending_ = false;
  bool fresh_ = true;       // the connection was opened for this call
  bool retried_ = false;    // a failed reused connection was replaced once
  bool paused_ = false;     // the sink returned false from OnBody
  bool got_bytes_ = false;  // a response byte arrived
  Status sink_failure_;     // what the sink threw, to end the call with
};

}  // namespace rampart::net
