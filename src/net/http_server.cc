#include "net/http_server.h"

#include <sys/socket.h>

#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>
#include <vector>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "core/cpu_affinity.h"
#include "core/logging.h"
#include "core/thread_name.h"
#include "json/writer.h"

namespace rampart::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
// Sockets and timers bound to their io_context's concrete executor: the type-erased
// any_io_executor (beast::tcp_stream's) costs a copy and a virtual call per operation.
using Executor = asio::io_context::executor_type;
using Socket = asio::basic_stream_socket<tcp, Executor>;
using Timer = asio::basic_waitable_timer<std::chrono::steady_clock,
                                         asio::wait_traits<std::chrono::steady_clock>, Executor>;

namespace {

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

// Appends an HTTP/1.x response head: status line, Server, Content-Type, the response's own
// headers, Content-Length and, where the version's default differs, Connection.
void FormatHead(const HttpResponse& response, unsigned version, bool keep_alive, std::string& out) {
  const auto status = static_cast<http::status>(response.status);
  out += version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
  out += fmt::format_int(response.status).c_str();
  out += ' ';
  const beast::string_view reason = http::obsolete_reason(status);
  out.append(reason.data(), reason.size());
  out += "\r\nServer: rampart\r\nContent-Type: ";
  out += response.content_type;
  out += "\r\n";
  for (const auto& [name, value] : response.headers) {
    out += name;
    out += ": ";
    // Values may carry names from the repository (Server-Timing's ensemble steps); a line
    // break in one must not end the head early.
    if (value.find_first_of("\r\n") == std::string::npos) {
      out += value;
    } else {
      for (char c : value) out += c == '\r' || c == '\n' ? ' ' : c;
    }
    out += "\r\n";
  }
  out += "Content-Length: ";
  out += fmt::format_int(response.body.size()).c_str();
  out += "\r\n";
  if (version == 10 && keep_alive) out += "Connection: keep-alive\r\n";
  if (version != 10 && !keep_alive) out += "Connection: close\r\n";
  out += "\r\n";
}

}  // namespace

class Connection;

// Hang-up watches for requests still unanswered a while after they were dispatched. A watch is a
// wait for the socket to become readable (the client's end of stream, or its next pipelined
// request); arming one costs an epoll_ctl, a tenth of a small model's request, and most answers
// come before it could matter. So watches are armed in sweeps: every tick arms those for the
// requests added before the previous tick, that is unanswered for one to two periods. A period
// of 10 ms lets batched requests (a few ms at 64 clients on mlp_classifier) go unwatched too:
// 0.55 -> 0.14 epoll_ctl per request there, 3-8 % more throughput than 1 ms, while queues long
// enough for a hang-up to matter are still watched. One per I/O thread, used only on it.
class HangUpWatches {
 public:
  static constexpr std::chrono::milliseconds kPeriod{10};

  explicit HangUpWatches(asio::io_context& context) : timer_(context.get_executor()) {}

  // The connection's request number `request` was dispatched and is not answered yet.
  void Add(std::weak_ptr<Connection> connection, uint64_t request) {
    young_.push_back({std::move(connection), request});
    if (!armed_) Arm();
  }

 private:
  struct Entry {
    std::weak_ptr<Connection> connection;
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

// One I/O thread's loop and what belongs to it (destroyed before the loop).
struct IoThread {
  asio::io_context context{1};
  HangUpWatches watches{context};
};

class HttpServer::Impl {
 public:
  Impl(const HttpServerOptions& options, HttpHandler handler)
      : options_(options), handler_(std::move(handler)) {
    const int threads = options.threads > 0
                            ? options.threads
                            : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    for (int i = 0; i < threads; ++i) {
      io_.push_back(std::make_unique<IoThread>());
      guards_.emplace_back(asio::make_work_guard(io_.back()->context));
    }
    acceptor_.emplace(io_[0]->context);
  }

  ~Impl() { Shutdown(std::chrono::milliseconds(0)); }

