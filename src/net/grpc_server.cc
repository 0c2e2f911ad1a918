// gRPC over nghttp2 on Rampart's event loops (see grpc_server.h).

#include "net/grpc_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>

#include "core/byte_budget.h"
#include "core/cpu_affinity.h"
#include "core/exceptions.h"
#include "core/logging.h"
#include "core/thread_name.h"
#include "net/accept.h"
#include "net/event_loop.h"
#include "net/grpc_tls.h"
#include "net/grpc_wire.h"
#include "net/http_stream.h"
#include "net/local_port.h"
#include "net/peer_certificate.h"

namespace rampart::net {
namespace {

constexpr size_t kPrefixBytes = kGrpcPrefixBytes;
constexpr size_t kReadBufferBytes = 64 * 1024;
// Received bytes are handed to nghttp2 this many at a time (a few small calls' worth), and the
// answers finished meanwhile go out every kFlushEveryCalls calls (GrpcConnection::Take).
constexpr size_t kRecvSliceBytes = 1024;
constexpr int kFlushEveryCalls = 8;
// Bytes gathered from nghttp2 before they go to the socket in one send.
constexpr size_t kSendChunkBytes = 256 * 1024;
// Flow-control windows: a stream's (what one call may have on the wire unread) and the
// connection's (all of its calls).
constexpr int32_t kStreamWindowBytes = 4 << 20;
constexpr int32_t kConnectionWindowBytes = 16 << 20;
// Metadata one call may carry (names and values); more resets the stream.
constexpr size_t kMaxMetadataBytes = 64 * 1024;
// How often an I/O thread looks for calls past their deadlines.
constexpr std::chrono::milliseconds kDeadlineTick{10};

nghttp2_nv Header(std::string_view name, std::string_view value) {
  return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                    reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(),
                    value.size(), NGHTTP2_NV_FLAG_NONE};
}

// nghttp2 is C: no exception may cross it. One that a callback lets out (running out of memory)
// fails the session instead, which closes the connection.
template <auto Callback>
struct Guarded;
template <typename Result, typename... Args, Result (*Callback)(Args...)>
struct Guarded<Callback> {
  static Result Call(Args... args) noexcept {
    try {
      return Callback(args...);
    } catch (const std::exception& error) {
      LOG_WARN("gRPC: a connection failed: {}", error.what());
    } catch (...) {
      LOG_WARN("gRPC: a connection failed: unexpected exception");
    }
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
};

// The client's address, as the HTTP server writes it.
std::string PeerAddress(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return "";
  return AddressText(reinterpret_cast<const sockaddr*>(&address));
}

}  // namespace

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
    uint8_t prefix[kPrefixBytes] = {};
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
  std::unique_ptr<uint8_t[]> buffer_ = std::make_unique<uint8_t[]>(kReadBufferBytes);
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

std::string_view GrpcCall::Metadata(std::string_view key) const {
  for (const auto& [name, value] : metadata_) {
    if (name == key) return value;
  }
  return {};
}

void GrpcCall::Write(GrpcOutMessage message) {
  if (finished_.load(std::memory_order_relaxed)) return;
  connection_->OnThread(
      [connection = connection_, id = stream_id_, message = std::move(message)]() mutable {
        connection->Write(id, std::move(message));
      });
}

void GrpcCall::Finish(GrpcCode code, std::string message, GrpcMetadata trailers) {
  if (finished_.exchange(true)) return;
  connection_->OnThread([connection = connection_, id = stream_id_, code,
                         message = std::move(message), trailers = std::move(trailers)]() mutable {
    connection->Finish(id, code, std::move(message), std::move(trailers));
  });
}

void GrpcCall::FinishWith(GrpcOutMessage response) {
  if (finished_.exchange(true)) return;
  connection_->OnThread(
      [connection = connection_, id = stream_id_, response = std::move(response)]() mutable {
        connection->Write(id, std::move(response));
        connection->Finish(id, GrpcCode::kOk, {}, {});
      });
}

void GrpcCall::Post(UniqueFunction<void()> task) { connection_->OnThread(std::move(task)); }

bool GrpcCall::OnIoThread() const { return connection_->OnThisThread(); }

void GrpcCall::PauseReading() {
  connection_->OnThread(
      [connection = connection_, id = stream_id_] { connection->SetPaused(id, true); });
}

void GrpcCall::ResumeReading() {
  connection_->OnThread(
      [connection = connection_, id = stream_id_] { connection->SetPaused(id, false); });
}

void GrpcConnection::Open() {
  thread_ = std::this_thread::get_id();
  auto peer = std::make_shared<Peer>();
  peer->address = PeerAddress(fd_);
  peer_ = std::move(peer);
  nghttp2_session_callbacks* callbacks = nullptr;
  nghttp2_session_callbacks_new(&callbacks);
  nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks,
                                                          &Guarded<&OnBeginHeaders>::Call);
  nghttp2_session_callbacks_set_on_header_callback(callbacks, &Guarded<&OnHeader>::Call);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, &Guarded<&OnFrameReceived>::Call);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks,
                                                            &Guarded<&OnDataChunk>::Call);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks,
                                                         &Guarded<&OnStreamClosed>::Call);
  nghttp2_option* option = nullptr;
  nghttp2_option_new(&option);
  // Windows are given back as the service takes the bytes (a paused call holds its own).
  nghttp2_option_set_no_auto_window_update(option, 1);
  const int made = nghttp2_session_server_new2(&session_, callbacks, this, option);
  nghttp2_option_del(option);
  nghttp2_session_callbacks_del(callbacks);
  if (made != 0) {
    session_ = nullptr;
    LOG_WARN("gRPC: cannot start an HTTP/2 session: {}", nghttp2_strerror(made));
    ::close(fd_);
    fd_ = -1;
    return;
  }
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, io_.shared.options.max_concurrent_streams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, kStreamWindowBytes},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, kMaxMetadataBytes},
  };
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
  nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, kConnectionWindowBytes);
  if (shared_->tls != nullptr) {
    ssl_ = SSL_new(shared_->tls.get());
    BIO* bio = ssl_ != nullptr ? SocketBio(fd_) : nullptr;
    if (bio != nullptr) SSL_set_bio(ssl_, bio, bio);  // the SSL owns it from here
    if (ssl_ == nullptr || bio == nullptr) {
      LOG_WARN("gRPC: cannot start TLS: {}", TlsError());
      nghttp2_session_del(session_);
      session_ = nullptr;
      ::close(fd_);
      fd_ = -1;
      return;
    }
    SSL_set_accept_state(ssl_);
  }
  io_.open.emplace(this, shared_from_this());
  if (Status added = io_.loop->Add(fd_, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, this);
      !added.ok()) {
    LOG_WARN("gRPC: {}", added.message());
    Close();
    return;
  }
  if (io_.shared.stopping.load(std::memory_order_relaxed)) GoAway();
  MarkOutput();
}

