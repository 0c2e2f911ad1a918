#pragma once

// HttpServer: HTTP/1.1 with keep-alive, on a fixed set of I/O threads.
//
// Each I/O thread runs its own event loop (plain HTTP: an edge-triggered epoll loop of ours,
// see event_loop.h; HTTPS: Boost.Asio); a connection lives on one thread for its whole life.
// Requests are parsed by Beast's parser; pipelined requests are answered in order.
// The handler is called on that thread and must not block: it answers through the Responder,
// from any thread, exactly once: with a whole HttpResponse, or with a stream of chunks
// (Responder::StartStream, StreamWriter) written as they come. Bodies over `max_body_bytes` are
// answered 413 without being read; unparsable requests get 400. Both close the connection. With
// `tls` set every connection is HTTPS (TLS 1.2+), optionally requiring a client certificate (mutual
// TLS).
//
// Overload and slow clients are bounded by HttpServerOptions: open connections, the time a
// request's head and body may take, and the bytes of bodies being read at once; each refusal is
// answered with its status (HttpRefusal) and counted.
//
// Thread safety: Start/StopAccepting/Shutdown from one controlling thread; stats() from any.

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "core/unique_function.h"
#include "net/http.h"

namespace rampart::net {

class Connection;
class HttpStream;

// Writes a streamed answer (Responder::StartStream): chunks as they come, then an end.
//
// Each chunk goes to the client as soon as its connection's I/O thread can write it, in the
// order written: as one HTTP/1.1 chunk (Transfer-Encoding: chunked), or as raw bytes to an
// HTTP/1.0 client (the body then ends when the connection closes). Nothing is re-chunked or held
// back beyond what one socket write gathers.
//
// Backpressure: bytes written and not yet on the wire are queued_bytes(). Write answers kFull
// once they reach the head's max_queued_bytes; the producer then stops (stops reading its
// upstream) until OnDrained calls back. A Write made while twice max_queued_bytes are queued
// aborts the stream instead, so a producer that ignores kFull cannot hold unbounded memory.
//
// The stream ends with Finish (the client sees a whole answer; a keep-alive connection then
// reads its next request) or Abort (the connection is reset or cut without the chunked end, so
// the client sees a broken answer). A writer dropped before either aborts. It also ends when the
// client goes away, the connection fails, the client stops reading for the server's idle timeout,
// or the server shuts down: OnClosed calls back, closed() turns true (and so does the request's
// HttpRequest::client_gone), and later writes are dropped (kClosed), not errors. The server
// counts the request in flight (HttpServer::Shutdown waits for it) until the stream has ended.
//
// Thread safety: every method may be called from any thread, also at once from several (Write
// takes a short lock and wakes the I/O thread once per batch of writes); moving or destroying a
// writer needs its owner's synchronization. Callbacks run on the connection's I/O thread (or at
// once on the caller's, see each) and must be cheap and not block; they may call the writer.
// Calls made after the server was destroyed are dropped safely.
class StreamWriter {
 public:
  enum WriteResult {
    kQueued,  // queued; write on
    kFull,    // queued, and max_queued_bytes or more now wait: stop until OnDrained
    kClosed,  // dropped: the stream has ended (Finish, Abort, the client gone, ...)
  };

  StreamWriter() = default;  // a writer of no stream: every Write is kClosed
  explicit StreamWriter(std::shared_ptr<HttpStream> stream);
  StreamWriter(StreamWriter&&) noexcept = default;
  StreamWriter& operator=(StreamWriter&& other) noexcept;
  ~StreamWriter();  // Abort unless finished

  // Queues `chunk` (an empty one is ignored: it would end a chunked body).
  WriteResult Write(std::string chunk);
  // Ends the answer cleanly once the chunks queued before it are written.
  void Finish();
  // Ends the answer broken: chunks not yet written are dropped. Nothing after Finish.
  void Abort();

  // Bytes written and not yet on the wire (chunk bytes, not counting the framing).
  uint64_t queued_bytes() const;
  // Calls `callback` once, when fewer than max_queued_bytes / 2 bytes are queued or the stream
  // has ended: at once on this thread if that holds now, else on the I/O thread. Replaces a
  // callback not yet called.
  void OnDrained(UniqueFunction<void()> callback);
  // Calls `callback` once if the stream ends other than by Finish or Abort (the client went
  // away, the connection failed or timed out, the server shut down): at once on this thread if
  // it has, else on the I/O thread, promptly. Replaces a callback not yet called.
  void OnClosed(UniqueFunction<void()> callback);
  // True once writes are no longer taken: after Finish or Abort, or once the stream has ended.
  bool closed() const;