  Status Listen() {
    if (options_.tls) {
      ASSIGN_OR_RETURN(tls_, MakeTlsContext(*options_.tls));
    }
    beast::error_code error;
    const auto address = asio::ip::make_address(options_.address, error);
    if (error)
      return InvalidArgument("bad HTTP address '{}': {}", options_.address, error.message());
    const tcp::endpoint endpoint(address, options_.port);
    acceptor_->open(endpoint.protocol(), error);
    if (!error) acceptor_->set_option(asio::socket_base::reuse_address(true), error);
    if (!error) acceptor_->bind(endpoint, error);
    if (!error) acceptor_->listen(asio::socket_base::max_listen_connections, error);
    if (error) {
      return Unavailable("cannot listen on {}:{}: {}", options_.address, options_.port,
                         error.message());
    }
    port_ = acceptor_->local_endpoint().port();
    Accept();
    for (size_t i = 0; i < io_.size(); ++i) {
      threads_.emplace_back(
          [raw = &io_[i]->context, name = fmt::format("{}-io-{}", options_.name, i), this] {
            NameThisThread(name);
            if (Status pinned = PinThisThread(options_.cpus); !pinned.ok()) {
              LOG_WARN("{}: {}", name, pinned.message());
            }
            if (options_.sched_batch) {
              if (Status batch = UseBatchScheduling(); !batch.ok()) {
                LOG_WARN("{}: {}", name, batch.message());
              }
            }
            raw->run();
          });
    }
    return Status::Ok();
  }

  uint16_t port() const { return port_; }
  const HttpServerOptions& options() const { return options_; }

  void Dispatch(HttpRequest&& request, Responder responder) {
    in_flight_.fetch_add(1);
    handler_(std::move(request), std::move(responder));
  }

  void Finished(SteadyTime received) {
    handle_ns_.fetch_add(static_cast<uint64_t>(NanosBetween(received, Clock::Real().Now())),
                         std::memory_order_relaxed);
    requests_.fetch_add(1, std::memory_order_relaxed);
    if (in_flight_.fetch_sub(1) == 1 && draining_.load()) {
      std::lock_guard lock(drain_mutex_);
      drained_.notify_all();
    }
  }

  void Abandoned() {
    if (in_flight_.fetch_sub(1) == 1 && draining_.load()) {
      std::lock_guard lock(drain_mutex_);
      drained_.notify_all();
    }
  }

  void StopAccepting() {
    if (!acceptor_) return;
    std::promise<void> closed;
    asio::post(io_[0]->context, [this, &closed] {
      beast::error_code ignored;
      acceptor_->close(ignored);
      closed.set_value();
    });
    if (!threads_.empty()) closed.get_future().wait();
  }

  void Shutdown(std::chrono::milliseconds timeout) {
    if (stopped_) return;
    stopped_ = true;
    if (!threads_.empty()) {
      StopAccepting();
      draining_.store(true);
      std::unique_lock lock(drain_mutex_);
      drained_.wait_for(lock, timeout, [this] { return in_flight_.load() == 0; });
    }
    guards_.clear();
    for (auto& io : io_) io->context.stop();
    for (auto& thread : threads_) thread.join();
    threads_.clear();
  }

  HttpServer::Stats stats() const {
    return {requests_.load(std::memory_order_relaxed), handle_ns_.load(std::memory_order_relaxed)};
  }

 private:
  void Accept();

  const HttpServerOptions options_;
  HttpHandler handler_;
  std::vector<std::unique_ptr<IoThread>> io_;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards_;
  std::optional<tcp::acceptor> acceptor_;
  std::unique_ptr<ssl::context> tls_;  // set for HTTPS; shared by every connection
  std::vector<std::thread> threads_;
  size_t next_io_ = 0;  // only touched by the accept handler on io_[0]
  uint16_t port_ = 0;
  bool stopped_ = false;