void GrpcConnection::HandleEvents(uint32_t events) {
  if (session_ == nullptr) return;
  if ((events & EPOLLOUT) != 0) writable_ = true;
  if (ssl_ != nullptr && !handshaken_) {
    if (!Handshake()) return;
    writable_ = true;   // the SETTINGS frame waits for the handshake
    events |= EPOLLIN;  // the client's first frames may have come with its last flight
  }
  // TLS hands its records over one at a time: read until the socket is empty. (TLS may also
  // need to read while writing; every event retries both.)
  if (ssl_ != nullptr || (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) {
    while (session_ != nullptr) {
      const ssize_t got = ReadSome(buffer_.get(), kReadBufferBytes);
      if (got < 0) {  // the client is gone (or reset the connection): its calls with it
        Close();
        return;
      }
      if (got == 0) break;
      if (!Take(buffer_.get(), static_cast<size_t>(got))) break;
      // Cleartext: a short read drained the socket until the next edge.
      if (ssl_ == nullptr && static_cast<size_t>(got) < kReadBufferBytes) break;
    }
  }
  MarkOutput();
}

bool GrpcConnection::Take(const uint8_t* data, size_t length) {
  // In slices, sending the answers finished so far every kFlushEveryCalls calls: the client
  // starts on those while this thread goes on with the rest, rather than the two taking turns
  // (a burst of 64 calls answered all at once leaves the client idle meanwhile). A slice that
  // finished no call doubles the next (large messages go through in few slices).
  size_t offset = 0;
  size_t slice = kRecvSliceBytes;
  while (offset < length && session_ != nullptr) {
    const size_t piece = std::min(length - offset, slice);
    const int finished_before = finished_since_flush_;
    if (nghttp2_session_mem_recv(session_, data + offset, piece) < 0) {
      // A protocol error: nghttp2 queued a GOAWAY saying so; send it, then close.
      closing_ = true;
      return false;
    }
    offset += piece;
    slice = finished_since_flush_ != finished_before ? kRecvSliceBytes : slice * 2;
    if (finished_since_flush_ >= kFlushEveryCalls) Flush();
  }
  return session_ != nullptr;
}

ssize_t GrpcConnection::ReadSome(uint8_t* buffer, size_t length) {
  if (ssl_ == nullptr) {
    while (true) {
      const ssize_t got = ::recv(fd_, buffer, length, 0);
      if (got > 0) return got;
      if (got == 0) return -1;
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    }
  }
  const int got = SSL_read(ssl_, buffer, static_cast<int>(length));
  if (got > 0) return got;
  const int error = SSL_get_error(ssl_, got);
  ERR_clear_error();
  return error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE ? 0 : -1;
}

ssize_t GrpcConnection::WriteSome(const char* data, size_t length) {
  if (ssl_ == nullptr) {
    while (true) {
      const ssize_t sent = ::send(fd_, data, length, MSG_NOSIGNAL);
      if (sent >= 0) return sent;
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    }
  }
  const int sent = SSL_write(ssl_, data, static_cast<int>(std::min<size_t>(length, 1 << 30)));
  if (sent > 0) return sent;
  const int error = SSL_get_error(ssl_, sent);
  ERR_clear_error();
  return error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE ? 0 : -1;
}

bool GrpcConnection::Handshake() {
  const int done = SSL_do_handshake(ssl_);
  if (done != 1) {
    const int error = SSL_get_error(ssl_, done);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) return false;
    LOG_DEBUG("gRPC: TLS handshake with {} failed: {}", peer_->address, TlsError());
    Close();
    return false;
  }
  handshaken_ = true;
  if (X509* certificate = SSL_get1_peer_certificate(ssl_); certificate != nullptr) {
    if (SSL_get_verify_result(ssl_) == X509_V_OK) {
      Result<PeerCertificate> read = PeerCertificateFromX509(certificate);
      if (read.ok()) {
        auto peer = std::make_shared<Peer>(*peer_);
        peer->has_certificate = true;
        peer->certificate = std::move(read).value();
        peer_ = std::move(peer);
      }
    }
    X509_free(certificate);
  }
  return true;
}

