#pragma once

// The native gRPC transport's connections (grpc_server.h): what the I/O threads share, one I/O
// thread's state, and one HTTP/2 connection with its calls. Internal to net/grpc_server.cc and
// net/grpc_connection.cc.

#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/byte_budget.h"
#include "core/clock.h"
#include "core/exceptions.h"
#include "core/logging.h"
#include "net/event_loop.h"
#include "net/grpc_server.h"
#include "net/grpc_wire.h"
#include "net/http_stream.h"

namespace rampart::net {

// What a connection reads from its socket at a time.
inline constexpr size_t kGrpcReadBufferBytes = 64 * 1024;

// What the connections share: the options, the service, counts and the calls in flight.
struct GrpcShared {
  GrpcShared(const GrpcServerOptions& options_in, GrpcService service_in,
             std::shared_ptr<SSL_CTX> tls_in)
      : options(options_in),
        service(std::move(service_in)),
        tls(std::move(tls_in)),
        reading(options.max_reading_bytes) {}

  void CallStarted() {
    calls.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lock(mutex);
    ++in_flight;
  }
  void CallEnded() {
    std::lock_guard lock(mutex);
    if (--in_flight == 0) idle.notify_all();
  }
  // True when no call is in flight within `timeout`.
  bool WaitIdle(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex);
    return idle.wait_for(lock, timeout, [&] { return in_flight == 0; });
  }

  const GrpcServerOptions options;
  const GrpcService service;
  const std::shared_ptr<SSL_CTX> tls;  // null: cleartext
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> cancelled_calls{0};
  std::atomic<uint64_t> open_connections{0};
  std::atomic<uint64_t> refused_connections{0};
  // Messages being read: a message's length from its prefix until it is handed over.
  ByteBudget reading;
  std::atomic<bool> stopping{false};  // GOAWAY new connections at once

 private:
  std::mutex mutex;
  std::condition_variable idle;
  int64_t in_flight = 0;  // guarded by mutex
};

// One I/O thread: its loop, its connections, and those with output to send at the turn's end.
struct GrpcIo {
  explicit GrpcIo(GrpcShared& shared_in) : shared(shared_in) {}
  GrpcShared& shared;
  std::unique_ptr<EventLoop> loop;
  std::shared_ptr<IoGate> gate;
  std::unordered_map<GrpcConnection*, std::shared_ptr<GrpcConnection>> open;
  std::vector<std::shared_ptr<GrpcConnection>> unsent;
  // Calls with a deadline: when, and which (connection, stream). A call that ends takes its
  // entry out (Stream::deadline).
  using Deadlines = std::multimap<SteadyTime, std::pair<std::weak_ptr<GrpcConnection>, int32_t>>;
  Deadlines deadlines;

  void SendAll();
  void ExpireDeadlines();
  void CheckStarted();  // every second
};

