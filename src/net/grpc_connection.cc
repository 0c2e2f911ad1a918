// The native gRPC transport's connections: HTTP/2 through nghttp2, calls and their messages,
// deadlines (see grpc_connection.h).

#include "net/grpc_connection.h"

#include <netinet/in.h>
#include <openssl/err.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "net/accept.h"
#include "net/grpc_tls.h"
#include "net/peer_certificate.h"

namespace rampart::net {
namespace {

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
      const ssize_t got = ReadSome(buffer_.get(), kGrpcReadBufferBytes);
      if (got < 0) {  // the client is gone (or reset the connection): its calls with it
        Close();
        return;
      }
      if (got == 0) break;
      if (!Take(buffer_.get(), static_cast<size_t>(got))) break;
      // Cleartext: a short read drained the socket until the next edge.
      if (ssl_ == nullptr && static_cast<size_t>(got) < kGrpcReadBufferBytes) break;
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
    if (stream.prefix_bytes < kGrpcPrefixBytes) {
      const size_t take = std::min(length, kGrpcPrefixBytes - stream.prefix_bytes);
      std::memcpy(stream.prefix + stream.prefix_bytes, data, take);
      stream.prefix_bytes += take;
      data += take;
      length -= take;
      if (stream.prefix_bytes < kGrpcPrefixBytes) return;
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

}  // namespace rampart::net