void GrpcConnection::Flush() {
  if (session_ == nullptr || (ssl_ != nullptr && !handshaken_)) return;
  finished_since_flush_ = 0;
  while (true) {
    while (out_.size() - out_sent_ < kSendChunkBytes) {
      const uint8_t* data = nullptr;
      const ssize_t produced = nghttp2_session_mem_send(session_, &data);
      if (produced < 0) {
        LOG_WARN("gRPC: HTTP/2 session failed: {}", nghttp2_strerror(static_cast<int>(produced)));
        Close();
        return;
      }
      if (produced == 0) break;
      if (out_sent_ == out_.size()) {
        out_.clear();
        out_sent_ = 0;
      }
      out_.append(reinterpret_cast<const char*>(data), static_cast<size_t>(produced));
    }
    if (out_sent_ == out_.size()) break;
    if (!writable_) return;  // EPOLLOUT sends the rest
    while (out_sent_ < out_.size()) {
      const ssize_t sent = WriteSome(out_.data() + out_sent_, out_.size() - out_sent_);
      if (sent < 0) {
        Close();
        return;
      }
      if (sent == 0) {
        writable_ = false;
        return;
      }
      out_sent_ += static_cast<size_t>(sent);
    }
  }
  if (closing_ || (!nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_))) {
    Close();
  }
}

void GrpcConnection::Close() {
  if (session_ == nullptr) return;
  // Every call still open is over.
  std::vector<int32_t> open;
  open.reserve(streams_.size());
  for (const auto& entry : streams_) open.push_back(entry.first);
  for (int32_t id : open) CancelStream(id);
  nghttp2_session_del(session_);
  session_ = nullptr;
  ::close(fd_);  // also ends its registration
  fd_ = -1;
  auto self = shared_from_this();
  io_.loop->KeepUntilIdle(self);
  io_.open.erase(this);
}

