#pragma once

// Internal to src/net: plain-HTTP connections on EventLoops (see event_loop.h for why not
// Boost.Asio). http_plain.cc reads requests and writes answers, whole and streamed;
// http_plain_engine.cc accepts connections and runs the I/O threads.

#include <sys/epoll.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/clock.h"
#include "core/exceptions.h"
#include "net/event_loop.h"
#include "net/http_connection.h"
#include "net/http_stream.h"

namespace rampart::net {

class PlainConnection;

// One I/O thread: its loop and the connections open on it (closed before the loop goes).
struct PlainIo {
  explicit PlainIo(HttpCore& http) : core(http) {}
  // After the thread stopped: closes the gate and ends the streams still open, so that their
  // producers are told and their connections are freed before the loop goes.
  ~PlainIo();

  HttpCore& core;
  std::unique_ptr<EventLoop> loop;
  std::shared_ptr<IoGate> gate;  // into `loop`, for streams' producers
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
//
// A streamed answer is written as its producer writes it: each batch the
// producer wrote goes in one gathering write, and while the socket is full the rest waits for
// EPOLLOUT (the client must take some within the idle timeout). A hang-up ends the stream.
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
  // (A stream's head, or a HEAD request's whole streamed answer.)
  void SendAnswer() {
    if (state_ == State::kStreaming) {
      PumpStream();
      return;
    }
    if (state_ != State::kWriting) return;
    if (!RunLoggingExceptions("an HTTP connection", [&] { Send(); })) Close();
  }

  void OnEvents(uint32_t events) override {
    // Running out of memory while reading or answering ends this connection, not the thread.
    if (!RunLoggingExceptions("an HTTP connection", [&] { HandleEvents(events); })) Close();
  }

  void HandleEvents(uint32_t events);

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
  std::shared_ptr<HttpStream> StartStream(std::shared_ptr<Connection> self,
                                          HttpResponseHead head) override;
  // BodyReader::Next for the current request's streamed body, from any thread: runs BodyNext on
  // this connection's thread (or answers Unavailable when the engine has stopped).
  void PostBodyNext(std::shared_ptr<PlainConnection> self, BodyReader::Callback callback);
  void PumpStream() override;
  // Ends a stream still open when the engine goes (PlainIo's destructor).
  void DetachStream();

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
    // Writing a streamed answer: the head, then what the producer writes, until it finishes.
    kStreaming,
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
  // Streamed answers.
  void BeginStream(HttpResponseHead head, std::shared_ptr<HttpStream> stream);
  void TakeStreamInput();
  void SendStream();
  void StreamWritten();
  void AbortStream();
  void Linger();
  void Discard();  // reads and drops input while lingering
  // A streamed request body (HttpServerOptions::streamed_body), read only while its consumer
  // waits for a piece (body_wanted_).
  void BodyNext(BodyReader::Callback callback);
  void PumpBody();
  void FailBody(Status error);  // tells a waiting consumer; later Nexts get `error` too
  void EndBodyStreaming();      // the request was answered, or the connection closes
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

  // A streamed body: parsed bytes not yet handed over, and the consumer waiting for them.
  bool body_streaming_ = false;  // the dispatched request's body is handed over in pieces
  bool body_ended_ = false;      // its last byte has been parsed
  std::string body_piece_;
  std::optional<Status> body_error_;
  BodyReader::Callback body_wanted_;

  // Output: the answer being written, head then body, `sent_` bytes of them so far.
  std::string head_;
  std::string body_;
  size_t sent_ = 0;

  SteadyTime received_{};
  std::shared_ptr<std::atomic<bool>> client_gone_;  // the current request's
  std::shared_ptr<const Peer> peer_;                // made at Open, shared by every request

  // A streamed answer: what its producer writes (null once ended), framed on its way out.
  std::shared_ptr<HttpStream> stream_;
  HttpStream::Input stream_input_;
  StreamOutput stream_output_;
  bool chunked_ = false;             // HTTP/1.1 framing; else the body ends with the connection
  bool stream_finishing_ = false;    // the end is queued in stream_output_
  bool stream_half_closed_ = false;  // the client had ended its side before the stream began
};

}  // namespace rampart::net
