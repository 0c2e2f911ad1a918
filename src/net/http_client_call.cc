// One HttpClient call: connect (resolve, TCP, TLS), write the request, read and parse the
// response, deliver it to the sink, and time each step out.

#include <sys/socket.h>

#include <array>
#include <cerrno>

#include <boost/beast/http/error.hpp>

#include "core/exceptions.h"
#include "core/logging.h"
#include "net/http_client_call.h"

namespace rampart::net {
namespace client {

bool ClientConnection::LooksAlive() {
  char byte = 0;
  const ssize_t peeked = ::recv(Lowest().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return peeked < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

void ClientConnection::Close() {
  if (resolver) resolver->cancel();
  boost::system::error_code ignored;
  Lowest().shutdown(tcp::socket::shutdown_both, ignored);
  Lowest().close(ignored);
}

ResponseParser::ResponseParser(Call& call) : call_(call) {
  header_limit(64 * 1024);
  eager(false);  // one element per put(), so a pausing sink stops the parse where it asked
}

void ResponseParser::on_response_impl(int status, string_view reason, int version, error_code&) {
  call_.OnStatusLine(status, std::string_view(reason.data(), reason.size()), version);
}

void ResponseParser::on_field_impl(boost::beast::http::field, string_view name, string_view value,
                                   error_code&) {
  call_.OnField(std::string_view(name.data(), name.size()),
                std::string_view(value.data(), value.size()));
}

void ResponseParser::on_header_impl(error_code& error) {
  call_.OnHeadParsed();
  if (!call_.sink_ok()) error = asio::error::operation_aborted;
}

size_t ResponseParser::on_body_impl(string_view body, error_code& error) {
  if (!call_.OnBodyPiece(std::string_view(body.data(), body.size()))) {
    error = asio::error::operation_aborted;
  }
  return body.size();
}

size_t ResponseParser::on_chunk_body_impl(uint64_t, string_view body, error_code& error) {
  return on_body_impl(body, error);
}

}  // namespace client

namespace {

namespace http = boost::beast::http;
using client::asio::error::operation_aborted;

SteadyTime Now() { return std::chrono::steady_clock::now(); }

bool IsIpAddress(const std::string& host) {
  boost::system::error_code error;
  client::asio::ip::make_address(host, error);
  return !error;
}

bool IsEndOfStream(const boost::system::error_code& error) {
  // Servers that end a close-delimited body over TLS without close_notify are common.
  return error == client::asio::error::eof || error == client::ssl::error::stream_truncated;
}

}  // namespace

HttpCall::State::State(client::Pool& pool, std::shared_ptr<HttpResponseSink> sink, std::string head,
                       HttpClientRequest&& request, Status invalid)
    : pool_(pool),
      sink_(std::move(sink)),
      head_(std::move(head)),
      body_(std::move(request.body)),
      invalid_(std::move(invalid)),
      timeouts_(request.timeouts),
      max_response_bytes_(request.max_response_bytes),
      head_request_(request.method == "HEAD"),
      timer_(pool.executor()),
      total_deadline_(timeouts_.total.count() > 0 ? Now() + timeouts_.total : SteadyTime::max()),
      phase_deadline_(SteadyTime::max()) {}

template <typename Body>
void HttpCall::State::Step(Body&& body) {
  try {
    body();
  } catch (...) {
    Fail(StatusFromException("an HTTP client call", std::current_exception()),
         HttpClientError::kInternal);
  }
}

void HttpCall::State::Begin() {
  SetPhaseDeadline(Now() + timeouts_.connect);  // waiting for a free connection counts
}

void HttpCall::State::Use(std::shared_ptr<client::ClientConnection> connection, bool fresh) {
  connection_ = std::move(connection);
  fresh_ = fresh;
  if (fresh) {
    Connect();
  } else {
    ++pool_.stats().reused;
    Write();
  }
}

void HttpCall::State::Connect() {
  phase_ = Phase::kConnecting;
  const Endpoint& endpoint = pool_.endpoint();
  auto on_connected = [self = shared_from_this(), connection = connection_](
                          const boost::system::error_code& error, auto&&...) {
    self->Step([&] {
      if (self->phase_ == Phase::kDone || connection != self->connection_) return;
      if (error) {
        ++self->pool_.stats().failed;
        self->Fail(Unavailable("cannot connect to {}: {}", self->pool_.key(), error.message()),
                   HttpClientError::kConnectFailed);
        return;
      }
      self->OnConnected();
    });
  };
  boost::system::error_code not_an_address;
  const auto address = client::asio::ip::make_address(endpoint.host, not_an_address);
  if (!not_an_address) {
    connection_->Lowest().async_connect(client::tcp::endpoint(address, endpoint.port),
                                        std::move(on_connected));
    return;
  }
  connection_->resolver.emplace(executor());
  connection_->resolver->async_resolve(
      endpoint.host, std::to_string(endpoint.port),
      [self = shared_from_this(), connection = connection_, on_connected = std::move(on_connected)](
          const boost::system::error_code& error,
          const client::tcp::resolver::results_type& addresses) mutable {
        self->Step([&] {
          if (self->phase_ == Phase::kDone || connection != self->connection_) return;
          connection->resolver.reset();
          if (error) {
            ++self->pool_.stats().failed;
            self->Fail(Unavailable("cannot resolve '{}': {}", self->pool_.endpoint().host,
                                   error.message()),
                       HttpClientError::kConnectFailed);
            return;
          }
          client::asio::async_connect(connection->Lowest(), addresses, std::move(on_connected));
        });
      });
}

void HttpCall::State::OnConnected() {
  boost::system::error_code ignored;
  connection_->Lowest().set_option(client::tcp::no_delay(true), ignored);
  if (pool_.tls() == nullptr) {
    ++pool_.stats().opened;
    Write();
    return;
  }
  const std::string& host = pool_.endpoint().host;
  client::TlsStream& stream = connection_->StartTls(*pool_.tls());
  if (!IsIpAddress(host)) SSL_set_tlsext_host_name(stream.native_handle(), host.c_str());  // SNI
  stream.set_verify_mode(client::ssl::verify_peer);
  stream.set_verify_callback(client::ssl::host_name_verification(host));
  stream.async_handshake(
      client::ssl::stream_base::client, [self = shared_from_this(), connection = connection_](
                                            const boost::system::error_code& error) {
        self->Step([&] {
          if (self->phase_ == Phase::kDone || connection != self->connection_) return;
          if (error) {
            ++self->pool_.stats().failed;
            self->Fail(
                Unavailable("TLS handshake with {} failed: {}", self->pool_.key(), error.message()),
                HttpClientError::kTlsFailed);
            return;
          }
          ++self->pool_.stats().opened;
          self->Write();
        });
      });
}

void HttpCall::State::Write() {
  phase_ = Phase::kSending;
  // The first byte is due within its timeout of the request starting to go out (a server that
  // does not read the request is timed out the same way).
  SetPhaseDeadline(Now() + timeouts_.first_byte);
  const std::array<client::asio::const_buffer, 2> buffers{client::asio::buffer(head_),
                                                          client::asio::buffer(body_)};
  connection_->AsyncWrite(buffers, [self = shared_from_this(), connection = connection_](
                                       const boost::system::error_code& error, size_t) {
    self->Step([&] {
      if (self->phase_ == Phase::kDone || connection != self->connection_) return;
      self->OnWritten(error);
    });
  });
}

bool HttpCall::State::RetryOnNewConnection() {
  if (fresh_ || retried_) return false;
  retried_ = true;
  ++pool_.stats().retries;
  phase_ = Phase::kConnecting;
  SetPhaseDeadline(Now() + timeouts_.connect);
  pool_.Reconnect(shared_from_this(), std::move(connection_));
  return true;
}

void HttpCall::State::OnWritten(const boost::system::error_code& error) {
  if (error) {
    // Not all of the request reached the socket, so the server cannot have acted on it: a
    // pooled connection the server had dropped is replaced once.
    if (RetryOnNewConnection()) return;
    Fail(Unavailable("cannot send the request to {}: {}", pool_.key(), error.message()),
         HttpClientError::kSendFailed);
    return;
  }
  phase_ = Phase::kWaitingFirstByte;
  connection_->response_headers.Clear();
  parser_.emplace(*this);
  parser_->body_limit(max_response_bytes_);
  if (head_request_) parser_->skip(true);
  Read();
}

void HttpCall::State::Read() {
  auto& connection = *connection_;
  connection.AsyncReadSome(connection.buffer.prepare(client::ClientConnection::kReadBytes),
                           [self = shared_from_this(), connection = connection_](
                               const boost::system::error_code& error, size_t bytes) {
                             self->Step([&] {
                               if (self->phase_ == Phase::kDone || connection != self->connection_)
                                 return;
                               self->OnRead(error, bytes);
                             });
                           });
}

void HttpCall::State::OnRead(const boost::system::error_code& error, size_t bytes) {
  if (error) {
    if (IsEndOfStream(error) && parser_->got_some()) {
      boost::system::error_code ended;
      parser_->put_eof(ended);  // completes a body that runs until the connection closes
      if (!ended && parser_->is_done()) {
        Finish();
        return;
      }
    }
    // A pooled connection that ends before the first byte of an answer was closed by the server
    // while it sat idle (its keep-alive timeout racing this request, whose bytes the kernel took
    // all the same): the server did not act on the request, so it goes once more, on a new
    // connection (as Go's and Chromium's clients do).
    if (!got_bytes_ && (IsEndOfStream(error) || error == client::asio::error::connection_reset) &&
        RetryOnNewConnection()) {
      return;
    }
    Fail(Unavailable("{} closed the connection {}: {}", pool_.key(),
                     got_bytes_ ? "before the response was complete" : "without responding",
                     error.message()),
         HttpClientError::kConnectionClosed);
    return;
  }
  connection_->buffer.commit(bytes);
  if (!got_bytes_) {
    got_bytes_ = true;
    phase_ = Phase::kReading;
  }
  SetPhaseDeadline(Now() + timeouts_.idle);
  Parse();
}

void HttpCall::State::Parse() {
  auto& buffer = connection_->buffer;
  for (;;) {
    if (parser_->is_done()) {
      if (status_ >= 100 && status_ < 200 && status_ != 101) {  // interim: the answer follows
        parser_.emplace(*this);
        parser_->body_limit(max_response_bytes_);
        connection_->response_headers.Clear();
        continue;
      }
      Finish();
      return;
    }
    if (paused_) {
      SetPhaseDeadline(SteadyTime::max());  // a slow sink is not a stalled server
      return;
    }
    if (buffer.size() == 0) break;
    boost::system::error_code error;
    const size_t used = parser_->put(buffer.data(), error);
    buffer.consume(used);
    if (!sink_failure_.ok()) {
      Fail(sink_failure_, HttpClientError::kSinkFailed);
      return;
    }
    if (error == http::error::need_more) break;
    if (error) {
      OnParseError(error);
      return;
    }
  }
  Read();
}

void HttpCall::State::OnParseError(const boost::system::error_code& error) {
  if (error == http::error::body_limit) {
    Fail(PayloadTooLarge("the response from {} is over {} bytes", pool_.key(), max_response_bytes_),
         HttpClientError::kResponseTooLarge);
  } else if (error == http::error::header_limit) {
    Fail(PayloadTooLarge("the response head from {} is over 64 KiB", pool_.key()),
         HttpClientError::kResponseTooLarge);
  } else {
    Fail(Unavailable("malformed response from {}: {}", pool_.key(), error.message()),
         HttpClientError::kMalformedResponse);
  }
}

void HttpCall::State::Finish() {
  // Bytes past the response's end were not asked for: such a connection is not trusted again.
  const bool reusable = parser_->keep_alive() && connection_->buffer.size() == 0;
  parser_.reset();
  pool_.Release(std::move(connection_), reusable);
  Complete(Status::Ok(), HttpClientError::kNone);
}

void HttpCall::State::OnStatusLine(int status, std::string_view reason, int version) {
  status_ = status;
  reason_.assign(reason);
  version_ = version;
}

void HttpCall::State::OnHeadParsed() {
  if (status_ >= 100 && status_ < 200 && status_ != 101) return;
  try {
    sink_->OnHead(
        HttpClientResponseHead{status_, reason_, version_, connection_->response_headers});
  } catch (...) {
    sink_failure_ = StatusFromException("the response's head sink", std::current_exception());
  }
}

bool HttpCall::State::OnBodyPiece(std::string_view piece) {
  try {
    if (!sink_->OnBody(piece)) paused_ = true;
  } catch (...) {
    sink_failure_ = StatusFromException("the response's body sink", std::current_exception());
  }
  return sink_failure_.ok();
}

void HttpCall::State::Cancel() {
  Step([&] {
    Fail(Cancelled("the call to {} was cancelled", pool_.key()), HttpClientError::kCancelled);
  });
}

void HttpCall::State::Resume() {
  Step([&] {
    if (phase_ == Phase::kDone || !paused_) return;
    paused_ = false;
    SetPhaseDeadline(Now() + timeouts_.idle);
    Parse();
  });
}

void HttpCall::State::Fail(Status status, HttpClientError error) {
  if (phase_ == Phase::kDone) return;
  if (connection_) pool_.Release(std::move(connection_), /*reusable=*/false);
  Complete(status, error);
}

void HttpCall::State::Complete(const Status& status, HttpClientError error) {
  const std::shared_ptr<State> keep = std::move(self);  // this call ends with this function
  phase_ = Phase::kDone;
  ++timer_generation_;
  if (timer_pending_) {
    timer_pending_ = false;
    timer_.cancel();
  }
  parser_.reset();
  ++pool_.stats().calls;
  std::shared_ptr<HttpResponseSink> sink = std::move(sink_);
  pool_.Forget(*this);  // last: it may drop the pool's reference to this call
  RunLoggingExceptions("the response sink's OnComplete", [&] { sink->OnComplete(status, error); });
}

void HttpCall::State::SetPhaseDeadline(SteadyTime deadline) {
  phase_deadline_ = deadline;
  ArmTimer();
}

// One timer per call, armed for the nearer of the phase's and the call's deadline. A deadline
// that moves later (each read pushes the idle one) leaves the timer as it is; when it fires
// early it is armed again for what is left, so a stream costs a timer operation per idle
// timeout, not per read.
void HttpCall::State::ArmTimer() {
  const SteadyTime due = std::min(phase_deadline_, total_deadline_);
  if (due == SteadyTime::max() || (timer_pending_ && timer_due_ <= due)) return;
  timer_due_ = due;
  timer_pending_ = true;
  const uint64_t generation = ++timer_generation_;
  timer_.expires_at(due);
  timer_.async_wait([self = shared_from_this(), generation](const boost::system::error_code&) {
    self->Step([&] { self->OnTimer(generation); });
  });
}

void HttpCall::State::OnTimer(uint64_t generation) {
  if (generation != timer_generation_ || phase_ == Phase::kDone) return;
  timer_pending_ = false;
  const SteadyTime now = Now();
  const std::string& key = pool_.key();
  if (now >= total_deadline_) {
    Fail(Unavailable("the call to {} passed its {} ms deadline", key, timeouts_.total.count()),
         HttpClientError::kDeadlineExceeded);
    return;
  }
  if (now < phase_deadline_) {
    ArmTimer();
    return;
  }
  switch (phase_) {
    case Phase::kQueued:
      Fail(Unavailable("no connection to {} free within {} ms", key, timeouts_.connect.count()),
           HttpClientError::kConnectTimeout);
      return;
    case Phase::kConnecting:
      ++pool_.stats().failed;
      Fail(Unavailable("connecting to {} timed out after {} ms", key, timeouts_.connect.count()),
           HttpClientError::kConnectTimeout);
      return;
    case Phase::kSending:
      Fail(Unavailable("{} did not take the request within {} ms", key,
                       timeouts_.first_byte.count()),
           HttpClientError::kFirstByteTimeout);
      return;
    case Phase::kWaitingFirstByte:
      Fail(Unavailable("no response from {} within {} ms", key, timeouts_.first_byte.count()),
           HttpClientError::kFirstByteTimeout);
      return;
    case Phase::kReading:
      Fail(Unavailable("the response from {} stalled: nothing for {} ms", key,
                       timeouts_.idle.count()),
           HttpClientError::kIdleTimeout);
      return;
    case Phase::kDone: return;
  }
}

}  // namespace rampart::net
