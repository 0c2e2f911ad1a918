// Plain-HTTP connections on EventLoops: see event_loop.h for why not Boost.Asio.

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>

#include "core/clock.h"
#include "core/exceptions.h"
#include "core/logging.h"
#include "net/event_loop.h"
#include "net/http_connection.h"

namespace rampart::net {
namespace {

namespace http = boost::beast::http;

class PlainConnection;

// One I/O thread: its loop and the connections open on it (closed before the loop goes).
struct PlainIo {
  explicit PlainIo(HttpCore& http) : core(http) {}

  HttpCore& core;
  std::unique_ptr<EventLoop> loop;
  std::unordered_map<PlainConnection*, std::shared_ptr<PlainConnection>> open;
  // Connections whose answers wait for the end of the loop's turn (PlainConnection::Write).
  std::vector<std::shared_ptr<PlainConnection>> unsent;

  void SendAnswers();     // the loop's batch-end hook
  void CheckDeadlines();  // every second, and on request
};

// One plain-HTTP connection, on its I/O thread's loop from accept to close.
//
// Its socket is watched edge-triggered for input, output and the client's hang-up, and
// `readable_` remembers whether input may be left unread: a read that returns less than the free
// buffer space drained the socket, so the next request is read when its edge arrives, with one
// recv. While a request is being worked on nothing is read (pipelined requests wait in the
// socket), and EPOLLRDHUP means the client has gone: its request is marked so that queued work
// for it is dropped.
//
// Answers are sent at the end of the loop's turn, all of those written during it together
// (PlainIo::SendAnswers), not one by one as they are written. A client's thread blocked in
// epoll_wait is woken by the first answer that reaches it; sent together, the rest are there when
// it looks, and it does not preempt this thread between answers (both sides spend less CPU per
// request; figures in docs/benchmarks.md). An answer waits at most for the rest of the turn's
// work, and one written while its request is still being dispatched (a fast model run on this
// thread) is sent after the handler returns, so pipelined requests are answered in order without
// recursion.
class PlainConnection final : public Connection, public EventLoop::Watcher {
 public:
  PlainConnection(int fd, HttpCore& core, PlainIo& io, ConnectionSlot slot)
      : fd_(fd), core_(core), io_(io), slot_(std::move(slot)), request_deadline_(core.options()) {}
  ~PlainConnection() override {
    if (fd_ >= 0) ::close(fd_);
    if (counted_) core_.Abandoned();  // an answer that never came still leaves the count
  }

  // On the connection's thread, once: registers it and starts reading.
  void Open();
  // From PlainIo::SendAnswers: sends the answer Write left, if the connection still has one.
  void SendAnswer() {
    if (state_ != State::kWriting) return;
    if (!RunLoggingExceptions("an HTTP connection", [&] { Send(); })) Close();
  }

  void OnEvents(uint32_t events) override {
    // Running out of memory while reading or answering ends this connection, not the thread.
    if (!RunLoggingExceptions("an HTTP connection", [&] { HandleEvents(events); })) Close();
  }

  void HandleEvents(uint32_t events) {
    if (state_ == State::kClosed) return;  // an event collected before Close
    if (events & (EPOLLHUP | EPOLLERR | EPOLLRDHUP)) {
      peer_closed_ = true;
      if (state_ == State::kWorking && client_gone_) client_gone_->store(true);
    }
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) readable_ = true;
    if ((events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) && state_ == State::kWriting) {
      Send();
    } else if (state_ == State::kReading && readable_) {
      Serve();
    } else if (state_ == State::kLingering && readable_) {
      Discard();
    }
  }

  void Answer(std::shared_ptr<Connection> self, HttpResponse response) override {
    io_.loop->Dispatch([self = std::move(self), this, response = std::move(response)]() mutable {
      Deliver([&] { return std::move(response); });
    });
  }
  void AnswerWith(std::shared_ptr<Connection> self,
                  UniqueFunction<HttpResponse()> make_response) override {
    io_.loop->Dispatch(
        [self = std::move(self), this, make_response = std::move(make_response)]() mutable {
          Deliver([&] { return make_response(); });
        });
  }

  // Acts on a deadline that has passed: a request whose head or body came too slowly is answered
  // 408; a connection idle between requests, or waiting for its client to take an answer, or
  // lingering after a refusal, is closed.
  void CheckDeadline(SteadyTime now) {
    if (!deadline_ || now < *deadline_) return;
    if (state_ == State::kReading && request_deadline_.started()) {
      const HttpRefusal refusal = request_deadline_.refusal();
      core_.Refused(refusal);
      RejectAndClose(TimeoutResponse(refusal));
      return;
    }
    Close();
  }

