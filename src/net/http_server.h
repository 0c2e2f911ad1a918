#pragma once

// HttpServer: HTTP/1.1 with keep-alive, on a fixed set of I/O threads.
//
// Each I/O thread runs its own event loop (plain HTTP: an edge-triggered epoll loop of ours,
// see event_loop.h; HTTPS: Boost.Asio); a connection lives on one thread for its whole life.
// Requests are parsed by Beast's parser; pipelined requests are answered in order.
// The handler is called on that thread and must not block: it answers through the Responder,
// from any thread, exactly once. Bodies over `max_body_bytes` are answered 413 without being
// read; unparsable requests get 400. Both close the connection. With `tls` set every connection
// is HTTPS (TLS 1.2+), optionally requiring a client certificate (mutual TLS).
//
// Thread safety: Start/StopAccepting/Shutdown from one controlling thread; stats() from any.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/unique_function.h"
#include "net/http.h"

namespace rampart::net {

class Connection;

// Answers one request. Move-only; Send may be called from any thread. A Responder dropped
// without Send answers 500, so a forgotten path never hangs a client.
class Responder {
 public:
  explicit Responder(std::shared_ptr<Connection> connection);
  Responder(Responder&&) noexcept = default;
  Responder& operator=(Responder&&) noexcept = default;
  ~Responder();

  void Send(HttpResponse response);
  // Builds the response on the connection's own I/O thread, so serialization never runs on (and
  // slows) the thread that completed the work.
  void SendWith(UniqueFunction<HttpResponse()> make_response);

 private:
  std::shared_ptr<Connection> connection_;
};

using HttpHandler = std::function<void(HttpRequest&& request, Responder responder)>;

// PEM files for HTTPS.
struct HttpTlsOptions {
  std::string cert;       // certificate chain, required
  std::string key;        // private key, required
  std::string root_cert;  // CA(s) that sign client certificates; required when `mutual`
  bool mutual = false;    // require a client certificate signed by root_cert
};

struct HttpServerOptions {
  std::string address = "0.0.0.0";
  uint16_t port = 8000;  // 0 picks a free port; see HttpServer::port()
  int threads = 0;       // 0 = one per core
  uint64_t max_body_bytes = 64ull << 20;
  std::chrono::seconds idle_timeout{300};
  std::optional<HttpTlsOptions> tls;  // plain HTTP when empty
  std::string name = "http";          // I/O threads are named "<name>-io-<i>"
  std::vector<int> cpus;              // CPUs the I/O threads run on; empty = any
  bool sched_batch = false;           // I/O threads under SCHED_BATCH (UseBatchScheduling)
};

// A listening TCP socket opened before its server starts, so that a port already in use is found
// before anything slow (loading models) and nothing can take the port meanwhile; connections
// wait in its backlog until the server accepts them. Move-only; closes the socket unless a
// server took it.
class Listener {
 public:
  // Binds `address`:`port` (an IP address; port 0 picks a free one) and listens. Errors:
  // InvalidArgument "not an IP address: ..." when the address does not parse; Unavailable with
  // the OS's reason alone, lower case ("address already in use", "permission denied"), for the
  // caller to say which listener it is.
  static Result<Listener> Open(const std::string& address, uint16_t port);

  Listener() = default;
  Listener(Listener&& other) noexcept;
  Listener& operator=(Listener&& other) noexcept;
  ~Listener();

  uint16_t port() const;  // the bound port (the chosen one when Open was given 0)
  int Release();          // hands the socket over; -1 when there is none
  bool open() const { return fd_ >= 0; }

 private:
  explicit Listener(int fd) : fd_(fd) {}
  int fd_ = -1;
};

class HttpServer {
 public:
  // Binds, listens and starts the I/O threads. Errors: Unavailable "cannot listen on
  // <address>:<port>: <reason>" when the address cannot be bound; InvalidArgument for an address
  // that does not parse and for TLS files that cannot be read or used.
  static Result<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                   HttpHandler handler);
  // As above, on a listener opened beforehand (options.address and options.port are then
  // ignored); the server owns it from here, also when it fails to start.
  static Result<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                   HttpHandler handler, Listener listener);
  ~HttpServer();  // Shutdown(0) if not done

  uint16_t port() const;

  // Closes the listening socket; open connections keep being served.
  void StopAccepting();
  // Waits (up to `timeout`) until every request read has been answered and written, then stops
  // the I/O threads and closes all connections.
  void Shutdown(std::chrono::milliseconds timeout);

  struct Stats {
    uint64_t requests = 0;         // responses written
    uint64_t handle_ns_total = 0;  // request read -> response written, summed
  };
  Stats stats() const;

  class Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rampart::net
