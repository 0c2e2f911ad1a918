// Plain-HTTP connections: reading requests and writing answers (see http_plain.h).

#include "net/http_plain.h"

#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>

#include "core/clock.h"
#include "core/exceptions.h"
#include "core/logging.h"
#include "net/peer_certificate.h"

namespace rampart::net {

namespace http = boost::beast::http;

namespace {

// BodyReader over a plain connection: each Next runs on the connection's thread.
class PlainBodyReader final : public BodyReader {
 public:
  explicit PlainBodyReader(std::shared_ptr<PlainConnection> connection)
      : connection_(std::move(connection)) {}
  void Next(Callback callback) override {
    connection_->PostBodyNext(connection_, std::move(callback));
  }

 private:
  std::shared_ptr<PlainConnection> connection_;
};

}  // namespace

void PlainConnection::HandleEvents(uint32_t events) {
  if (state_ == State::kClosed) return;  // an event collected before Close
  if (events & (EPOLLHUP | EPOLLERR | EPOLLRDHUP)) {
    peer_closed_ = true;
    if (state_ == State::kWorking && client_gone_) client_gone_->store(true);
    // A client that hangs up mid-stream is gone: its producer is told. (One that had ended its
    // side before the stream began may still be reading: a failed write tells then.)
    if (state_ == State::kStreaming &&
        ((events & (EPOLLHUP | EPOLLERR)) != 0 || !stream_half_closed_)) {
      Close();
      return;
    }
  }
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) readable_ = true;
  if ((events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) && state_ == State::kWriting) {
    Send();
  } else if ((events & EPOLLOUT) && state_ == State::kStreaming) {
    SendStream();
  } else if (state_ == State::kReading && readable_) {
    Serve();
  } else if (state_ == State::kLingering && readable_) {
    Discard();
  } else if (state_ == State::kWorking && body_wanted_ && readable_) {
    PumpBody();
  }
}

void PlainConnection::Open() {
  std::shared_ptr<PlainConnection> self =
      std::static_pointer_cast<PlainConnection>(shared_from_this());
  buffer_ = std::make_unique<char[]>(kReadBufferBytes);
  capacity_ = kReadBufferBytes;
  if (Status added = io_.loop->Add(fd_, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, this);
      !added.ok()) {
    LOG_WARN("cannot serve a new connection: {}", added.message());
    return;  // closed with the last reference
  }
  io_.open.emplace(this, std::move(self));
  auto peer = std::make_shared<Peer>();
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    peer->address = AddressText(reinterpret_cast<const sockaddr*>(&address));
  }
  peer_ = std::move(peer);
  StartRequest();
  Serve();
}

void PlainConnection::StartRequest() {
  state_ = State::kReading;
  continued_ = false;
  request_ = HttpRequest();
  body_streaming_ = false;
  body_ended_ = false;
  body_piece_.clear();
  body_error_.reset();
  parser_.emplace(request_, core_.options().max_body_bytes, core_, &body_piece_);
  request_deadline_.Reset();
  // A new connection's first byte is due as a request's head is: one that sends nothing holds
  // no connection (nor a place under max_connections) for long.
  deadline_ = core_.Now() + (dispatched_any_ ? core_.options().idle_timeout
                                             : std::min(core_.options().idle_timeout,
                                                        core_.options().header_timeout));
}

void PlainConnection::AdvanceRequestDeadline() {
  const SteadyTime now = core_.Now();
  if (!request_deadline_.started()) request_deadline_.HeadStarted(now);
  if (parser_->is_header_done()) {
    if (!request_deadline_.reading_body()) request_deadline_.BodyStarted(now);
    request_deadline_.BodyReceived(request_.body.size());
  }
  deadline_ = request_deadline_.due();
}