 private:
  enum class State {
    kReading,  // reading and parsing the next request
    kWorking,  // dispatched, waiting for the answer
    // The answer waits for the end of the loop's turn, or is partly written and waits for
    // EPOLLOUT. Either way it is sent after the handler has returned (its HttpRequest&& names
    // request_, which the next request reuses).
    kWriting,
    // A refusal (400, 413) was sent and this side ended; what the client still sends of the
    // refused request is read and dropped until it ends too, or kLinger* run out. Closing with
    // input unread would make the kernel reset the connection, and a client still sending its
    // body (one that does not ask `Expect: 100-continue`) would see the reset, not the answer.
    kLingering,
    kClosed,
  };

  // Writes the answer `make` builds. If building or writing it throws (out of memory), the
  // connection ends and its request stops counting as in flight: no client waits for an answer
  // that cannot come.
  template <typename Make>
  void Deliver(Make&& make) {
    if (RunLoggingExceptions("answering an HTTP request", [&] { Write(make()); })) return;
    if (counted_) {
      counted_ = false;
      core_.Abandoned();
    }
    Close();
  }

  void StartRequest();
  void Serve();
  // Moves the reading deadline on after input arrived: the head's from the request's first
  // byte, the body's as its bytes come (RequestDeadline).
  void AdvanceRequestDeadline();
  // Reads what the socket has into the buffer. False: nothing more now (or closed).
  bool Read();
  void Dispatch();
  void Write(HttpResponse response);
  void Send();
  void Written();
  void RejectAndClose(HttpResponse answer);
  void Linger();
  void Discard();  // reads and drops input while lingering
  void Close();

  static constexpr size_t kReadBufferBytes = 16 * 1024;
  static constexpr std::chrono::seconds kLingerTime{5};        // or the idle timeout if shorter
  static constexpr uint64_t kLingerBytes = uint64_t{1} << 28;  // 256 MiB

  int fd_;
  HttpCore& core_;
  PlainIo& io_;
  ConnectionSlot slot_;
  State state_ = State::kReading;
  bool readable_ = true;  // there may be unread input (a fresh connection: try)
  bool peer_closed_ = false;
  bool continued_ = false;  // `100 Continue` sent for the current request
  bool keep_alive_ = true;
  bool close_after_write_ = false;
  bool counted_ = false;         // the current request was dispatched and counts as in flight
  bool dispatched_any_ = false;  // a request of this connection has been dispatched
  bool head_only_ = false;       // the current request is HEAD: its answer goes without the body
  unsigned version_ = 11;
  uint64_t discarded_ = 0;              // bytes dropped while lingering
  std::optional<SteadyTime> deadline_;  // HttpCore::Now()'s time
  RequestDeadline request_deadline_;    // while reading a request

  // Input: bytes [begin_, end_) of buffer_ are read and not yet parsed.
  std::unique_ptr<char[]> buffer_;
  size_t capacity_ = 0;
  size_t begin_ = 0;
  size_t end_ = 0;
  HttpRequest request_;
  std::optional<RequestParser> parser_;

  // Output: the answer being written, head then body, `sent_` bytes of them so far.
  std::string head_;
  std::string body_;
  size_t sent_ = 0;

  SteadyTime received_{};
  std::shared_ptr<std::atomic<bool>> client_gone_;  // the current request's
};

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
  StartRequest();
  Serve();
}

void PlainConnection::StartRequest() {
  state_ = State::kReading;
  continued_ = false;
  request_ = HttpRequest();
  parser_.emplace(request_, core_.options().max_body_bytes, core_);
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
  parser_.reset();  // it writes into request_, which is handed over now
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
  counted_ = true;
  dispatched_any_ = true;
  state_ = State::kWorking;
  core_.Dispatch(std::move(request_), Responder(shared_from_this()));
}