void GrpcConnection::StartCall(int32_t stream_id, Stream& stream) {
  if (!stream.post) {
    Refuse(stream_id, 405, GrpcCode::kUnimplemented, "gRPC calls are POST requests");
    return;
  }
  if (!stream.content_type.starts_with("application/grpc")) {
    Refuse(stream_id, 415, GrpcCode::kUnknown,
           "not a gRPC request: content-type must be application/grpc");
    return;
  }
  if (!stream.encoding.empty() && stream.encoding != "identity" && stream.encoding != "gzip" &&
      stream.encoding != "deflate") {
    Refuse(stream_id, 200, GrpcCode::kUnimplemented,
           fmt::format("grpc-encoding '{}' is not supported (supported: {})", stream.encoding,
                       kAcceptEncoding));
    return;
  }
  stream.call = std::make_shared<GrpcCall>(shared_from_this(), stream_id, stream.method,
                                           std::move(stream.metadata), peer_);
  stream.counted = true;
  io_.shared.CallStarted();
  if (stream.timeout) {
    const SteadyTime due = Clock::Real().Now() + *stream.timeout;
    stream.deadline = io_.deadlines.emplace(due, std::make_pair(weak_from_this(), stream_id));
  }
  std::shared_ptr<GrpcCall> call = stream.call;
  std::unique_ptr<GrpcCallHandler> handler = io_.shared.service(std::move(call));
  // The service may have finished the call at once (and its stream may have closed meanwhile).
  if (Stream* still = Find(stream_id); still != nullptr) still->handler = std::move(handler);
}

void GrpcConnection::Refuse(int32_t stream_id, int http_status, GrpcCode code,
                            std::string_view message) {
  const std::string status = std::to_string(http_status);
  const std::string grpc_status = std::to_string(static_cast<int>(code));
  const std::string encoded = PercentEncodeGrpcMessage(message);
  const nghttp2_nv headers[] = {
      Header(":status", status), Header("content-type", "application/grpc"),
      Header("grpc-status", grpc_status), Header("grpc-message", encoded)};
  if (Stream* stream = Find(stream_id); stream != nullptr) {
    stream->finished = true;
    stream->response_started = true;
    stream->reading_failed = true;
  }
  nghttp2_submit_response(session_, stream_id, headers, std::size(headers), nullptr);
  MarkOutput();
}

void GrpcConnection::Receive(int32_t stream_id, Stream& stream, const uint8_t* data,
                             size_t length) {
  while (length > 0 && !stream.reading_failed) {
    if (stream.prefix_bytes < kPrefixBytes) {
      const size_t take = std::min(length, kPrefixBytes - stream.prefix_bytes);
      std::memcpy(stream.prefix + stream.prefix_bytes, data, take);
      stream.prefix_bytes += take;
      data += take;
      length -= take;
      if (stream.prefix_bytes < kPrefixBytes) return;
      stream.body_bytes = (size_t{stream.prefix[1]} << 24) | (size_t{stream.prefix[2]} << 16) |
                          (size_t{stream.prefix[3]} << 8) | size_t{stream.prefix[4]};
      if ((stream.prefix[0] & 1) != 0 &&
          (stream.encoding.empty() || stream.encoding == "identity")) {
        stream.reading_failed = true;
        stream.call->Finish(GrpcCode::kInternal,
                            "a compressed message without grpc-encoding to read it with");
        return;
      }
      if (stream.body_bytes > io_.shared.options.max_message_bytes) {
        stream.reading_failed = true;
        stream.call->Finish(GrpcCode::kResourceExhausted,
                            fmt::format("received message larger than max ({} vs. {})",
                                        stream.body_bytes, io_.shared.options.max_message_bytes));
        return;
      }
      if (!stream.reserved.Take(io_.shared.reading, stream.body_bytes)) {
        stream.reading_failed = true;
        stream.call->Finish(GrpcCode::kResourceExhausted,
                            fmt::format("the server is reading too many request bytes at once "
                                        "(limit {} bytes; this message: {}); retry later",
                                        io_.shared.reading.limit(), stream.body_bytes));
        return;
      }
      stream.body.clear();
      stream.body.reserve(stream.body_bytes);
    }
    const size_t take = std::min(length, stream.body_bytes - stream.body.size());
    stream.body.append(reinterpret_cast<const char*>(data), take);
    data += take;
    length -= take;
    if (stream.body.size() == stream.body_bytes) {
      stream.prefix_bytes = 0;
      stream.reserved.Release();  // the handler's own budget takes over
      if ((stream.prefix[0] & 1) != 0) {
        Result<std::string> inflated =
            Inflate(stream.encoding, stream.body, io_.shared.options.max_message_bytes);
        if (!inflated.ok()) {
          stream.reading_failed = true;
          stream.call->Finish(inflated.status().code() == StatusCode::kResourceExhausted
                                  ? GrpcCode::kResourceExhausted
                                  : GrpcCode::kInternal,
                              std::string(inflated.status().message()));
          return;
        }
        stream.body = std::move(inflated).value();
      }
      Deliver(stream, std::move(stream.body));
      stream.body = std::string();
      // The handler may have paused the call, or ended it (the stream may be gone).
      Stream* still = Find(stream_id);
      if (still == nullptr) return;
      if (still->paused && length > 0) {
        still->stashed.append(reinterpret_cast<const char*>(data), length);
        return;
      }
    }
  }
}

