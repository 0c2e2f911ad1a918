#pragma once

// GrpcServer: gRPC's wire protocol (HTTP/2, length-prefixed messages, status in trailers) served
// by nghttp2 on Rampart's own event loops (event_loop.h), without gRPC's C core.
//
// Why: gRPC core spends tens of µs of CPU per call in its own polling, locking and memory
// accounting, several times what the same request costs over Rampart's HTTP/1.1 (figures in
// docs/benchmarks.md, "gRPC vs HTTP infer"). Here a call costs what HTTP/2 framing costs: the
// connection's thread reads the frames, hands each call's messages to its handler, and sends the
// answers finished meanwhile every few calls and at the end of its loop turn, fewer sends than
// calls (GrpcConnection::Take says why not only at the turn's end).
//
// What it speaks (docs/grpc-transport.md): HTTP/2 with prior knowledge over cleartext (h2c, what
// gRPC clients send to an `insecure` channel), or over TLS 1.2+ (ALPN "h2", optionally requiring
// a client certificate: mutual TLS); POST with `content-type: application/grpc[+proto]`;
// request messages uncompressed or compressed with `gzip` or `deflate` (answers go
// uncompressed); `grpc-timeout` deadlines (a call past its deadline is cancelled: its handler is
// told and the stream reset); trailers-only answers for calls that end without a message.
//
// Bounds: each message at most max_message_bytes, inflated too (larger: RESOURCE_EXHAUSTED, read
// no further); the bytes of messages being read, over all calls (max_reading_bytes); streams per
// connection (SETTINGS_MAX_CONCURRENT_STREAMS); connections (max_connections, one more is closed
// at once; one that has not started HTTP/2 within handshake_timeout is closed); a handler can pause
// reading a call (GrpcCall::PauseReading), and its unread bytes then hold the stream's flow-control
// window, so the client stops sending.
//
// Threads: handlers run on the connection's I/O thread and must not block. A call is answered
// from any thread (GrpcCall's methods are thread-safe); the answer is written by the I/O thread.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/peer.h"
#include "core/status.h"
#include "core/unique_function.h"
#include "net/http_server.h"

namespace rampart::net {

class GrpcConnection;
class EventLoop;

// gRPC's status codes, by their numbers on the wire (`grpc-status`).
enum class GrpcCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

// One metadata entry (a header other than HTTP/2's and gRPC's own), key in lower case.
using GrpcMetadata = std::vector<std::pair<std::string, std::string>>;

// The handler of one call, made by the service when the call's headers have arrived. Its
// methods run on the connection's I/O thread, in order, and must not block; none runs after
// OnCancel or once the call has been finished and the stream closed.
class GrpcCallHandler {
 public:
  virtual ~GrpcCallHandler() = default;
  // One whole request message.
  virtual void OnMessage(std::string message) = 0;
  // The client ended its side: no more messages come.
  virtual void OnHalfClose() = 0;
  // The call is over before it was finished: the client reset it, its deadline passed, the
  // connection went away or the server shut down. Answers are dropped from now on.
  virtual void OnCancel() = 0;
};

// Bytes before each gRPC message on the wire: a compressed flag and a big-endian length.
inline constexpr size_t kGrpcPrefixBytes = 5;

// A message to send, built in place: its bytes go at payload(), after room for gRPC's prefix,
// so that writing it copies nothing (tensor bytes serialized straight into the buffer that is
// sent). Move-only.
class GrpcOutMessage {
 public:
  explicit GrpcOutMessage(size_t size) : bytes_(kGrpcPrefixBytes + size, '\0') {}
  // A copy of `message`.
  static GrpcOutMessage Of(std::string_view message) {
    GrpcOutMessage out(message.size());
    std::copy(message.begin(), message.end(), out.payload());
    return out;
  }
  GrpcOutMessage(GrpcOutMessage&&) noexcept = default;
  GrpcOutMessage& operator=(GrpcOutMessage&&) noexcept = default;

  char* payload() { return bytes_.data() + kGrpcPrefixBytes; }
  size_t size() const { return bytes_.size() - kGrpcPrefixBytes; }

 private:
  friend class GrpcConnection;
  std::string bytes_;
};

// One call: an HTTP/2 stream carrying a gRPC method. The service keeps a shared_ptr to answer
// it; every answering method is thread-safe and is dropped once the call is over.
class GrpcCall {
 public:
  GrpcCall(std::shared_ptr<GrpcConnection> connection, int32_t stream_id, std::string method,
           GrpcMetadata metadata, std::shared_ptr<const Peer> peer)
      : connection_(std::move(connection)),
        stream_id_(stream_id),
        method_(std::move(method)),
        metadata_(std::move(metadata)),
        peer_(std::move(peer)) {}
  GrpcCall(const GrpcCall&) = delete;
  GrpcCall& operator=(const GrpcCall&) = delete;

  // "/package.Service/Method".
  const std::string& method() const { return method_; }
  // The first value of `key` (lower case), or empty.
  std::string_view Metadata(std::string_view key) const;
  const GrpcMetadata& metadata() const { return metadata_; }
  const Peer& peer() const { return *peer_; }
  // True once the call is over without being finished (GrpcCallHandler::OnCancel).
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }
  // Shared with whoever must see the cancellation (serve::InferRequest::cancelled).
  const std::shared_ptr<std::atomic<bool>>& cancelled_flag() { return cancelled_flag_; }

