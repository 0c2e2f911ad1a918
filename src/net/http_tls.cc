// HTTPS connections (see http_tls.h).

#include "net/http_tls.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <memory>
#include <optional>
#include <string>
#include <utility>  // before Boost.Asio 1.74, whose awaitable.hpp needs std::exchange
#include <vector>

#include <boost/beast/http.hpp>

#include "core/exceptions.h"
#include "core/logging.h"
#include "net/peer_certificate.h"

namespace rampart::net {

namespace http = beast::http;

// One HTTPS connection, kept alive by its pending operation's shared_ptr (and a Responder's).
//
// Timeouts (the TLS handshake, waiting for a request, reading it, the client taking its answer,
// the TLS goodbye) are one deadline per connection, which its I/O thread's sweep checks every
// second (IoThread): a keep-alive request costs no timer operation (a per-operation timer, as
// beast::tcp_stream arms, cost a timer queue update per request).
//
// A streamed answer is written as its producer writes it: what it wrote meanwhile goes in one
// write (one copy, so that small chunks share TLS records), the next once that one is done; the
// client must take each within the idle timeout. Meanwhile a read watches for the client's
// hang-up (or close_notify), which ends the stream; bytes it reads (a pipelined request) are kept
// for after the stream.
class TlsConnection final : public Connection {
 public:
  TlsConnection(Socket socket, ssl::context& tls, HttpCore& core, TlsIo& io, ConnectionSlot slot)
      : stream_(std::move(socket), tls),
        core_(core),
        watches_(io.watches),
        gate_(io.gate),
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
      self->MakePeer();
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

  std::shared_ptr<HttpStream> StartStream(std::shared_ptr<Connection> self,
                                          HttpResponseHead head) override {
    auto stream = std::make_shared<HttpStream>(gate_, self, head.max_queued_bytes);
    asio::dispatch(stream_.get_executor(), [self = std::move(self), this, head = std::move(head),
                                            start = PendingStream(stream)]() mutable {
      std::shared_ptr<HttpStream> started = start.Take();
      if (RunLoggingExceptions("starting a streamed answer",
                               [&] { BeginStream(std::move(head), started); })) {
        return;
      }
      started->End(/*finished=*/false);
      LoseStream();
      CloseSocket();
    });
    return stream;
  }

  void PumpStream() override {
    if (stream_phase_ != StreamPhase::kStreaming) return;  // not begun yet (it pumps then)
    if (!RunLoggingExceptions("writing a streamed answer", [&] {
          TakeStreamInput();
          WriteStream();
        })) {
      LoseStream();
    }
  }

