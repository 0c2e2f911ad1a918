// HTTPS connections: TLS 1.2+ through Boost.Asio's SSL stream, requests parsed by RequestParser.

#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <utility>  // before Boost.Asio 1.74, whose awaitable.hpp needs std::exchange
#include <vector>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "core/exceptions.h"
#include "core/logging.h"
#include "net/http_connection.h"

namespace rampart::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
// Sockets and timers bound to their io_context's concrete executor: the type-erased
// any_io_executor (beast::tcp_stream's) costs a copy and a virtual call per operation.
using Executor = asio::io_context::executor_type;
using Socket = asio::basic_stream_socket<tcp, Executor>;
using Stream = ssl::stream<Socket>;
using Timer = asio::basic_waitable_timer<std::chrono::steady_clock,
                                         asio::wait_traits<std::chrono::steady_clock>, Executor>;

// The server side of TLS 1.2+ with `options`' files. Errors: InvalidArgument naming the file.
Result<std::unique_ptr<ssl::context>> MakeTlsContext(const HttpTlsOptions& options) {
  if (options.cert.empty() || options.key.empty()) {
    return InvalidArgument("HTTPS needs a certificate and a private key");
  }
  if (options.mutual && options.root_cert.empty()) {
    return InvalidArgument("mutual TLS needs the CA certificate that signs client certificates");
  }
  auto context = std::make_unique<ssl::context>(ssl::context::tls_server);
  beast::error_code error;
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                           ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                           ssl::context::no_tlsv1_1 | ssl::context::single_dh_use,
                       error);
  if (!error) context->use_certificate_chain_file(options.cert, error);
  if (error) return InvalidArgument("HTTPS certificate '{}': {}", options.cert, error.message());
  context->use_private_key_file(options.key, ssl::context::pem, error);
  if (error) return InvalidArgument("HTTPS private key '{}': {}", options.key, error.message());
  if (!options.root_cert.empty()) {
    context->load_verify_file(options.root_cert, error);
    if (error) {
      return InvalidArgument("HTTPS root certificate '{}': {}", options.root_cert, error.message());
    }
  }
  if (options.mutual) {
    context->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert, error);
    if (error) return InvalidArgument("mutual TLS: {}", error.message());
  }
  return context;
}

class TlsConnection;

// Hang-up watches for requests still unanswered a while after they were dispatched. A watch is a
// wait for the socket to become readable (the client's end of stream, or its next pipelined
// request); arming one costs an epoll_ctl, and most answers come before it could matter. So
// watches are armed in sweeps: every tick arms those for the requests added before the previous
// tick, that is unanswered for one to two periods. One per I/O thread, used only on it.
class HangUpWatches {
 public:
  static constexpr std::chrono::milliseconds kPeriod{10};

  explicit HangUpWatches(asio::io_context& context) : timer_(context.get_executor()) {}

  // The connection's request number `request` was dispatched and is not answered yet.
  void Add(std::weak_ptr<TlsConnection> connection, uint64_t request) {
    young_.push_back({std::move(connection), request});
    if (!armed_) Arm();
  }

 private:
  struct Entry {
    std::weak_ptr<TlsConnection> connection;
    uint64_t request;
  };

  void Arm() {
    armed_ = true;
    timer_.expires_after(kPeriod);
    timer_.async_wait([this](beast::error_code error) {
      armed_ = false;
      if (!error) Tick();
    });
  }

  void Tick();

  Timer timer_;
  std::vector<Entry> young_;  // added since the last tick
  std::vector<Entry> old_;    // added before it: armed at the next tick
  bool armed_ = false;
};

// One HTTPS connection, kept alive by its pending operation's shared_ptr (and a Responder's).
//
// Timeouts (the TLS handshake, waiting for a request, reading it, the client taking its answer,
// the TLS goodbye) are one deadline per connection, which its I/O thread's sweep checks every
// second (IoThread): a keep-alive request costs no timer operation (a per-operation timer, as
// beast::tcp_stream arms, cost a timer queue update per request).
class TlsConnection final : public Connection {
 public:
  TlsConnection(Socket socket, ssl::context& tls, HttpCore& core, HangUpWatches& watches,
                ConnectionSlot slot)
      : stream_(std::move(socket), tls),
        core_(core),
        watches_(watches),
        slot_(std::move(slot)),
        request_deadline_(core.options()) {
    buffer_.reserve(kReadBufferBytes);
  }
  ~TlsConnection() override {
    if (counted_) core_.Abandoned();  // an answer that never came still leaves the count
  }