void PlainConnection::Serve() {
  while (state_ == State::kReading) {
    if (end_ > begin_) {
      boost::beast::error_code error;
      begin_ +=
          parser_->put(boost::asio::const_buffer(buffer_.get() + begin_, end_ - begin_), error);
      if (error && error != http::error::need_more) {
        if (auto answer = ParseErrorResponse(error, core_)) {
          RejectAndClose(std::move(*answer));
        } else {
          Close();
        }
        return;
      }
      if (parser_->is_done()) {
        Dispatch();
        return;  // reading resumes once the answer is sent (Send)
      }
      AdvanceRequestDeadline();
      // Clients that send `Expect: 100-continue` (curl does for bodies over 1 MiB) wait for an
      // interim answer before sending the body; oversized bodies were refused above.
      if (parser_->is_header_done() && parser_->expects_continue() && !continued_) {
        continued_ = true;
        constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
        if (::send(fd_, kContinue.data(), kContinue.size(), MSG_NOSIGNAL) !=
            static_cast<ssize_t>(kContinue.size())) {
          Close();
          return;
        }
      }
      // A streamed body is handed over from its head on (the consumer reads it: BodyNext).
      if (parser_->streamed()) {
        Dispatch();
        return;
      }
    }
    if (!readable_ || !Read()) return;
  }
}