void GrpcConnection::Deliver(Stream& stream, std::string message) {
  if (stream.handler == nullptr || stream.finished) return;
  stream.handler->OnMessage(std::move(message));
}

void GrpcConnection::HalfClose(Stream& stream) {
  stream.half_closed = true;
  if (stream.paused || !stream.stashed.empty() || stream.half_close_told) return;
  stream.half_close_told = true;
  if (stream.call == nullptr || stream.finished) return;
  if (stream.prefix_bytes != 0 && !stream.reading_failed) {
    stream.call->Finish(GrpcCode::kInternal, "the request ended inside a message");
    return;
  }
  if (stream.handler != nullptr) stream.handler->OnHalfClose();
}

void GrpcConnection::SetPaused(int32_t stream_id, bool paused) {
  Stream* stream = Find(stream_id);
  if (stream == nullptr || session_ == nullptr || stream->paused == paused) return;
  stream->paused = paused;
  if (paused) return;
  // Hands over what came meanwhile (unless paused again), and gives its window back.
  std::string stashed = std::move(stream->stashed);
  stream->stashed.clear();
  Receive(stream_id, *stream, reinterpret_cast<const uint8_t*>(stashed.data()), stashed.size());
  stream = Find(stream_id);
  if (stream == nullptr) return;
  const size_t left = stream->stashed.size();
  nghttp2_session_consume(session_, stream_id, stashed.size() - left);
  if (stream->half_closed && !stream->paused && stream->stashed.empty()) {
    HalfClose(*stream);
  }
  MarkOutput();
}

void GrpcConnection::CancelStream(int32_t stream_id) {
  auto found = streams_.find(stream_id);
  if (found == streams_.end()) return;
  if (found_id_ == stream_id) found_ = nullptr;
  Stream stream = std::move(found->second);
  streams_.erase(found);
  if (stream.deadline) io_.deadlines.erase(*stream.deadline);
  if (stream.call != nullptr && !stream.finished) {
    stream.call->cancelled_.store(true, std::memory_order_relaxed);
    stream.call->cancelled_flag_->store(true, std::memory_order_relaxed);
    stream.call->finished_.store(true, std::memory_order_relaxed);
    io_.shared.cancelled_calls.fetch_add(1, std::memory_order_relaxed);
    if (stream.handler != nullptr) {
      RunLoggingExceptions("cancelling a gRPC call", [&] { stream.handler->OnCancel(); });
    }
  }
  if (stream.counted) io_.shared.CallEnded();
}

void GrpcConnection::Write(int32_t stream_id, GrpcOutMessage message) {
  Stream* stream = Find(stream_id);
  if (stream == nullptr || session_ == nullptr || stream->finishing) return;
  std::string& framed = message.bytes_;
  const uint32_t length = static_cast<uint32_t>(message.size());
  framed[0] = 0;  // not compressed
  framed[1] = static_cast<char>(length >> 24);
  framed[2] = static_cast<char>(length >> 16);
  framed[3] = static_cast<char>(length >> 8);
  framed[4] = static_cast<char>(length);
  if (stream->out_offset == stream->out.size()) {
    stream->out = std::move(framed);  // the usual case: nothing else waits, nothing is copied
    stream->out_offset = 0;
  } else {
    stream->out.append(framed);
  }
  if (!stream->response_started) {
    StartResponse(stream_id, *stream);
  } else {
    nghttp2_session_resume_data(session_, stream_id);
  }
  MarkOutput();
}

void GrpcConnection::Finish(int32_t stream_id, GrpcCode code, std::string message,
                            GrpcMetadata trailers) {
  Stream* stream = Find(stream_id);
  if (stream == nullptr || session_ == nullptr || stream->finishing) return;
  stream->finished = true;
  stream->finishing = true;
  ++finished_since_flush_;
  stream->code = code;
  stream->message = std::move(message);
  stream->trailers = std::move(trailers);
  if (!stream->response_started) {
    if (stream->out.size() == stream->out_offset) {
      // Trailers-only: one HEADERS frame ends the call.
      stream->response_started = true;
      stream->code_text = std::to_string(static_cast<int>(code));
      const std::string encoded = PercentEncodeGrpcMessage(stream->message);
      std::vector<nghttp2_nv> headers = {Header(":status", "200"),
                                         Header("content-type", "application/grpc"),
                                         Header("grpc-status", stream->code_text)};
      if (!encoded.empty()) headers.push_back(Header("grpc-message", encoded));
      for (const auto& [key, value] : stream->trailers) headers.push_back(Header(key, value));
      nghttp2_submit_response(session_, stream_id, headers.data(), headers.size(), nullptr);
    } else {
      StartResponse(stream_id, *stream);
    }
  } else {
    nghttp2_session_resume_data(session_, stream_id);
  }
  // A client still sending is told to stop (its remaining messages are not read).
  if (!stream->half_closed) stream->reading_failed = true;
  MarkOutput();
}