  // Acts on a deadline that has passed (from the I/O thread's sweep): a request whose head or
  // body came too slowly is answered 408 once its pending read ends; otherwise the connection
  // closes, and its pending operation fails.
  void CheckDeadline(SteadyTime now) {
    if (!deadline_ || now < *deadline_) return;
    deadline_.reset();
    if (parser_ && request_deadline_.started() && !continuing_) {
      timed_out_ = true;
      beast::error_code ignored;
      Lowest().cancel(ignored);
      return;
    }
    CloseSocket();
  }

  void Start() {
    SetDeadline(kHandshakeTime);
    stream_.async_handshake(ssl::stream_base::server, [self = Self()](beast::error_code error) {
      if (error) {
        // A failed handshake (no or untrusted client certificate,
        // plain HTTP on the HTTPS port) just ends the connection.
        LOG_DEBUG("TLS handshake failed: {}", error.message());
        self->CloseSocket();
        return;
      }
      self->ReadNext();
    });
  }

  void Answer(std::shared_ptr<Connection> self, HttpResponse response) override {
    asio::dispatch(stream_.get_executor(),
                   [self = std::move(self), this, response = std::move(response)]() mutable {
                     Deliver([&] { return std::move(response); });
                   });
  }

  void AnswerWith(std::shared_ptr<Connection> self,
                  UniqueFunction<HttpResponse()> make_response) override {
    asio::dispatch(stream_.get_executor(), [self = std::move(self), this,
                                            make_response = std::move(make_response)]() mutable {
      Deliver([&] { return make_response(); });
    });
  }