void PlainConnection::Write(HttpResponse response) {
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

void PlainIo::CheckDeadlines() {
  const SteadyTime now = core.Now();
  // A copy: a connection past its deadline closes, leaving `open`.
  std::vector<PlainConnection*> connections;
  connections.reserve(open.size());
  for (const auto& entry : open) connections.push_back(entry.first);
  for (PlainConnection* connection : connections) connection->CheckDeadline(now);
}

void PlainIo::SendAnswers() {
  // By index: a connection whose answer goes may read, dispatch and answer its next request
  // here, which joins the list and leaves in this same call.
  for (size_t i = 0; i < unsent.size(); ++i) {
    std::shared_ptr<PlainConnection> connection = std::move(unsent[i]);
    connection->SendAnswer();
  }
  unsent.clear();
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
  if (client_gone_ && state_ == State::kWorking) client_gone_->store(true);
  state_ = State::kClosed;
  deadline_.reset();
  ::close(fd_);  // also ends the epoll registration
  fd_ = -1;
  if (auto found = io_.open.find(this); found != io_.open.end()) {
    io_.loop->KeepUntilIdle(std::move(found->second));  // events of this batch may name it
    io_.open.erase(found);
  }
}

// Accepts on the first I/O thread's loop and hands connections out to the loops in turn.
class PlainEngine final : public HttpEngine, private EventLoop::Watcher {
 public:
  PlainEngine(HttpCore& core, std::vector<std::unique_ptr<PlainIo>> io)
      : core_(core), io_(std::move(io)) {}
  ~PlainEngine() override {
    if (listener_ >= 0) ::close(listener_);
  }

  Status Listen(int listener) override {
    listener_ = listener;
    // Out of descriptors, accept fails while connections wait: rather than spin on a
    // level-triggered listener, wait for the next connection's edge or the next tick to retry.
    io_[0]->loop->Every(std::chrono::seconds(1), [this] {
      if (stalled_) OnEvents(EPOLLIN);
    });
    return io_[0]->loop->Add(listener_, EPOLLIN | EPOLLET, this);
  }

  void Run(size_t index) override { io_[index]->loop->Run(); }

  void StopAccepting() override {
    std::promise<void> closed;
    io_[0]->loop->Post([this, &closed] {
      if (listener_ >= 0) ::close(listener_);  // also ends its registration
      listener_ = -1;
      closed.set_value();
    });
    closed.get_future().wait();
  }

  void Stop() override {
    for (auto& io : io_) io->loop->Stop();
  }

  void CheckDeadlines() override {
    std::vector<std::future<void>> done;
    for (auto& io : io_) {
      auto checked = std::make_shared<std::promise<void>>();
      done.push_back(checked->get_future());
      io->loop->Post([&plain = *io, checked] {
        plain.CheckDeadlines();
        checked->set_value();
      });
    }
    for (auto& each : done) each.wait();
  }

 private:
  // Edge-triggered: accepts until none is left.
  void OnEvents(uint32_t) override {
    while (listener_ >= 0) {
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        const bool drained = errno == EAGAIN || errno == EWOULDBLOCK;
        if (!drained && !stalled_) {
          LOG_WARN("accept failed: {}; connections wait until it succeeds", std::strerror(errno));
        }
        stalled_ = !drained;
        return;
      }
      if (stalled_) {
        LOG_INFO("accepting connections again");
        stalled_ = false;
      }
      std::optional<ConnectionSlot> slot = core_.OpenConnection();
      if (!slot) {
        RefuseConnection(fd);
        continue;
      }
      const int on = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
      PlainIo& target = *io_[next_io_];
      next_io_ = (next_io_ + 1) % io_.size();
      // Made here, so that the socket is closed even if the target loop has stopped.
      auto connection = std::make_shared<PlainConnection>(fd, core_, target, std::move(*slot));
      target.loop->Dispatch([connection = std::move(connection)] { connection->Open(); });
    }
  }

  // Over max_connections: a 503 and the end, without a connection object. What the client has
  // sent already is read and dropped first, so the close does not reset the connection before
  // the client reads the answer.
  static void RefuseConnection(int fd) {
    static const std::string kAnswer = [] {
      std::string head;
      HttpResponse response =
          ErrorResponse(503, "too many open connections; retry later (--http-max-connections)");
      response.headers.emplace_back("Retry-After", "1");
      FormatHead(response, 11, /*keep_alive=*/false, head);
      return head + response.body;
    }();
    [[maybe_unused]] const ssize_t sent =
        ::send(fd, kAnswer.data(), kAnswer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    ::shutdown(fd, SHUT_WR);
    std::array<char, 4096> drained;
    while (::recv(fd, drained.data(), drained.size(), MSG_DONTWAIT) > 0) {
    }
    ::close(fd);
  }

  HttpCore& core_;
  std::vector<std::unique_ptr<PlainIo>> io_;
  int listener_ = -1;
  size_t next_io_ = 0;    // only touched on the first loop
  bool stalled_ = false;  // accept failed with connections waiting (out of descriptors)
};

}  // namespace

Result<std::unique_ptr<HttpEngine>> MakePlainEngine(HttpCore& core, size_t threads) {
  std::vector<std::unique_ptr<PlainIo>> io;
  for (size_t i = 0; i < threads; ++i) {
    io.push_back(std::make_unique<PlainIo>(core));
    PlainIo& plain = *io.back();
    ASSIGN_OR_RETURN(plain.loop, EventLoop::Create());
    plain.loop->AtBatchEnd([&plain] { plain.SendAnswers(); });
    // Connections past their deadline are closed: waiting for a request or the rest of its
    // body, for their client to take an answer, or lingering after a refusal.
    plain.loop->Every(std::chrono::seconds(1), [&plain] { plain.CheckDeadlines(); });
  }
  return std::unique_ptr<HttpEngine>(new PlainEngine(core, std::move(io)));
}

}  // namespace rampart::net