void GrpcConnection::StartResponse(int32_t stream_id, Stream& stream) {
  stream.response_started = true;
  const nghttp2_nv headers[] = {Header(":status", "200"),
                                Header("content-type", "application/grpc"),
                                Header("grpc-accept-encoding", kAcceptEncoding)};
  nghttp2_data_provider provider{};
  provider.read_callback = &Guarded<&ReadResponse>::Call;
  nghttp2_submit_response(session_, stream_id, headers, std::size(headers), &provider);
}

void GrpcConnection::SubmitTrailers(int32_t stream_id, Stream& stream) {
  stream.code_text = std::to_string(static_cast<int>(stream.code));
  stream.message = PercentEncodeGrpcMessage(stream.message);
  std::vector<nghttp2_nv> trailers = {Header("grpc-status", stream.code_text)};
  if (!stream.message.empty()) trailers.push_back(Header("grpc-message", stream.message));
  for (const auto& [key, value] : stream.trailers) trailers.push_back(Header(key, value));
  nghttp2_submit_trailer(session_, stream_id, trailers.data(), trailers.size());
}

ssize_t GrpcConnection::ReadResponse(nghttp2_session*, int32_t stream_id, uint8_t* buffer,
                                     size_t length, uint32_t* flags, nghttp2_data_source*,
                                     void* self) {
  auto& connection = *static_cast<GrpcConnection*>(self);
  Stream* stream = connection.Find(stream_id);
  if (stream == nullptr) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  const size_t available = stream->out.size() - stream->out_offset;
  const size_t take = std::min(length, available);
  std::memcpy(buffer, stream->out.data() + stream->out_offset, take);
  stream->out_offset += take;
  if (stream->out_offset == stream->out.size()) {
    if (stream->finishing) {
      *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
      connection.SubmitTrailers(stream_id, *stream);
    } else if (take == 0) {
      return NGHTTP2_ERR_DEFERRED;
    }
  }
  return static_cast<ssize_t>(take);
}

int GrpcConnection::OnBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* self) {
  auto& connection = *static_cast<GrpcConnection*>(self);
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  connection.streams_.try_emplace(frame->hd.stream_id);
  return 0;
}

int GrpcConnection::OnHeader(nghttp2_session* session, const nghttp2_frame* frame,
                             const uint8_t* name_bytes, size_t name_length,
                             const uint8_t* value_bytes, size_t value_length, uint8_t, void* self) {
  auto& connection = *static_cast<GrpcConnection*>(self);
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  Stream* stream = connection.Find(frame->hd.stream_id);
  if (stream == nullptr || stream->call != nullptr) return 0;  // trailers of a request: ignored
  const std::string_view name(reinterpret_cast<const char*>(name_bytes), name_length);
  const std::string_view value(reinterpret_cast<const char*>(value_bytes), value_length);
  stream->metadata_bytes += name_length + value_length;
  if (stream->metadata_bytes > kMaxMetadataBytes) {
    nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                              NGHTTP2_ENHANCE_YOUR_CALM);
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  if (name.starts_with(':')) {
    if (name == ":path") stream->method = value;
    if (name == ":method") stream->post = value == "POST";
    return 0;
  }
  if (name == "content-type") {
    stream->content_type = value;
  } else if (name == "grpc-timeout") {
    stream->timeout = ParseGrpcTimeout(value);
  } else if (name == "grpc-encoding") {
    stream->encoding = value;
  } else if (name != "te" && name != "grpc-accept-encoding") {
    stream->metadata.emplace_back(name, value);
  }
  return 0;
}

int GrpcConnection::OnFrameReceived(nghttp2_session*, const nghttp2_frame* frame, void* self) {
  auto& connection = *static_cast<GrpcConnection*>(self);
  connection.started_ = true;
  const int32_t id = frame->hd.stream_id;
  Stream* stream = connection.Find(id);
  if (stream == nullptr) return 0;
  if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
    connection.StartCall(id, *stream);
    stream = connection.Find(id);
    if (stream == nullptr) return 0;
  }
  if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
      (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) {
    connection.HalfClose(*stream);
  }
  return 0;
}