 private:
  std::shared_ptr<HttpStream> stream_;
};

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
  // Answers with a stream instead (StreamWriter): the head goes at once, the body as the writer
  // writes it. A HEAD request gets the head alone; its stream is closed from the start.
  StreamWriter StartStream(HttpResponseHead head);

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

// Why the server refused a request or a connection (HttpServerOptions::on_refused).
enum class HttpRefusal {
  kConnections,     // over max_connections: 503, closed before anything is read
  kHeaderTimeout,   // the head did not come within header_timeout: 408
  kBodyTimeout,     // the body came slower than body_timeout and body_min_rate allow: 408
  kBodyTooLarge,    // over max_body_bytes: 413
  kBodiesInFlight,  // its body would pass max_body_bytes_in_flight: 503
  kMalformed,       // not HTTP/1.x as the parser reads it: 400
};
inline constexpr int kHttpRefusalKinds = 6;
// "connections", "header_timeout", ...: the metrics label.
std::string_view HttpRefusalName(HttpRefusal refusal);

struct HttpServerOptions {
  std::string address = "0.0.0.0";
  uint16_t port = 8000;  // 0 picks a free port; see HttpServer::port()
  int threads = 0;       // 0 = one per core
  uint64_t max_body_bytes = 64ull << 20;
  // Routes whose bodies are handed over in pieces (HttpRequest::body_reader) rather than read
  // whole: called on the I/O thread with a request's head (method, target, headers; no body) and
  // answers that body's size limit in bytes, or 0 to read the body whole as usual (up to
  // max_body_bytes). Must be cheap and thread-safe. Streamed bodies count neither against
  // max_body_bytes nor max_body_bytes_in_flight (they are not held in memory). Plain HTTP only:
  // over HTTPS every body is read whole and body_reader stays null.
  std::function<uint64_t(const HttpRequest& head)> streamed_body;
  // A connection waiting for its next request is closed after this long.
  std::chrono::seconds idle_timeout{300};
  // Connections open at once; one more is answered 503 (HTTPS: closed, without spending a
  // handshake on it) before anything is read. 0 = no limit.
  size_t max_connections = 4096;
  // Once a request's first byte has arrived its head must be whole within header_timeout, and
  // its body then within body_timeout plus one second for every body_min_rate bytes received
  // (so a body trickling a byte at a time cannot hold a connection, however large it is
  // declared). Either answers 408 and closes.
  std::chrono::seconds header_timeout{20};
  std::chrono::seconds body_timeout{20};
  uint64_t body_min_rate = 500;  // bytes per second
  // Bytes of request bodies being read at once, over all connections: a declared length counts
  // in full from the head, a chunked body as its chunks arrive, until the request is handed to
  // the handler. A body that would pass it is answered 503. 0 = no limit.
  uint64_t max_body_bytes_in_flight = 1ull << 30;
  // Told about every refusal, on an I/O thread; must be cheap and thread-safe (a counter).
  std::function<void(HttpRefusal)> on_refused;
  // The clock every connection deadline is read from; null = Clock::Coarse(). The I/O threads
  // apply deadlines once a second (and at CheckDeadlines), whatever the clock.
  const Clock* clock = nullptr;
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
  // Applies every connection's deadline now, on its I/O thread, and returns once all have. The
  // I/O threads do this by themselves every second; a test that moves a fake clock calls it.
  void CheckDeadlines();
  // Waits (up to `timeout`) until every request read has been answered and written (a stream:
  // finished or aborted), then stops the I/O threads and closes all connections; streams still
  // open end as if their clients went away (StreamWriter::OnClosed).
  void Shutdown(std::chrono::milliseconds timeout);

  struct Stats {
    uint64_t requests = 0;                              // responses written
    uint64_t handle_ns_total = 0;                       // request read -> response written, summed
    std::array<uint64_t, kHttpRefusalKinds> refused{};  // by HttpRefusal
    uint64_t open_connections = 0;
    uint64_t body_bytes_in_flight = 0;  // reserved by requests being read
  };
  Stats stats() const;

  class Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rampart::net