bool PlainConnection::Read() {
  if (begin_ == end_) {
    begin_ = end_ = 0;
  } else if (begin_ > 0) {
    std::memmove(buffer_.get(), buffer_.get() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (end_ == capacity_) {
    // Only a header larger than the buffer fills it (bodies are consumed as they arrive), and
    // the parser refuses headers over kHeaderLimit first.
    if (capacity_ >= 2 * RequestParser::kHeaderLimit) {
      Close();
      return false;
    }
    auto larger = std::make_unique<char[]>(2 * capacity_);
    std::memcpy(larger.get(), buffer_.get(), end_);
    buffer_ = std::move(larger);
    capacity_ *= 2;
  }
  const size_t room = capacity_ - end_;
  const ssize_t received = ::recv(fd_, buffer_.get() + end_, room, 0);
  if (received > 0) {
    end_ += static_cast<size_t>(received);
    // A short read drained the socket until the next edge, unless the client has ended its
    // side: that edge came with this data, so read on to the end of the stream.
    if (static_cast<size_t>(received) < room && !peer_closed_) readable_ = false;
    return true;
  }
  if (received < 0 && errno == EINTR) return true;
  if (received < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    readable_ = false;
    return false;
  }
  Close();  // the client ended the connection, or it failed
  return false;
}

void PlainConnection::Dispatch() {
  keep_alive_ = parser_->keep_alive();
  version_ = parser_->version();
  head_only_ = request_.method == "HEAD";
  if (parser_->streamed()) {
    // The parser stays to read the body, into body_piece_ (not request_, handed over now).
    body_streaming_ = true;
    body_ended_ = parser_->is_done();
    if (parser_->over_limit()) {
      body_error_ = PayloadTooLarge("the request body is over this route's size limit");
    }
    request_.body_reader = std::make_shared<PlainBodyReader>(
        std::static_pointer_cast<PlainConnection>(shared_from_this()));
  } else {
    parser_.reset();  // it writes into request_, which is handed over now
  }
  deadline_.reset();
  request_.received = Clock::Real().Now();
  received_ = request_.received;
  // The previous request's flag is reused when nothing else holds it any more.
  if (!client_gone_ || client_gone_.use_count() != 1) {
    client_gone_ = std::make_shared<std::atomic<bool>>();
  }
  // A client that ended its side before this request was dispatched may still be reading (a
  // half-close); only a hang-up while the request is being worked on marks it gone.
  client_gone_->store(false, std::memory_order_relaxed);
  request_.client_gone = client_gone_;
  request_.peer = peer_;
  counted_ = true;
  dispatched_any_ = true;
  state_ = State::kWorking;
  core_.Dispatch(std::move(request_), Responder(shared_from_this()));
}

void PlainConnection::Write(HttpResponse response) {
  EndBodyStreaming();
  if (state_ != State::kWorking) {  // closed while the answer was being worked on
    if (counted_) {
      counted_ = false;
      core_.Abandoned();
    }
    return;
  }
  head_.clear();
  FormatHead(response, version_, keep_alive_ && !close_after_write_, head_);
  // A HEAD answer is the GET answer's head (its Content-Length included) and nothing after it.
  body_ = head_only_ ? std::string() : std::move(response.body);
  sent_ = 0;
  state_ = State::kWriting;
  io_.unsent.push_back(std::static_pointer_cast<PlainConnection>(shared_from_this()));
}

void PlainConnection::Send() {
  const size_t total = head_.size() + body_.size();
  while (sent_ < total) {
    std::array<iovec, 2> parts{};
    size_t count = 0;
    if (sent_ < head_.size()) {
      parts[count++] = {head_.data() + sent_, head_.size() - sent_};
      parts[count++] = {body_.data(), body_.size()};
    } else {
      parts[count++] = {body_.data() + (sent_ - head_.size()), total - sent_};
    }
    msghdr message{};
    message.msg_iov = parts.data();
    message.msg_iovlen = count;
    const ssize_t written = ::sendmsg(fd_, &message, MSG_NOSIGNAL);
    if (written >= 0) {
      sent_ += static_cast<size_t>(written);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      // The client must take its answer within the idle timeout; EPOLLOUT resumes the write.
      deadline_ = core_.Now() + core_.options().idle_timeout;
      return;
    } else if (errno != EINTR) {
      Close();
      return;
    }
  }
  deadline_.reset();
  if (counted_) {
    counted_ = false;
    core_.Finished(received_);
  }
  Written();
  Serve();
}

void PlainConnection::Written() {
  if (close_after_write_) {
    Linger();
    return;
  }
  if (!keep_alive_) {
    Close();
    return;
  }
  StartRequest();
}

void PlainConnection::Linger() {
  state_ = State::kLingering;
  ::shutdown(fd_, SHUT_WR);  // the answer is whole: the client sees its end
  deadline_ = core_.Now() + std::min<std::chrono::steady_clock::duration>(
                                kLingerTime, core_.options().idle_timeout);
  Discard();
}

void PlainConnection::Discard() {
  while (true) {
    const ssize_t received = ::recv(fd_, buffer_.get(), capacity_, 0);
    if (received > 0) {
      discarded_ += static_cast<uint64_t>(received);
      if (discarded_ > kLingerBytes) break;
      continue;
    }
    if (received < 0 && errno == EINTR) continue;
    if (received < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      readable_ = false;
      return;  // more to come, or the deadline
    }
    break;  // the client ended its side (or the connection failed)
  }
  Close();
}

void PlainConnection::RejectAndClose(HttpResponse answer) {
  close_after_write_ = true;
  head_only_ = false;  // no request was read
  parser_.reset();
  deadline_.reset();  // the reading deadline must not close it before the answer goes
  state_ = State::kWorking;
  Write(std::move(answer));
}

void PlainConnection::Close() {
  if (state_ == State::kClosed) return;
  if (counted_ && state_ == State::kWriting) {  // the answer will not be written
    counted_ = false;
    core_.Abandoned();
  }
  const bool streaming = state_ == State::kStreaming;
  if (counted_ && streaming) {  // the stream will not be written to its end
    counted_ = false;
    core_.Abandoned();
  }
  if (client_gone_ && (state_ == State::kWorking || streaming)) client_gone_->store(true);
  state_ = State::kClosed;
  if (body_streaming_ && !body_ended_) {
    FailBody(Unavailable("the client went away (or sent too slowly) before its body ended"));
  }
  deadline_.reset();
  ::close(fd_);  // also ends the epoll registration
  fd_ = -1;
  if (auto found = io_.open.find(this); found != io_.open.end()) {
    io_.loop->KeepUntilIdle(std::move(found->second));  // events of this batch may name it
    io_.open.erase(found);
  }
  // Last: the producer's OnClosed callback runs here, and may call its writer.
  if (std::shared_ptr<HttpStream> stream = std::move(stream_)) stream->End(/*finished=*/false);
}

std::shared_ptr<HttpStream> PlainConnection::StartStream(std::shared_ptr<Connection> self,
                                                         HttpResponseHead head) {
  auto stream = std::make_shared<HttpStream>(io_.gate, self, head.max_queued_bytes);
  io_.loop->Dispatch([self = std::move(self), this, head = std::move(head),
                      start = PendingStream(stream)]() mutable {
    std::shared_ptr<HttpStream> started = start.Take();
    if (RunLoggingExceptions("starting a streamed answer",
                             [&] { BeginStream(std::move(head), started); })) {
      return;
    }
    if (counted_) {
      counted_ = false;
      core_.Abandoned();
    }
    started->End(/*finished=*/false);
    Close();
  });
  return stream;
}

void PlainConnection::BeginStream(HttpResponseHead head, std::shared_ptr<HttpStream> stream) {
  EndBodyStreaming();
  // Closed while the answer was being worked on, or the client hung up meanwhile.
  if (state_ != State::kWorking || (client_gone_ && client_gone_->load())) {
    if (counted_) {
      counted_ = false;
      core_.Abandoned();
    }
    stream->End(/*finished=*/false);
    Close();
    return;
  }
  chunked_ = stream_output_.Begin(head, version_, keep_alive_);
  stream_finishing_ = false;
  stream_half_closed_ = peer_closed_;
  state_ = State::kStreaming;
  if (head_only_) {  // the head is the whole answer: the producer is told to stop
    stream->End(/*finished=*/false);
    stream_finishing_ = true;
  } else {
    stream_ = std::move(stream);
  }
  // Sent with the turn's other answers, after the handler returned (as a whole answer is).
  io_.unsent.push_back(std::static_pointer_cast<PlainConnection>(shared_from_this()));
}

void PlainConnection::PumpStream() {
  if (state_ != State::kStreaming) return;  // not begun yet (it pumps then), or over
  if (!RunLoggingExceptions("writing a streamed answer", [&] {
        TakeStreamInput();
        if (state_ == State::kStreaming) SendStream();
      })) {
    Close();
  }
}

void PlainConnection::TakeStreamInput() {
  if (!stream_) return;
  if (!stream_output_.TakeFrom(*stream_, stream_input_, chunked_, stream_finishing_)) {
    AbortStream();
  }
}

void PlainConnection::SendStream() {
  static constexpr size_t kParts = 64;
  while (!stream_output_.empty()) {
    std::array<iovec, kParts> parts;
    msghdr message{};
    message.msg_iov = parts.data();
    message.msg_iovlen = stream_output_.Gather(parts.data(), parts.size());
    const ssize_t written = ::sendmsg(fd_, &message, MSG_NOSIGNAL);
    if (written >= 0) {
      const uint64_t chunk_bytes = stream_output_.Consume(static_cast<size_t>(written));
      if (chunk_bytes > 0 && stream_) stream_->Sent(chunk_bytes);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      // The client must take some of it within the idle timeout; EPOLLOUT resumes the write.
      deadline_ = core_.Now() + core_.options().idle_timeout;
      return;
    } else if (errno != EINTR) {
      Close();  // the client went away: its producer is told
      return;
    }
  }
  // All written: the stream waits for its producer, however long that takes.
  deadline_.reset();
  if (stream_finishing_) StreamWritten();
}

void PlainConnection::StreamWritten() {
  if (std::shared_ptr<HttpStream> stream = std::move(stream_)) stream->End(/*finished=*/true);
  if (counted_) {
    counted_ = false;
    core_.Finished(received_);
  }
  state_ = State::kWriting;  // as after a whole answer
  Written();
  Serve();
}

void PlainConnection::AbortStream() {
  // A reset, not an end: a client reading a body that ends with the connection would otherwise
  // take the cut for the end.
  const linger reset{.l_onoff = 1, .l_linger = 0};
  setsockopt(fd_, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
  Close();
}

void PlainConnection::DetachStream() {
  if (std::shared_ptr<HttpStream> stream = std::move(stream_)) stream->End(/*finished=*/false);
}

void PlainConnection::PostBodyNext(std::shared_ptr<PlainConnection> self,
                                   BodyReader::Callback callback) {
  auto holder = std::make_shared<BodyReader::Callback>(std::move(callback));
  UniqueFunction<void()> task = [self = std::move(self), holder]() mutable {
    self->BodyNext(std::move(*holder));
  };
  if (!io_.gate->TryPost(task)) {
    (*holder)(Unavailable("the server is shutting down"));
  }
}

void PlainConnection::BodyNext(BodyReader::Callback callback) {
  if (body_error_) {
    callback(*body_error_);
    return;
  }
  if (!body_streaming_ || state_ != State::kWorking) {
    callback(Cancelled("the request was answered before its body was read"));
    return;
  }
  if (body_wanted_) {
    callback(FailedPrecondition("BodyReader::Next called while another waits"));
    return;
  }
  body_wanted_ = std::move(callback);
  if (!RunLoggingExceptions("reading a streamed request body", [&] { PumpBody(); })) Close();
}

void PlainConnection::PumpBody() {
  while (body_wanted_ && state_ == State::kWorking) {
    if (!body_piece_.empty() || body_ended_) {
      // Handed over before the callback runs: it may ask for the next piece at once.
      std::string piece = std::move(body_piece_);
      body_piece_.clear();
      BodyReader::Callback callback = std::move(body_wanted_);
      body_wanted_ = BodyReader::Callback();
      deadline_.reset();  // the consumer holds the body up now, not the client
      if (piece.empty()) {
        body_error_ = FailedPrecondition("the request body has ended");
        parser_.reset();
      }
      callback(std::move(piece));
      return;
    }
    bool need_input = true;
    if (end_ > begin_) {
      boost::beast::error_code error;
      const size_t used =
          parser_->put(boost::asio::const_buffer(buffer_.get() + begin_, end_ - begin_), error);
      begin_ += used;
      if (error && error != http::error::need_more) {
        close_after_write_ = true;  // the rest of the body cannot be told from a next request
        FailBody(parser_->over_limit()
                     ? PayloadTooLarge("the request body is over this route's size limit")
                     : InvalidArgument("malformed request body: {}", error.message()));
        return;
      }
      if (parser_->is_done()) body_ended_ = true;
      need_input = used == 0 && body_piece_.empty() && !body_ended_;
    }
    if (!need_input) continue;
    if (readable_ && Read()) continue;
    if (state_ != State::kWorking) return;  // closed while reading: Close told the consumer
    // Waits for the client's next bytes (HandleEvents), for up to the body timeout.
    deadline_ = core_.Now() + core_.options().body_timeout;
    return;
  }
}

void PlainConnection::FailBody(Status error) {
  body_error_ = error;
  if (!body_wanted_) return;
  BodyReader::Callback callback = std::move(body_wanted_);
  body_wanted_ = BodyReader::Callback();
  callback(std::move(error));
}

void PlainConnection::EndBodyStreaming() {
  if (!body_streaming_) return;
  if (!body_ended_) close_after_write_ = true;  // what the client still sends is dropped
  body_streaming_ = false;
  deadline_.reset();
  parser_.reset();
  if (!body_error_ || body_error_->code() == StatusCode::kFailedPrecondition) {
    FailBody(Cancelled("the request was answered before its body was read"));
  }
}

}  // namespace rampart::net