int GrpcConnection::OnDataChunk(nghttp2_session* session, uint8_t, int32_t stream_id,
                                const uint8_t* data, size_t length, void* self) {
  auto& connection = *static_cast<GrpcConnection*>(self);
  Stream* stream = connection.Find(stream_id);
  if (stream == nullptr || stream->call == nullptr || stream->reading_failed) {
    nghttp2_session_consume(session, stream_id, length);
    return 0;
  }
  if (stream->paused) {
    stream->stashed.append(reinterpret_cast<const char*>(data), length);
    return 0;
  }
  connection.Receive(stream_id, *stream, data, length);
  stream = connection.Find(stream_id);
  const size_t held = stream != nullptr ? stream->stashed.size() : 0;
  nghttp2_session_consume(session, stream_id, length - std::min(length, held));
  return 0;
}

int GrpcConnection::OnStreamClosed(nghttp2_session*, int32_t stream_id, uint32_t, void* self) {
  auto& connection = *static_cast<GrpcConnection*>(self);
  connection.CancelStream(stream_id);  // a finished call is merely forgotten
  return 0;
}

void GrpcIo::SendAll() {
  for (size_t i = 0; i < unsent.size(); ++i) {
    std::shared_ptr<GrpcConnection> connection = std::move(unsent[i]);
    connection->Send();
  }
  unsent.clear();
}

void GrpcIo::CheckStarted() {
  const SteadyTime now = Clock::Coarse().Now();
  // A copy: a connection that closes leaves `open`.
  std::vector<std::shared_ptr<GrpcConnection>> connections;
  connections.reserve(open.size());
  for (const auto& entry : open) connections.push_back(entry.second);
  for (const auto& connection : connections) connection->CheckStarted(now);
}

void GrpcIo::ExpireDeadlines() {
  if (deadlines.empty()) return;
  const SteadyTime now = Clock::Real().Now();
  while (!deadlines.empty() && deadlines.begin()->first <= now) {
    // Expire takes the entry out (the call ends); an entry of a connection already gone is
    // taken out here.
    const auto [connection, stream_id] = deadlines.begin()->second;
    if (auto alive = connection.lock(); alive != nullptr && alive->Expire(stream_id)) continue;
    deadlines.erase(deadlines.begin());
  }
}

struct GrpcServer::Impl final : public EventLoop::Watcher {
  Impl(const GrpcServerOptions& options, GrpcService service, std::shared_ptr<SSL_CTX> tls)
      : shared_owned(std::make_shared<GrpcShared>(options, std::move(service), std::move(tls))),
        shared(*shared_owned) {}
  ~Impl() override {
    if (listener >= 0) ::close(listener);
  }

  // Edge-triggered: accepts until none is left; connections go to the loops in turn.
  void OnEvents(uint32_t) override {
    while (listener >= 0) {
      const int fd = AcceptNext(listener, stalled, shared.options.name);
      if (fd < 0) return;
      const size_t limit = shared.options.max_connections;
      if (limit > 0 && shared.open_connections.load(std::memory_order_relaxed) >= limit) {
        shared.refused_connections.fetch_add(1, std::memory_order_relaxed);
        ::close(fd);
        continue;
      }
      const int on = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
      GrpcIo& target = *io[next_io];
      next_io = (next_io + 1) % io.size();
      auto connection = std::make_shared<GrpcConnection>(fd, target, shared_owned);
      target.loop->Dispatch([connection = std::move(connection)] { connection->Open(); });
    }
  }

  // Runs `task(io)` on every I/O thread and waits for all.
  template <typename Task>
  void OnEveryThread(Task task) {
    std::vector<std::future<void>> done;
    for (auto& each : io) {
      auto ran = std::make_shared<std::promise<void>>();
      done.push_back(ran->get_future());
      each->loop->Post([&each = *each, ran, &task] {
        RunLoggingExceptions("a gRPC I/O task", [&] { task(each); });
        ran->set_value();
      });
    }
    for (auto& each : done) each.wait();
  }

  const std::shared_ptr<GrpcShared> shared_owned;  // also held by every connection
  GrpcShared& shared;
  std::vector<std::unique_ptr<GrpcIo>> io;
  std::vector<std::thread> threads;
  int listener = -1;
  size_t next_io = 0;
  bool stalled = false;
  bool accepting = true;
  bool shut_down = false;
};