// One HTTP/2 connection and its calls, on its I/O thread from accept to close.
class GrpcConnection final : public EventLoop::Watcher,
                             public std::enable_shared_from_this<GrpcConnection> {
 public:
  GrpcConnection(int fd, GrpcIo& io, std::shared_ptr<GrpcShared> shared)
      : fd_(fd), io_(io), shared_(std::move(shared)), gate_(io.gate) {
    shared_->open_connections.fetch_add(1, std::memory_order_relaxed);
  }
  // May run after the server is gone (a call held the connection): touches only what it owns.
  ~GrpcConnection() override {
    if (ssl_ != nullptr) SSL_free(ssl_);
    if (session_ != nullptr) nghttp2_session_del(session_);
    if (fd_ >= 0) ::close(fd_);
    shared_->open_connections.fetch_sub(1, std::memory_order_relaxed);
  }

  // On the connection's thread, once.
  void Open();
  void OnEvents(uint32_t events) override {
    if (!RunLoggingExceptions("a gRPC connection", [&] { HandleEvents(events); })) Close();
  }
  // At the end of the loop's turn: hands nghttp2's output to the socket.
  void Send() {
    queued_ = false;
    if (!RunLoggingExceptions("a gRPC connection", [&] { Flush(); })) Close();
  }
  // GOAWAY: no new calls; those started go on.
  void GoAway() {
    if (session_ == nullptr || going_away_) return;
    going_away_ = true;
    nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE,
                          nghttp2_session_get_last_proc_stream_id(session_), NGHTTP2_NO_ERROR,
                          nullptr, 0);
    MarkOutput();
  }
  // Closes the connection when its client has not completed the TLS handshake and sent its
  // first HTTP/2 frame within the handshake timeout of its opening (`now`: Clock::Coarse's).
  void CheckStarted(SteadyTime now) {
    if (!started_ && session_ != nullptr && now >= opened_ + shared_->options.handshake_timeout) {
      LOG_DEBUG("gRPC: closing a connection from {} that sent no HTTP/2 frame within {} s",
                peer_ != nullptr ? peer_->address : "?",
                shared_->options.handshake_timeout.count());
      Close();
    }
  }
  // The call on `stream_id` is past its deadline: it is cancelled (which takes its deadline
  // entry out; false when there was no such call).
  bool Expire(int32_t stream_id) {
    if (session_ == nullptr || streams_.find(stream_id) == streams_.end()) return false;
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, stream_id, NGHTTP2_CANCEL);
    CancelStream(stream_id);
    MarkOutput();
    return true;
  }
  void Close();

  // From GrpcCall, on any thread: runs `task` on this connection's thread (at once when called
  // there), or drops it once the server is gone.
  bool OnThisThread() const { return std::this_thread::get_id() == thread_; }
  template <typename Task>
  void OnThread(Task&& task) {
    if (OnThisThread()) {
      task();
    } else {
      gate_->Post(UniqueFunction<void()>(std::forward<Task>(task)));
    }
  }
  void Write(int32_t stream_id, GrpcOutMessage message);
  void Finish(int32_t stream_id, GrpcCode code, std::string message, GrpcMetadata trailers);
  void SetPaused(int32_t stream_id, bool paused);

 private:
  struct Stream {
    std::string method;
    std::string content_type;
    bool post = false;
    GrpcMetadata metadata;
    size_t metadata_bytes = 0;
    std::optional<std::chrono::nanoseconds> timeout;
    std::optional<GrpcIo::Deadlines::iterator> deadline;  // its entry in io_.deadlines
    std::string encoding;                                 // grpc-encoding
    std::shared_ptr<GrpcCall> call;
    std::unique_ptr<GrpcCallHandler> handler;
    bool counted = false;  // in GrpcShared's calls in flight
    // Reading: the prefix of the message being read, then its body.
    uint8_t prefix[kGrpcPrefixBytes] = {};
    size_t prefix_bytes = 0;
    size_t body_bytes = 0;  // the current message's length, once its prefix is whole
    std::string body;
    ByteReservation reserved;     // body_bytes from GrpcShared::reading, while it is read
    bool reading_failed = false;  // a message was refused: the rest is dropped
    bool paused = false;
    std::string stashed;  // bytes received while paused, not yet consumed
    bool half_closed = false;
    bool half_close_told = false;
    // Writing: framed messages not yet handed to nghttp2, from out_offset.
    std::string out;
    size_t out_offset = 0;
    bool response_started = false;
    bool finishing = false;  // the trailers follow once `out` is sent
    bool finished = false;   // Finish was called
    GrpcCode code = GrpcCode::kOk;
    std::string code_text;
    std::string message;
    GrpcMetadata trailers;
  };

  void HandleEvents(uint32_t events);
  void Flush();
  // The socket, through TLS when the server has it. ReadSome: bytes read, 0 when nothing is
  // there now, -1 when the connection is over. WriteSome: bytes written, 0 when the socket is
  // full, -1 on failure.
  ssize_t ReadSome(uint8_t* buffer, size_t length);
  ssize_t WriteSome(const char* data, size_t length);
  // Advances the TLS handshake; true once it is done (and peer_ holds the client certificate).
  bool Handshake();
  // Hands `length` received bytes to nghttp2; false when the connection is to end.
  bool Take(const uint8_t* data, size_t length);
  void MarkOutput() {
    if (queued_ || session_ == nullptr) return;
    queued_ = true;
    io_.unsent.push_back(shared_from_this());
  }

  // The stream's state, or null. nghttp2's callbacks come in runs for one stream: the last one
  // found is kept (a map's elements stay put until erased).
  Stream* Find(int32_t stream_id) {
    if (stream_id == found_id_ && found_ != nullptr) return found_;
    auto found = streams_.find(stream_id);
    if (found == streams_.end()) return nullptr;
    found_id_ = stream_id;
    found_ = &found->second;
    return found_;
  }
  void StartCall(int32_t stream_id, Stream& stream);
  void Receive(int32_t stream_id, Stream& stream, const uint8_t* data, size_t length);
  void Deliver(Stream& stream, std::string message);
  void HalfClose(Stream& stream);
  void CancelStream(int32_t stream_id);
  void StartResponse(int32_t stream_id, Stream& stream);
  void SubmitTrailers(int32_t stream_id, Stream& stream);
  // A call refused before it reached the service (not gRPC, malformed): trailers-only, with an
  // HTTP status of `http_status`.
  void Refuse(int32_t stream_id, int http_status, GrpcCode code, std::string_view message);

  // nghttp2's callbacks.
  static int OnBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* self);
  static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                      size_t name_length, const uint8_t* value, size_t value_length, uint8_t,
                      void* self);
  static int OnFrameReceived(nghttp2_session*, const nghttp2_frame* frame, void* self);
  static int OnDataChunk(nghttp2_session*, uint8_t, int32_t stream_id, const uint8_t* data,
                         size_t length, void* self);
  static int OnStreamClosed(nghttp2_session*, int32_t stream_id, uint32_t, void* self);
  static ssize_t ReadResponse(nghttp2_session*, int32_t stream_id, uint8_t* buffer, size_t length,
                              uint32_t* flags, nghttp2_data_source*, void* self);

  int fd_;
  GrpcIo& io_;  // on the connection's thread only
  const std::shared_ptr<GrpcShared> shared_;
  const std::shared_ptr<IoGate> gate_;
  std::thread::id thread_;
  nghttp2_session* session_ = nullptr;
  SSL* ssl_ = nullptr;  // TLS; null for cleartext
  bool handshaken_ = false;
  std::shared_ptr<const Peer> peer_;
  std::unordered_map<int32_t, Stream> streams_;
  int32_t found_id_ = 0;     // Find's last answer (0 is never a stream)
  Stream* found_ = nullptr;  // into streams_; null when erased
  std::unique_ptr<uint8_t[]> buffer_ = std::make_unique<uint8_t[]>(kGrpcReadBufferBytes);
  std::string out_;  // bytes for the socket, from out_sent_
  size_t out_sent_ = 0;
  bool writable_ = true;
  bool queued_ = false;  // in io_.unsent
  bool going_away_ = false;
  int finished_since_flush_ = 0;  // calls finished on this thread since the output last went
  bool started_ = false;  // an HTTP/2 frame has come (after the preface and any TLS handshake)
  const SteadyTime opened_ = Clock::Coarse().Now();
  bool closing_ = false;  // close once the output is sent
};

}  // namespace rampart::net