  // Sends one response message (the response headers first, with the call's first message).
  void Write(GrpcOutMessage message);
  void Write(std::string_view message) { Write(GrpcOutMessage::Of(message)); }
  // Ends the call with `code` and `message` (`grpc-message`), after the messages written
  // before; `trailers` are extra trailing metadata. Later calls do nothing.
  void Finish(GrpcCode code, std::string message = {}, GrpcMetadata trailers = {});
  // The answer in one step: `response` then OK.
  void FinishWith(GrpcOutMessage response);
  // Stops handing this call's messages to the handler (they wait, and hold the stream's window
  // once it is full) until ResumeReading. For a streaming handler with enough work in hand.
  void PauseReading();
  void ResumeReading();
  // Runs `task` on the call's I/O thread (at once when called there); dropped once the server is
  // gone. What a handler's answers must be ordered by (writes from one thread keep their order).
  void Post(UniqueFunction<void()> task);
  bool OnIoThread() const;

 private:
  friend class GrpcConnection;

  const std::shared_ptr<GrpcConnection> connection_;
  const int32_t stream_id_;
  const std::string method_;
  const GrpcMetadata metadata_;
  const std::shared_ptr<const Peer> peer_;
  std::atomic<bool> cancelled_{false};
  const std::shared_ptr<std::atomic<bool>> cancelled_flag_ =
      std::make_shared<std::atomic<bool>>(false);
  std::atomic<bool> finished_{false};  // Finish was called (the first wins)
};

// Makes the handler of a new call, on the connection's I/O thread; may finish the call at once
// (an unknown method) and return null then.
using GrpcService = std::function<std::unique_ptr<GrpcCallHandler>(std::shared_ptr<GrpcCall>)>;

// TLS for GrpcServer: PEM text (not paths).
struct GrpcTls {
  std::string cert_chain_pem;  // the server's certificate, then its intermediates
  std::string private_key_pem;
  std::string root_certs_pem;  // CAs that sign client certificates; required when `mutual`
  bool mutual = false;         // require and verify a client certificate
};

struct GrpcServerOptions {
  std::string address = "0.0.0.0";
  uint16_t port = 8001;       // 0 picks a free port; see GrpcServer::port()
  int threads = 0;            // I/O threads; 0 = one per core
  std::string name = "grpc";  // I/O threads are named "<name>-io-<i>"
  // Largest request message; a larger one fails its call RESOURCE_EXHAUSTED.
  uint64_t max_message_bytes = uint64_t{4} << 20;
  // Bytes of request messages being read at once, over all calls and connections: a message's
  // length counts from its prefix until it is whole and handed to its handler. One that would
  // pass it fails its call RESOURCE_EXHAUSTED before its body is read. 0 = no limit.
  uint64_t max_reading_bytes = uint64_t{1} << 30;
  // Calls open at once on one connection (SETTINGS_MAX_CONCURRENT_STREAMS).
  uint32_t max_concurrent_streams = 1024;
  // Connections open at once; one more is closed at once. 0 = no limit.
  size_t max_connections = 4096;
  // A connection whose client has not completed the TLS handshake and sent its first HTTP/2
  // frame this long after it connected is closed (checked every second). Idle connections with
  // a session under way stay open, as gRPC clients keep channels.
  std::chrono::seconds handshake_timeout{20};
  std::vector<int> cpus;     // CPUs the I/O threads run on; empty = any
  bool sched_batch = false;  // I/O threads under SCHED_BATCH
  // TLS 1.2+ with HTTP/2 chosen by ALPN, as gRPC clients require; cleartext (h2c) when empty.
  std::optional<GrpcTls> tls;
};

class GrpcServer {
 public:
  struct Stats {
    uint64_t calls = 0;            // calls started
    uint64_t cancelled_calls = 0;  // calls over before they were finished
    uint64_t open_connections = 0;
    uint64_t refused_connections = 0;  // over max_connections
  };

  // Starts serving `service` on `listener` (options.address and port are then ignored).
  // Errors: InvalidArgument naming a TLS certificate or key that does not load; Internal when an
  // event loop cannot be made.
  static Result<std::unique_ptr<GrpcServer>> Start(const GrpcServerOptions& options,
                                                   GrpcService service, Listener listener);
  ~GrpcServer();  // Shutdown(0) if not done
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  uint16_t port() const { return port_; }
  Stats stats() const;

  // Stops taking calls: the listener closes and every connection is sent GOAWAY (calls already
  // started go on). Idempotent.
  void StopAccepting();
  // StopAccepting, then waits up to `timeout` for calls in flight, then cancels the rest
  // (handlers see OnCancel), stops the I/O threads and closes every connection. Idempotent.
  void Shutdown(std::chrono::milliseconds timeout);

 private:
  struct Impl;
  explicit GrpcServer(std::unique_ptr<Impl> impl, uint16_t port);
  std::unique_ptr<Impl> impl_;
  const uint16_t port_;
};

// "1S", "100m", "30u", "5n", "2M", "1H" (gRPC's grpc-timeout: at most 8 digits and a unit) as a
// duration; nullopt when malformed.
std::optional<std::chrono::nanoseconds> ParseGrpcTimeout(std::string_view value);

// `message` for `grpc-message`: percent-encoded outside printable ASCII and '%'.
std::string PercentEncodeGrpcMessage(std::string_view message);

}  // namespace rampart::net
