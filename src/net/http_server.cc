#include "net/http_server.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "core/cpu_affinity.h"
#include "core/logging.h"
#include "core/thread_name.h"
#include "net/http_connection.h"
#include "net/local_port.h"

namespace rampart::net {

namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

}  // namespace

class HttpServer::Impl {
 public:
  Impl(const HttpServerOptions& options, HttpHandler handler)
      : core_(options, std::move(handler)) {}

  ~Impl() { Shutdown(std::chrono::milliseconds(0)); }

  // Starts serving on `listener` (closed on failure).
  Status Listen(Listener listener) {
    listener_ = std::move(listener);
    const HttpServerOptions& options = core_.options();
    const size_t threads = options.threads > 0 ? static_cast<size_t>(options.threads)
                                               : static_cast<size_t>(UsableCpuCount());
    if (options.tls) {
      ASSIGN_OR_RETURN(engine_, MakeTlsEngine(core_, threads, *options.tls));
    } else {
      ASSIGN_OR_RETURN(engine_, MakePlainEngine(core_, threads));
    }
    if (!listener_.open()) return InvalidArgument("{}: no listening socket", options.name);
    const int listening_fd = listener_.Release();
    port_ = LocalPort(listening_fd);
    RETURN_IF_ERROR(engine_->Listen(listening_fd));
    for (size_t i = 0; i < threads; ++i) {
      threads_.emplace_back([this, i, name = fmt::format("{}-io-{}", options.name, i)] {
        NameThisThread(name);
        if (Status pinned = PinThisThread(core_.options().cpus); !pinned.ok()) {
          LOG_WARN("{}: {}", name, pinned.message());
        }
        if (core_.options().sched_batch) {
          if (Status batch = UseBatchScheduling(); !batch.ok()) {
            LOG_WARN("{}: {}", name, batch.message());
          }
        }
        engine_->Run(i);
      });
    }
    return Status::Ok();
  }

  uint16_t port() const { return port_; }

  void StopAccepting() {
    if (threads_.empty() || !accepting_) return;
    accepting_ = false;
    engine_->StopAccepting();
  }

  void Shutdown(std::chrono::milliseconds timeout) {
    if (stopped_) return;
    stopped_ = true;
    if (!threads_.empty()) {
      StopAccepting();
      core_.Drain(timeout);
    }
    if (engine_) engine_->Stop();
    for (auto& thread : threads_) thread.join();
    threads_.clear();
  }

  HttpServer::Stats stats() const { return core_.stats(); }

  void CheckDeadlines() {
    if (!threads_.empty() && !stopped_) engine_->CheckDeadlines();
  }

 private:
  HttpCore core_;
  Listener listener_;                   // until the engine takes it
  std::unique_ptr<HttpEngine> engine_;  // destroyed first: its connections report to core_
  std::vector<std::thread> threads_;
  uint16_t port_ = 0;
  bool accepting_ = true;
  bool stopped_ = false;
};

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
  if (!connection_) return;
  Connection& connection = *connection_;
  connection.Answer(std::move(connection_), std::move(response));
}

void Responder::SendWith(UniqueFunction<HttpResponse()> make_response) {
  if (!connection_) return;
  Connection& connection = *connection_;
  connection.AnswerWith(std::move(connection_), std::move(make_response));
}

StreamWriter Responder::StartStream(HttpResponseHead head) {
  if (!connection_) return StreamWriter();
  Connection& connection = *connection_;
  return StreamWriter(connection.StartStream(std::move(connection_), std::move(head)));
}

Result<Listener> Listener::Open(const std::string& address, uint16_t port) {
  boost::system::error_code error;
  const auto parsed = asio::ip::make_address(address, error);
  if (error) return InvalidArgument("not an IP address: '{}'", address);
  asio::io_context context;
  tcp::acceptor acceptor(context);
  const tcp::endpoint endpoint(parsed, port);
  acceptor.open(endpoint.protocol(), error);
  if (!error) acceptor.set_option(asio::socket_base::reuse_address(true), error);
  if (!error) acceptor.bind(endpoint, error);
  if (!error) acceptor.listen(asio::socket_base::max_listen_connections, error);
  if (!error) acceptor.non_blocking(true, error);
  if (!error) {
    const int fd = acceptor.release(error);
    if (!error) return Listener(fd);
  }
  std::string reason = error.message();  // "Address already in use"
  if (!reason.empty()) reason[0] = static_cast<char>(std::tolower(reason[0]));
  return Unavailable("{}", reason);
}

Listener::Listener(Listener&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

Listener& Listener::operator=(Listener&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

Listener::~Listener() {
  if (fd_ >= 0) ::close(fd_);
}

uint16_t Listener::port() const { return fd_ >= 0 ? LocalPort(fd_) : 0; }

int Listener::Release() { return std::exchange(fd_, -1); }

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() = default;

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                      HttpHandler handler) {
  Result<Listener> listener = Listener::Open(options.address, options.port);
  if (!listener.ok()) {
    if (listener.status().code() != StatusCode::kUnavailable) return listener.status();
    return Unavailable("cannot listen on {}:{}: {}", options.address, options.port,
                       listener.status().message());
  }
  return Start(options, std::move(handler), std::move(listener).value());
}

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                      HttpHandler handler, Listener listener) {
  auto impl = std::make_unique<Impl>(options, std::move(handler));
  RETURN_IF_ERROR(impl->Listen(std::move(listener)));
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

uint16_t HttpServer::port() const { return impl_->port(); }
void HttpServer::StopAccepting() { impl_->StopAccepting(); }
void HttpServer::CheckDeadlines() { impl_->CheckDeadlines(); }
void HttpServer::Shutdown(std::chrono::milliseconds timeout) { impl_->Shutdown(timeout); }
HttpServer::Stats HttpServer::stats() const { return impl_->stats(); }

}  // namespace rampart::net