  std::atomic<int64_t> in_flight_{0};
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> handle_ns_{0};
  std::mutex drain_mutex_;
  std::condition_variable drained_;
};

// One client connection: read a request, hand it to the handler, write the answer, repeat.
// Lives on one I/O thread; kept alive by the pending operation's shared_ptr (and a Responder's).
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  virtual ~Connection() = default;
  virtual void Start() = 0;
  virtual Executor executor() = 0;
  // On this connection's thread.
  virtual void Write(HttpResponse response) = 0;
  // On this connection's thread: if request number `request` is still unanswered, notice when
  // its client hangs up.
  virtual void WatchForHangUp(uint64_t request) = 0;
};

void HangUpWatches::Tick() {
  for (Entry& entry : old_) {
    if (auto connection = entry.connection.lock()) connection->WatchForHangUp(entry.request);
  }
  old_.clear();
  old_.swap(young_);
  if (!old_.empty()) Arm();
}

// Over plain TCP (Stream = Socket) or TLS (ssl::stream<Socket>).
//
// Timeouts (the TLS handshake, waiting for a request, the TLS goodbye) are one deadline and one
// timer per connection. The timer is re-armed only when it fires before the current deadline or
// a deadline moves earlier, so a keep-alive request costs no timer operation (a per-operation
// timer, as beast::tcp_stream arms, cost a timer queue update per request).
template <typename Stream>
class StreamConnection final : public Connection {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, Socket>;

  StreamConnection(Socket socket, HttpServer::Impl& server, HangUpWatches& watches) requires(!kTls)
      : stream_(std::move(socket)),
        timer_(stream_.get_executor()),
        server_(server),
        watches_(watches) {
    buffer_.reserve(kReadBufferBytes);
  }
  StreamConnection(Socket socket, ssl::context& tls, HttpServer::Impl& server,
                   HangUpWatches& watches) requires(kTls)
      : stream_(std::move(socket), tls),
        timer_(stream_.get_executor()),
        server_(server),
        watches_(watches) {
    buffer_.reserve(kReadBufferBytes);
  }

  void Start() override {
    if constexpr (kTls) {
      SetDeadline(std::chrono::seconds(30));
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
    } else {
      ReadNext();
    }
  }

  Executor executor() override { return stream_.get_executor(); }

  void Write(HttpResponse response) override {
    responded_ = true;
    if (watching_) {
      beast::error_code ignored;
      Lowest().cancel(ignored);  // only the hang-up watch is pending now
    }
    // The head is formatted here into one buffer and written with the body in one gather
    // write: Beast's fields container and serializer allocate per header and cost several
    // microseconds per response, a measurable share of a small model's request.
    head_.clear();
    FormatHead(response, version_, keep_alive_ && !close_after_write_, head_);
    body_ = std::move(response.body);
    const std::array<asio::const_buffer, 2> buffers{asio::buffer(head_), asio::buffer(body_)};
    asio::async_write(stream_, buffers,
                      [self = Self()](beast::error_code error, size_t) { self->OnWrite(error); });
  }

  // While the answer is being worked on nothing reads the socket; wait for it to become readable
  // and, if that is the client's end of stream, say so, so queued work for it is dropped.
  void WatchForHangUp(uint64_t request) override {
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
  std::shared_ptr<StreamConnection> Self() {
    return std::static_pointer_cast<StreamConnection>(shared_from_this());
  }
  Socket& Lowest() {
    if constexpr (kTls) {
      return stream_.next_layer();
    } else {
      return stream_;
    }
  }

  // Closes the connection unless it is done with the current step before `timeout` from now.
  void SetDeadline(std::chrono::steady_clock::duration timeout) {
    deadline_ = std::chrono::steady_clock::now() + timeout;
    // A pending wait for a later time is cancelled by re-arming (its handler sees the abort).
    if (waits_ == 0 || *deadline_ < timer_.expiry()) ArmTimer();
  }
  void ClearDeadline() { deadline_.reset(); }

  void ArmTimer() {
    ++waits_;
    timer_.expires_at(*deadline_);
    timer_.async_wait([self = Self()](beast::error_code error) { self->OnTimer(error); });
  }

  void OnTimer(beast::error_code error) {
    --waits_;
    if (error || !deadline_ || waits_ > 0) return;  // cancelled, no deadline, or re-armed
    if (std::chrono::steady_clock::now() < *deadline_) {
      ArmTimer();  // the deadline moved later since this wait began
      return;
    }
    deadline_.reset();
    CloseSocket();  // the pending operation fails and ends the connection
  }

  void ReadNext() {
    responded_ = false;
    parser_.emplace();
    parser_->body_limit(server_.options().max_body_bytes);
    parser_->header_limit(64 * 1024);
    SetDeadline(server_.options().idle_timeout);
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = Self()](beast::error_code error, size_t) { self->OnHeader(error); });
  }