  // While the answer is being worked on nothing reads the socket; wait for it to become readable
  // and, if that is the client's end of stream, say so, so queued work for it is dropped.
  void WatchForHangUp(uint64_t request) {
    // Answered (or being answered) already, or reading the next request.
    if (request != request_number_ || responded_ || !counted_ || watching_) return;
    watching_ = true;
    Lowest().async_wait(tcp::socket::wait_read, [self = Self(), client_gone = client_gone_](
                                                    beast::error_code error) {
      self->watching_ = false;
      if (error) return;  // cancelled because the answer is being written
      char byte = 0;
      const ssize_t peeked =
          ::recv(self->Lowest().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (peeked == 0 || (peeked < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
        client_gone->store(true);
      }
    });
  }

 private:
  std::shared_ptr<TlsConnection> Self() {
    return std::static_pointer_cast<TlsConnection>(shared_from_this());
  }
  Socket& Lowest() { return stream_.next_layer(); }

  // Closes the connection unless it is done with the current step before `timeout` from now.
  void SetDeadline(std::chrono::steady_clock::duration timeout) {
    deadline_ = core_.Now() + timeout;
  }

  // Reads the next request: the bytes TLS decrypts are fed to the parser as they come, so the
  // deadlines follow them (RequestDeadline): the idle timeout until the request's first byte,
  // then the head's, then the body's minimum rate.
  void ReadNext() {
    responded_ = false;
    continued_ = false;
    timed_out_ = false;
    request_ = HttpRequest();
    parser_.emplace(request_, core_.options().max_body_bytes, core_);
    request_deadline_.Reset();
    // A new connection's first byte is due as a request's head is: one that sends nothing
    // holds no connection for long.
    SetDeadline(request_number_ == 0
                    ? std::min<std::chrono::steady_clock::duration>(core_.options().idle_timeout,
                                                                    core_.options().header_timeout)
                    : std::chrono::steady_clock::duration(core_.options().idle_timeout));
    Parse();  // a pipelined request may be buffered already
  }

  // Feeds the buffered bytes to the parser; then answers, dispatches, or reads on.
  void Parse() {
    while (buffer_.size() > 0) {
      beast::error_code error;
      const size_t used = parser_->put(buffer_.data(), error);
      buffer_.consume(used);
      if (error && error != http::error::need_more) {
        OnRead(error);
        return;
      }
      if (parser_->is_done()) {
        OnRead({});
        return;
      }
      AdvanceRequestDeadline();
      if (used == 0) break;  // a head not yet whole: read more behind it
    }
    // Clients that send `Expect: 100-continue` (curl does for bodies over 1 MiB) wait for an
    // interim answer before sending the body; oversized bodies were already refused above.
    if (parser_->is_header_done() && parser_->expects_continue() && !continued_) {
      continued_ = true;
      continuing_ = true;
      continue_.emplace(http::status::continue_, parser_->version());
      http::async_write(stream_, *continue_,
                        [self = Self()](beast::error_code write_error, size_t) {
                          self->continuing_ = false;
                          if (write_error) {
                            self->Close();
                            return;
                          }
                          self->ReadSome();
                        });
      return;
    }
    ReadSome();
  }

  void ReadSome() {
    stream_.async_read_some(buffer_.prepare(kReadBufferBytes),
                            [self = Self()](beast::error_code error, size_t read) {
                              if (error) {
                                self->OnRead(error);
                                return;
                              }
                              self->buffer_.commit(read);
                              self->Parse();
                            });
  }

  // After bytes of the current request reached the parser.
  void AdvanceRequestDeadline() {
    const SteadyTime now = core_.Now();
    if (!request_deadline_.started()) request_deadline_.HeadStarted(now);
    if (parser_->is_header_done()) {
      if (!request_deadline_.reading_body()) request_deadline_.BodyStarted(now);
      request_deadline_.BodyReceived(request_.body.size());
    }
    deadline_ = request_deadline_.due();
  }

  void OnRead(beast::error_code error) {
    // A read the deadline cut short (a request that completed just before is dispatched).
    if (error && timed_out_) {
      timed_out_ = false;
      const HttpRefusal refusal = request_deadline_.refusal();
      core_.Refused(refusal);
      RejectAndClose(TimeoutResponse(refusal));
      return;
    }
    if (error) {
      if (auto answer = ParseErrorResponse(error, core_)) {
        RejectAndClose(std::move(*answer));
      } else {
        Close();
      }
      return;
    }
    deadline_.reset();
    keep_alive_ = parser_->keep_alive();
    version_ = parser_->version();
    head_only_ = request_.method == "HEAD";
    parser_.reset();  // it writes into request_, which is handed over now
    request_.received = Clock::Real().Now();
    received_ = request_.received;
    client_gone_ = std::make_shared<std::atomic<bool>>(false);
    request_.client_gone = client_gone_;
    counted_ = true;
    ++request_number_;
    core_.Dispatch(std::move(request_), Responder(shared_from_this()));
    if (!responded_) watches_.Add(Self(), request_number_);  // not answered at once
  }

  void Write(HttpResponse response) {
    responded_ = true;
    if (watching_) {
      beast::error_code ignored;
      Lowest().cancel(ignored);  // only the hang-up watch is pending now
    }
    // The head is formatted here into one buffer and written with the body in one gather
    // write: Beast's fields container and serializer allocate per header.
    head_.clear();
    FormatHead(response, version_, keep_alive_ && !close_after_write_, head_);
    // A HEAD answer is the GET answer's head (its Content-Length included) and nothing after it.
    body_ = head_only_ ? std::string() : std::move(response.body);
    const std::array<asio::const_buffer, 2> buffers{asio::buffer(head_), asio::buffer(body_)};
    // The client must take its answer within the idle timeout, as in the plain engine: one that
    // stops reading would otherwise hold the connection, and a shutdown would wait for it.
    SetDeadline(core_.options().idle_timeout);
    asio::async_write(stream_, buffers,
                      [self = Self()](beast::error_code error, size_t) { self->OnWrite(error); });
  }

  void OnWrite(beast::error_code error) {
    if (counted_) {
      counted_ = false;
      if (error) {
        core_.Abandoned();
      } else {
        core_.Finished(received_);
      }
    }
    if (!error && close_after_write_) {
      Linger();
      return;
    }
    if (error || !keep_alive_) {
      Close();
      return;
    }
    ReadNext();
  }

  // After a refusal (400, 408, 413, 503) what the client still sends of its request is read and
  // dropped until it ends, or kLinger* run out, before the goodbye: closing with input unread
  // would reset the connection, and a client still sending its body would see the reset, not the
  // answer (as in the plain engine).
  void Linger() {
    SetDeadline(
        std::min<std::chrono::steady_clock::duration>(kLingerTime, core_.options().idle_timeout));
    Discard();
  }
  void Discard() {
    buffer_.clear();
    stream_.async_read_some(buffer_.prepare(kReadBufferBytes),
                            [self = Self()](beast::error_code error, size_t read) {
                              self->discarded_ += read;
                              if (error || self->discarded_ > kLingerBytes) {
                                self->Close();
                                return;
                              }
                              self->Discard();
                            });
  }

  // Writes the answer `make` builds. If building or writing it throws (out of memory), the
  // connection ends and its request stops counting as in flight.
  template <typename Make>
  void Deliver(Make&& make) {
    if (RunLoggingExceptions("answering an HTTPS request", [&] { Write(make()); })) return;
    if (counted_) {
      counted_ = false;
      core_.Abandoned();
    }
    CloseSocket();
  }

  // A request we will not dispatch: answer it and end the connection.
  void RejectAndClose(HttpResponse answer) {
    close_after_write_ = true;
    head_only_ = false;  // no request was read
    counted_ = false;
    parser_.reset();  // no longer reading: the timer's next deadline is the answer's
    request_deadline_.Reset();
    Write(std::move(answer));
  }

  // Says goodbye with close_notify (bounded), so clients see a clean end of the stream.
  void Close() {
    SetDeadline(std::chrono::seconds(5));
    stream_.async_shutdown([self = Self()](beast::error_code) { self->CloseSocket(); });
  }

  void CloseSocket() {
    beast::error_code ignored;
    Lowest().shutdown(tcp::socket::shutdown_both, ignored);
    Lowest().close(ignored);
  }

  // Beast reads at most the read buffer's free capacity per call, and its parser consumes the
  // buffer as it goes, so the buffer never grows: from Beast's 512-byte start a 2 KiB request
  // took five reads. Reserved once per connection.
  static constexpr size_t kReadBufferBytes = 16 * 1024;
  static constexpr std::chrono::seconds kHandshakeTime{30};    // for the TLS handshake
  static constexpr std::chrono::seconds kLingerTime{5};        // or the idle timeout if shorter
  static constexpr uint64_t kLingerBytes = uint64_t{1} << 28;  // 256 MiB

  Stream stream_;
  std::optional<SteadyTime> deadline_;  // HttpCore::Now()'s; none while working
  HttpCore& core_;
  HangUpWatches& watches_;
  ConnectionSlot slot_;
  RequestDeadline request_deadline_;  // while reading a request
  bool timed_out_ = false;            // the timer ended a request's read: answer 408
  bool continuing_ = false;           // `100 Continue` is being written
  uint64_t discarded_ = 0;            // bytes dropped while lingering
  beast::flat_buffer buffer_;
  HttpRequest request_;
  std::optional<RequestParser> parser_;
  std::string head_;  // status line and headers of the response being written
  std::string body_;  // its body
  std::optional<http::response<http::empty_body>> continue_;
  bool continued_ = false;  // `100 Continue` sent for the current request
  SteadyTime received_{};
  uint64_t request_number_ = 0;  // requests dispatched so far; names the current one
  std::shared_ptr<std::atomic<bool>> client_gone_;  // the current request's
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool close_after_write_ = false;
  bool head_only_ = false;  // the current request is HEAD: its answer goes without the body
  bool counted_ = false;    // the current request was dispatched and counts as in flight
  bool responded_ = false;  // Write() has been called for the current request
  bool watching_ = false;   // a hang-up watch is pending
};

void HangUpWatches::Tick() {
  for (Entry& entry : old_) {
    if (auto connection = entry.connection.lock()) connection->WatchForHangUp(entry.request);
  }
  old_.clear();
  old_.swap(young_);
  if (!old_.empty()) Arm();
}

// One I/O thread's loop and what belongs to it (destroyed before the loop).
struct IoThread {
  static constexpr std::chrono::seconds kSweepPeriod{1};

  explicit IoThread(HttpCore& http) : core(http), sweep_timer(context.get_executor()) {}

  // Applies the deadlines of the connections started on this thread, dropping those gone.
  void CheckDeadlines() {
    const SteadyTime now = core.Now();
    std::erase_if(open, [now](const std::weak_ptr<TlsConnection>& each) {
      std::shared_ptr<TlsConnection> connection = each.lock();
      if (!connection) return true;
      connection->CheckDeadline(now);
      return false;
    });
  }
  void ArmSweep() {
    sweep_timer.expires_after(kSweepPeriod);
    sweep_timer.async_wait([this](beast::error_code error) {
      if (error) return;
      CheckDeadlines();
      ArmSweep();
    });
  }

  HttpCore& core;
  asio::io_context context{1};
  HangUpWatches watches{context};
  Timer sweep_timer;
  // The connections started here (weak: a connection ends when its last operation or responder
  // does, on whichever thread that is).
  std::vector<std::weak_ptr<TlsConnection>> open;
};

class TlsEngine final : public HttpEngine {
 public:
  TlsEngine(HttpCore& core, size_t threads, std::unique_ptr<ssl::context> tls)
      : core_(core), tls_(std::move(tls)) {
    for (size_t i = 0; i < threads; ++i) {
      io_.push_back(std::make_unique<IoThread>(core));
      guards_.emplace_back(asio::make_work_guard(io_.back()->context));
      io_.back()->ArmSweep();
    }
    acceptor_.emplace(io_[0]->context);
  }

  Status Listen(int listener) override {
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
    beast::error_code error;
    acceptor_->assign(address.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), listener, error);
    if (error) {
      ::close(listener);
      return Internal("HTTPS listener: {}", error.message());
    }
    Accept();
    return Status::Ok();
  }

  // An exception from a handler leaves run(), whose io_context serves on when run again (the
  // connection whose handler threw is dropped, and closed, as the exception unwinds).
  void Run(size_t index) override {
    while (!RunLoggingExceptions("an HTTPS I/O thread", [&] { io_[index]->context.run(); })) {
    }
  }

  void StopAccepting() override {
    std::promise<void> closed;
    asio::post(io_[0]->context, [this, &closed] {
      beast::error_code ignored;
      acceptor_->close(ignored);
      closed.set_value();
    });
    closed.get_future().wait();
  }

  void Stop() override {
    guards_.clear();
    for (auto& io : io_) io->context.stop();
  }

  void CheckDeadlines() override {
    std::vector<std::future<void>> done;
    for (auto& io : io_) {
      auto checked = std::make_shared<std::promise<void>>();
      done.push_back(checked->get_future());
      asio::post(io->context, [&thread = *io, checked] {
        thread.CheckDeadlines();
        checked->set_value();
      });
    }
    for (auto& each : done) each.wait();
  }

 private:
  void Accept() {
    IoThread& target = *io_[next_io_];
    next_io_ = (next_io_ + 1) % io_.size();
    acceptor_->async_accept(
        target.context, [this, &target](beast::error_code error, Socket socket) {
          if (error == asio::error::operation_aborted || !acceptor_->is_open()) return;
          if (!error) {
            // Over max_connections the socket just closes: no handshake is spent on it.
            if (std::optional<ConnectionSlot> slot = core_.OpenConnection()) {
              beast::error_code ignored;
              socket.set_option(tcp::no_delay(true), ignored);
              auto connection = std::make_shared<TlsConnection>(std::move(socket), *tls_, core_,
                                                                target.watches, std::move(*slot));
              // Start on the connection's own thread.
              asio::post(target.context, [connection, &target] {
                target.open.push_back(connection);
                connection->Start();
              });
            }
          } else {
            LOG_WARN("accept failed: {}", error.message());
          }
          Accept();
        });
  }

  HttpCore& core_;
  std::unique_ptr<ssl::context> tls_;  // shared by every connection
  std::vector<std::unique_ptr<IoThread>> io_;
  std::vector<asio::executor_work_guard<Executor>> guards_;
  std::optional<tcp::acceptor> acceptor_;
  size_t next_io_ = 0;  // only touched by the accept handler on io_[0]
};

}  // namespace

Result<std::unique_ptr<HttpEngine>> MakeTlsEngine(HttpCore& core, size_t threads,
                                                  const HttpTlsOptions& tls) {
  ASSIGN_OR_RETURN(std::unique_ptr<ssl::context> context, MakeTlsContext(tls));
  return std::unique_ptr<HttpEngine>(new TlsEngine(core, threads, std::move(context)));
}

}  // namespace rampart::net