  // Ends a stream still open when the engine goes (TlsIo's destructor).
  void DetachStream() {
    if (std::shared_ptr<HttpStream> stream = std::move(http_stream_)) stream->End(false);
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

  // Records who the client is, once per connection (after the handshake): its address and, when
  // it presented a certificate that the handshake verified (mutual TLS), the certificate.
  void MakePeer() {
    auto peer = std::make_shared<Peer>();
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    if (::getpeername(Lowest().native_handle(), reinterpret_cast<sockaddr*>(&address), &length) ==
        0) {
      peer->address = AddressText(reinterpret_cast<const sockaddr*>(&address));
    }
    SSL* ssl = stream_.native_handle();
    if (X509* certificate = SSL_get0_peer_certificate(ssl);
        certificate != nullptr && SSL_get_verify_result(ssl) == X509_V_OK) {
      Result<PeerCertificate> read = PeerCertificateFromX509(certificate);
      if (read.ok()) {
        peer->has_certificate = true;
        peer->certificate = std::move(*read);
      } else {
        LOG_DEBUG("cannot read a client certificate: {}", read.status().message());
      }
    }
    peer_ = std::move(peer);
  }

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
    request_.peer = peer_;
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

  enum class StreamPhase {
    kNone,       // no stream
    kStreaming,  // writing one
    kEnding,     // written to its end; waiting for the hang-up watch's read to stop
  };

  void BeginStream(HttpResponseHead head, std::shared_ptr<HttpStream> stream);
  void TakeStreamInput();
  void WriteStream();
  void WatchStream();
  void OnStreamRead(beast::error_code error, size_t read);
  void StreamWritten();
  void AfterStream();
  // Ends the stream unwritten (the client gone, a failure, the producer's Abort): the producer is
  // told, and the connection closes without close_notify, so the client sees a broken answer.
  void LoseStream();

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
  std::shared_ptr<IoGate> gate_;
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
  std::shared_ptr<const Peer> peer_;                // made after the handshake (MakePeer)
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool close_after_write_ = false;
  bool head_only_ = false;  // the current request is HEAD: its answer goes without the body
  bool counted_ = false;    // the current request was dispatched and counts as in flight
  bool responded_ = false;  // Write() has been called for the current request
  bool watching_ = false;   // a hang-up watch is pending

  // A streamed answer: what its producer writes (null once ended), framed on its way out.
  std::shared_ptr<HttpStream> http_stream_;
  HttpStream::Input stream_input_;
  StreamOutput stream_output_;
  std::string stream_write_;  // the bytes being written
  StreamPhase stream_phase_ = StreamPhase::kNone;
  bool chunked_ = false;           // HTTP/1.1 framing; else the body ends with the connection
  bool stream_finishing_ = false;  // the end is queued in stream_output_
  bool stream_writing_ = false;    // a write is pending
  bool stream_reading_ = false;    // the hang-up watch's read is pending
};

void TlsConnection::BeginStream(HttpResponseHead head, std::shared_ptr<HttpStream> stream) {
  responded_ = true;
  if (watching_) {
    beast::error_code ignored;
    Lowest().cancel(ignored);  // only the hang-up watch is pending now
  }
  stream_phase_ = StreamPhase::kStreaming;
  http_stream_ = std::move(stream);
  if (client_gone_ && client_gone_->load()) {  // the client hung up while it was worked on
    LoseStream();
    return;
  }
  chunked_ = stream_output_.Begin(head, version_, keep_alive_);
  stream_finishing_ = false;
  if (head_only_) {  // the head is the whole answer: the producer is told to stop
    http_stream_->End(/*finished=*/false);
    http_stream_.reset();
    stream_finishing_ = true;
  } else {
    WatchStream();
  }
  PumpStream();
}

void TlsConnection::TakeStreamInput() {
  if (!http_stream_) return;
  if (!stream_output_.TakeFrom(*http_stream_, stream_input_, chunked_, stream_finishing_)) {
    LoseStream();
  }
}

void TlsConnection::WriteStream() {
  // A TLS record carries 16 KiB; a few per write keep the idle deadline per write meaningful.
  static constexpr size_t kWriteBytes = 64 * 1024;
  if (stream_phase_ != StreamPhase::kStreaming || stream_writing_) return;
  if (stream_output_.empty()) {
    deadline_.reset();  // waits for its producer, however long that takes
    if (stream_finishing_) StreamWritten();
    return;
  }
  stream_write_.clear();
  stream_output_.Copy(stream_write_, kWriteBytes);
  stream_writing_ = true;
  SetDeadline(core_.options().idle_timeout);
  asio::async_write(stream_, asio::buffer(stream_write_),
                    [self = Self()](beast::error_code error, size_t written) {
                      self->stream_writing_ = false;
                      if (error) {
                        self->LoseStream();
                        return;
                      }
                      const uint64_t chunk_bytes = self->stream_output_.Consume(written);
                      if (chunk_bytes > 0 && self->http_stream_) {
                        self->http_stream_->Sent(chunk_bytes);
                      }
                      self->PumpStream();
                    });
}

void TlsConnection::WatchStream() {
  stream_reading_ = true;
  stream_.async_read_some(
      buffer_.prepare(kReadBufferBytes),
      [self = Self()](beast::error_code error, size_t read) { self->OnStreamRead(error, read); });
}

void TlsConnection::OnStreamRead(beast::error_code error, size_t read) {
  stream_reading_ = false;
  if (!error) {
    buffer_.commit(read);  // a pipelined request, read once the stream is over
    if (stream_phase_ == StreamPhase::kEnding) AfterStream();
    return;
  }
  if (stream_phase_ == StreamPhase::kEnding) {
    if (error == asio::error::operation_aborted) {
      AfterStream();  // cancelled by StreamWritten
    } else {
      CloseSocket();
    }
    return;
  }
  LoseStream();  // the client ended the connection (or it failed)
}

void TlsConnection::StreamWritten() {
  stream_phase_ = StreamPhase::kEnding;
  if (std::shared_ptr<HttpStream> stream = std::move(http_stream_)) stream->End(/*finished=*/true);
  if (counted_) {
    counted_ = false;
    core_.Finished(received_);
  }
  if (stream_reading_) {
    beast::error_code ignored;
    Lowest().cancel(ignored);  // AfterStream once the read has stopped
    return;
  }
  AfterStream();
}

void TlsConnection::AfterStream() {
  stream_phase_ = StreamPhase::kNone;
  if (!keep_alive_) {
    Close();  // with close_notify: the clean end of a body that ends with the connection
    return;
  }
  ReadNext();
}

void TlsConnection::LoseStream() {
  if (stream_phase_ != StreamPhase::kStreaming) return;
  stream_phase_ = StreamPhase::kNone;
  if (client_gone_) client_gone_->store(true);
  if (counted_) {
    counted_ = false;
    core_.Abandoned();
  }
  CloseSocket();
  // Last: the producer's OnClosed callback runs here, and may call its writer.
  if (std::shared_ptr<HttpStream> stream = std::move(http_stream_)) stream->End(/*finished=*/false);
}

void HangUpWatches::Tick() {
  for (Entry& entry : old_) {
    if (auto connection = entry.connection.lock()) connection->WatchForHangUp(entry.request);
  }
  old_.clear();
  old_.swap(young_);
  if (!old_.empty()) Arm();
}

TlsIo::TlsIo(HttpCore& http)
    : core(http),
      sweep_timer(context.get_executor()),
      gate(std::make_shared<IoGate>(
          [this](UniqueFunction<void()> task) { asio::post(context, std::move(task)); })) {}

TlsIo::~TlsIo() {
  gate->Close();
  for (const std::weak_ptr<TlsConnection>& each : open) {
    if (std::shared_ptr<TlsConnection> connection = each.lock()) connection->DetachStream();
  }
}

void TlsIo::CheckDeadlines() {
  const SteadyTime now = core.Now();
  std::erase_if(open, [now](const std::weak_ptr<TlsConnection>& each) {
    std::shared_ptr<TlsConnection> connection = each.lock();
    if (!connection) return true;
    connection->CheckDeadline(now);
    return false;
  });
}

void TlsIo::ArmSweep() {
  sweep_timer.expires_after(kSweepPeriod);
  sweep_timer.async_wait([this](beast::error_code error) {
    if (error) return;
    CheckDeadlines();
    ArmSweep();
  });
}

void ServeTls(Socket socket, ssl::context& tls, HttpCore& core, TlsIo& io, ConnectionSlot slot) {
  auto connection =
      std::make_shared<TlsConnection>(std::move(socket), tls, core, io, std::move(slot));
  // Start on the connection's own thread.
  asio::post(io.context, [connection, &io] {
    io.open.push_back(connection);
    connection->Start();
  });
}

}  // namespace rampart::net