  // Clients that send `Expect: 100-continue` (curl does for bodies over 1 MiB) wait for an
  // interim answer before sending the body; oversized bodies were already refused above.
  void OnHeader(beast::error_code error) {
    if (error) {
      OnRead(error);
      return;
    }
    const auto expect = parser_->get()[http::field::expect];
    if (beast::iequals(expect, "100-continue") && !parser_->is_done()) {
      continue_.emplace(http::status::continue_, parser_->get().version());
      http::async_write(stream_, *continue_,
                        [self = Self()](beast::error_code write_error, size_t) {
                          if (write_error) {
                            self->Close();
                            return;
                          }
                          self->ReadBody();
                        });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    http::async_read(stream_, buffer_, *parser_,
                     [self = Self()](beast::error_code error, size_t) { self->OnRead(error); });
  }

  void OnRead(beast::error_code error) {
    if (error == http::error::body_limit) {
      RejectAndClose(413, fmt::format("request body exceeds the {} byte limit "
                                      "(--http-max-input-size)",
                                      server_.options().max_body_bytes));
      return;
    }
    if (error == http::error::end_of_stream || error == asio::error::operation_aborted ||
        error == asio::error::bad_descriptor) {
      Close();
      return;
    }
    if (error) {
      if (error.category() == http::make_error_code(http::error::bad_target).category()) {
        RejectAndClose(400, fmt::format("malformed HTTP request: {}", error.message()));
      } else {
        Close();
      }
      return;
    }
    ClearDeadline();
    auto& message = parser_->get();
    keep_alive_ = message.keep_alive();
    version_ = message.version();
    HttpRequest request;
    request.method = std::string(message.method_string());
    request.target = std::string(message.target());
    request.headers.reserve(8);
    for (const auto& field : message) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      request.headers.emplace_back(std::move(name), std::string(field.value()));
    }
    request.body = std::move(message.body());
    request.received = Clock::Real().Now();
    received_ = request.received;
    client_gone_ = std::make_shared<std::atomic<bool>>(false);
    request.client_gone = client_gone_;
    counted_ = true;
    ++request_number_;
    server_.Dispatch(std::move(request), Responder(shared_from_this()));
    if (!responded_) watches_.Add(weak_from_this(), request_number_);  // not answered at once
  }

  void OnWrite(beast::error_code error) {
    if (counted_) {
      counted_ = false;
      if (error) {
        server_.Abandoned();
      } else {
        server_.Finished(received_);
      }
    }
    if (error || close_after_write_ || !keep_alive_) {
      Close();
      return;
    }
    ReadNext();
  }

  // A request we will not dispatch: answer it and end the connection.
  void RejectAndClose(int status, std::string message) {
    close_after_write_ = true;
    counted_ = false;
    HttpResponse response;
    response.status = status;
    json::Writer body;
    body.StartObject();
    body.Key("error");
    body.String(message);
    body.EndObject();
    response.body = body.str();
    Write(std::move(response));
  }

