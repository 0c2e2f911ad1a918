// HTTPS: the TLS context, the I/O threads and the listener (see http_tls.h).

#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <memory>
#include <optional>
#include <utility>  // before Boost.Asio 1.74, whose awaitable.hpp needs std::exchange
#include <vector>

#include "core/exceptions.h"
#include "core/logging.h"
#include "net/http_tls.h"

namespace rampart::net {
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

class TlsEngine final : public HttpEngine {
 public:
  TlsEngine(HttpCore& core, size_t threads, std::unique_ptr<ssl::context> tls)
      : core_(core), tls_(std::move(tls)) {
    for (size_t i = 0; i < threads; ++i) {
      io_.push_back(std::make_unique<TlsIo>(core));
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
    TlsIo& target = *io_[next_io_];
    next_io_ = (next_io_ + 1) % io_.size();
    acceptor_->async_accept(
        target.context, [this, &target](beast::error_code error, Socket socket) {
          if (error == asio::error::operation_aborted || !acceptor_->is_open()) return;
          if (!error) {
            // Over max_connections the socket just closes: no handshake is spent on it.
            if (std::optional<ConnectionSlot> slot = core_.OpenConnection()) {
              beast::error_code ignored;
              socket.set_option(tcp::no_delay(true), ignored);
              ServeTls(std::move(socket), *tls_, core_, target, std::move(*slot));
            }
          } else {
            LOG_WARN("accept failed: {}", error.message());
          }
          Accept();
        });
  }

  HttpCore& core_;
  std::unique_ptr<ssl::context> tls_;  // shared by every connection
  std::vector<std::unique_ptr<TlsIo>> io_;
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