Result<std::unique_ptr<GrpcServer>> GrpcServer::Start(const GrpcServerOptions& options,
                                                      GrpcService service, Listener listener) {
  std::shared_ptr<SSL_CTX> tls;
  if (options.tls) {
    ASSIGN_OR_RETURN(tls, MakeGrpcTlsContext(*options.tls));
  }
  auto impl = std::make_unique<Impl>(options, std::move(service), std::move(tls));
  const size_t threads = options.threads > 0 ? static_cast<size_t>(options.threads)
                                             : static_cast<size_t>(UsableCpuCount());
  for (size_t i = 0; i < threads; ++i) {
    auto io = std::make_unique<GrpcIo>(impl->shared);
    ASSIGN_OR_RETURN(io->loop, EventLoop::Create());
    EventLoop* loop = io->loop.get();
    io->gate = std::make_shared<IoGate>(
        [loop](UniqueFunction<void()> task) { loop->Post(std::move(task)); });
    GrpcIo* raw = io.get();
    loop->AtBatchEnd([raw] { raw->SendAll(); });
    loop->Every(kDeadlineTick, [raw] { raw->ExpireDeadlines(); });
    loop->Every(std::chrono::seconds(1), [raw] { raw->CheckStarted(); });
    impl->io.push_back(std::move(io));
  }
  if (!listener.open()) return InvalidArgument("{}: no listening socket", options.name);
  impl->listener = listener.Release();
  const uint16_t port = LocalPort(impl->listener);
  RETURN_IF_ERROR(impl->io[0]->loop->Add(impl->listener, EPOLLIN | EPOLLET, impl.get()));
  Impl* raw = impl.get();
  impl->io[0]->loop->Every(std::chrono::seconds(1), [raw] {
    if (raw->stalled) raw->OnEvents(EPOLLIN);
  });
  for (size_t i = 0; i < threads; ++i) {
    impl->threads.emplace_back([raw, i, name = fmt::format("{}-io-{}", options.name, i)] {
      NameThisThread(name);
      if (Status pinned = PinThisThread(raw->shared.options.cpus); !pinned.ok()) {
        LOG_WARN("{}: {}", name, pinned.message());
      }
      if (raw->shared.options.sched_batch) {
        if (Status batch = UseBatchScheduling(); !batch.ok()) {
          LOG_WARN("{}: {}", name, batch.message());
        }
      }
      raw->io[i]->loop->Run();
    });
  }
  return std::unique_ptr<GrpcServer>(new GrpcServer(std::move(impl), port));
}

GrpcServer::GrpcServer(std::unique_ptr<Impl> impl, uint16_t port)
    : impl_(std::move(impl)), port_(port) {}

GrpcServer::~GrpcServer() { Shutdown(std::chrono::milliseconds(0)); }

GrpcServer::Stats GrpcServer::stats() const {
  const GrpcShared& shared = impl_->shared;
  return Stats{.calls = shared.calls.load(std::memory_order_relaxed),
               .cancelled_calls = shared.cancelled_calls.load(std::memory_order_relaxed),
               .open_connections = shared.open_connections.load(std::memory_order_relaxed),
               .refused_connections = shared.refused_connections.load(std::memory_order_relaxed)};
}

void GrpcServer::StopAccepting() {
  if (!impl_->accepting) return;
  impl_->accepting = false;
  impl_->shared.stopping.store(true);
  Impl* impl = impl_.get();
  impl_->OnEveryThread([impl](GrpcIo& io) {
    if (&io == impl->io[0].get() && impl->listener >= 0) {
      ::close(impl->listener);  // also ends its registration
      impl->listener = -1;
    }
    std::vector<std::shared_ptr<GrpcConnection>> open;
    for (const auto& entry : io.open) open.push_back(entry.second);
    for (const auto& connection : open) connection->GoAway();
  });
}

void GrpcServer::Shutdown(std::chrono::milliseconds timeout) {
  if (impl_->shut_down) return;
  StopAccepting();
  impl_->shut_down = true;
  impl_->shared.WaitIdle(timeout);
  // Calls still open are cancelled, their connections closed.
  impl_->OnEveryThread([](GrpcIo& io) {
    std::vector<std::shared_ptr<GrpcConnection>> open;
    for (const auto& entry : io.open) open.push_back(entry.second);
    for (const auto& connection : open) connection->Close();
  });
  for (auto& io : impl_->io) io->loop->Stop();
  for (std::thread& thread : impl_->threads) thread.join();
  for (auto& io : impl_->io) {
    io->gate->Close();
    io->unsent.clear();
    io->deadlines.clear();
    io->open.clear();
  }
}

}  // namespace rampart::net