  void Close() {
    if constexpr (kTls) {
      // Say goodbye with close_notify (bounded), so clients see a clean end of the stream.
      SetDeadline(std::chrono::seconds(5));
      stream_.async_shutdown([self = Self()](beast::error_code) { self->CloseSocket(); });
    } else {
      CloseSocket();
    }
  }

  void CloseSocket() {
    beast::error_code ignored;
    Lowest().shutdown(tcp::socket::shutdown_both, ignored);
    Lowest().close(ignored);
    timer_.cancel();
  }

  // Beast reads at most the read buffer's free capacity per call, and its parser consumes the
  // buffer as it goes, so the buffer never grows: from Beast's 512-byte start a 2 KiB request
  // took five recv calls. Reserved once per connection.
  static constexpr size_t kReadBufferBytes = 16 * 1024;

  Stream stream_;
  Timer timer_;
  std::optional<std::chrono::steady_clock::time_point> deadline_;  // none while working
  int waits_ = 0;  // timer waits pending (a cancelled one may still be queued)
  HttpServer::Impl& server_;
  HangUpWatches& watches_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::string head_;  // status line and headers of the response being written
  std::string body_;  // its body
  std::optional<http::response<http::empty_body>> continue_;
  SteadyTime received_{};
  uint64_t request_number_ = 0;  // requests dispatched so far; names the current one
  std::shared_ptr<std::atomic<bool>> client_gone_;  // the current request's
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool close_after_write_ = false;
  bool counted_ = false;    // the current request was dispatched and counts as in flight
  bool responded_ = false;  // Write() has been called for the current request
  bool watching_ = false;   // a hang-up watch is pending
};

void HttpServer::Impl::Accept() {
  IoThread& target = *io_[next_io_];
  next_io_ = (next_io_ + 1) % io_.size();
  acceptor_->async_accept(target.context, [this, &target](beast::error_code error, Socket socket) {
    if (error == asio::error::operation_aborted || !acceptor_->is_open()) return;
    if (!error) {
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      std::shared_ptr<Connection> connection;
      if (tls_) {
        connection = std::make_shared<StreamConnection<ssl::stream<Socket>>>(
            std::move(socket), *tls_, *this, target.watches);
      } else {
        connection =
            std::make_shared<StreamConnection<Socket>>(std::move(socket), *this, target.watches);
      }
      // Start on the connection's own thread.
      asio::post(connection->executor(), [connection] { connection->Start(); });
    } else {
      LOG_WARN("accept failed: {}", error.message());
    }
    Accept();
  });
}

Responder::Responder(std::shared_ptr<Connection> connection) : connection_(std::move(connection)) {}

Responder::~Responder() {
  if (connection_) {
    HttpResponse response;
    response.status = 500;
    response.body = R"({"error":"internal error: request was dropped without an answer"})";
    Send(std::move(response));
  }
}

void Responder::Send(HttpResponse response) {
  std::shared_ptr<Connection> connection = std::move(connection_);
  if (!connection) return;
  auto executor = connection->executor();
  asio::dispatch(executor,
                 [connection = std::move(connection), response = std::move(response)]() mutable {
                   connection->Write(std::move(response));
                 });
}

void Responder::SendWith(UniqueFunction<HttpResponse()> make_response) {
  std::shared_ptr<Connection> connection = std::move(connection_);
  if (!connection) return;
  auto executor = connection->executor();
  asio::dispatch(executor, [connection = std::move(connection),
                            make_response = std::move(make_response)]() mutable {
    connection->Write(make_response());
  });
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() = default;

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                      HttpHandler handler) {
  auto impl = std::make_unique<Impl>(options, std::move(handler));
  RETURN_IF_ERROR(impl->Listen());
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

uint16_t HttpServer::port() const { return impl_->port(); }
void HttpServer::StopAccepting() { impl_->StopAccepting(); }
void HttpServer::Shutdown(std::chrono::milliseconds timeout) { impl_->Shutdown(timeout); }
HttpServer::Stats HttpServer::stats() const { return impl_->stats(); }

}  // namespace rampart::net
