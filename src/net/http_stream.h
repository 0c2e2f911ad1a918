#pragma once

// Internal to src/net: what streamed answers (StreamWriter) are made of, shared by the plain and
// TLS engines. A producer writes into an HttpStream from any thread; the connection's I/O thread
// takes what was written (HttpStream::Take), frames it into a StreamOutput and writes that.

#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/unique_function.h"
#include "net/http_server.h"

namespace rampart::net {

// A way to post tasks to one I/O thread that outlives it: once its engine closes the gate
// (after the thread stopped, before its loop is destroyed) posts are dropped, so a stream's
// producer may write after the server is gone. Thread safe.
class IoGate {
 public:
  explicit IoGate(std::function<void(UniqueFunction<void()>)> post) : post_(std::move(post)) {}

  void Post(UniqueFunction<void()> task) {
    std::lock_guard lock(mutex_);
    if (open_) post_(std::move(task));
  }
  // As Post, but leaves `task` with the caller (and answers false) when the gate is closed.
  bool TryPost(UniqueFunction<void()>& task) {
    std::lock_guard lock(mutex_);
    if (!open_) return false;
    post_(std::move(task));
    return true;
  }
  void Close() {
    std::lock_guard lock(mutex_);
    open_ = false;
  }

 private:
  std::mutex mutex_;
  bool open_ = true;
  const std::function<void(UniqueFunction<void()>)> post_;
};

// What a StreamWriter and its connection share. The producer's side (Write ... closed) is
// StreamWriter's, from any thread; the connection's side (Take, Sent, End) runs on its I/O
// thread, or during the engine's teardown once the I/O threads have stopped.
class HttpStream {
 public:
  HttpStream(std::shared_ptr<IoGate> gate, std::shared_ptr<Connection> connection,
             uint64_t max_queued_bytes);

  StreamWriter::WriteResult Write(std::string chunk);
  void Finish();
  void Abort();
  uint64_t queued_bytes() const { return queued_.load(std::memory_order_relaxed); }
  void OnDrained(UniqueFunction<void()> callback);
  void OnClosed(UniqueFunction<void()> callback);
  bool closed() const { return closed_.load(std::memory_order_acquire); }

  // What the producer asked for since the last Take.
  struct Input {
    std::vector<std::string> chunks;  // in order
    bool finish = false;              // Finish was called (the chunks come before the end)
    bool abort = false;               // Abort was called (drop everything)
  };
  // The connection's side: takes what was written; the next Write posts a new pump.
  void Take(Input& input);
  // `bytes` of chunks taken are on the wire now (calls back OnDrained's callback when due).
  void Sent(uint64_t bytes);
  // The stream is over: written to its end (`finished`), or lost (the client gone, the
  // connection failed or timed out, the server shutting down) or aborted. Lets go of the
  // connection, drops what was not taken, and calls back OnClosed's callback when it was lost.
  // Idempotent.
  void End(bool finished);

 private:
  // Posts the connection's pump unless one is posted and has not taken yet. Under mutex_: the
  // gate cannot close in between, so no post reaches a destroyed loop.
  void Wake();
  // OnDrained's bound: max_queued_bytes / 2, rounded up.
  uint64_t LowWater() const { return (max_queued_ + 1) / 2; }

  const uint64_t max_queued_;
  mutable std::mutex mutex_;
  std::shared_ptr<IoGate> gate_;            // guarded by mutex_
  std::shared_ptr<Connection> connection_;  // guarded by mutex_; null once ended
  std::vector<std::string> pending_;        // guarded by mutex_: written, not taken yet
  bool pump_posted_ = false;                // guarded by mutex_
  bool finish_ = false;                     // guarded by mutex_
  bool abort_ = false;                      // guarded by mutex_
  bool ended_ = false;                      // guarded by mutex_
  bool lost_ = false;                       // guarded by mutex_: ended neither by Finish nor Abort
  UniqueFunction<void()> on_drained_;       // guarded by mutex_
  UniqueFunction<void()> on_closed_;        // guarded by mutex_
  std::atomic<uint64_t> queued_{0};         // written by mutex_'s holders
  std::atomic<bool> closed_{false};
};

// A stream whose start is posted to its connection's thread: ended (as lost) if the task is
// destroyed without running, because the thread stopped first. Move-only.
class PendingStream {
 public:
  explicit PendingStream(std::shared_ptr<HttpStream> stream) : stream_(std::move(stream)) {}
  PendingStream(PendingStream&&) noexcept = default;
  PendingStream& operator=(PendingStream&&) = delete;
  ~PendingStream() {
    if (stream_) stream_->End(/*finished=*/false);
  }
  std::shared_ptr<HttpStream> Take() { return std::move(stream_); }

 private:
  std::shared_ptr<HttpStream> stream_;
};

// The bytes of a streamed answer on their way to the socket, in order: the head, each chunk
// (framed for chunked encoding, or bare for a body that ends with the connection), the chunked
// end. Chunks are not copied for a gathering write. On the connection's I/O thread only.
class StreamOutput {
 public:
  void Head(std::string head);
  void Chunk(std::string data, bool chunked);
  void Last();  // "0\r\n\r\n"
  // Starts afresh with `head` for a client speaking HTTP/1.`version`'s minor (10 or 11):
  // chunked for HTTP/1.1; for HTTP/1.0 the body ends with the connection, so keep_alive turns
  // false. Returns whether the body is chunked.
  bool Begin(const HttpResponseHead& head, unsigned version, bool& keep_alive);
  // Moves what `stream`'s producer wrote (through `input`, reused) into this output: its chunks,
  // then the chunked end once it finished (`finishing` turns true then, once). Returns false
  // when the producer aborted: the caller ends the stream broken.
  bool TakeFrom(HttpStream& stream, HttpStream::Input& input, bool chunked, bool& finishing);

  bool empty() const { return pieces_.empty(); }
  // Points up to `max` iovecs at the next bytes; returns how many.
  size_t Gather(iovec* parts, size_t max) const;
  // Appends up to about `limit` of the next bytes to `out` (a TLS write: one copy, so small
  // chunks share records).
  void Copy(std::string& out, size_t limit) const;
  // `bytes` from the front were written. Returns the chunk bytes (not framing) of the chunks
  // now written in full, for HttpStream::Sent.
  uint64_t Consume(size_t bytes);

 private:
  struct Piece {
    std::string prefix;  // the head, a chunk's size line, or the chunked end
    std::string data;    // a chunk's bytes
    bool crlf = false;   // the CRLF after a chunk's bytes
    size_t size() const { return prefix.size() + data.size() + (crlf ? 2 : 0); }
  };
  std::deque<Piece> pieces_;
  size_t offset_ = 0;  // bytes of pieces_.front() already written
};

// The head of a streamed answer: as FormatHead, with Transfer-Encoding: chunked when `chunked`
// (HTTP/1.1) and no length otherwise (HTTP/1.0: the body ends when the connection closes, so
// keep_alive must be false then).
void FormatStreamHead(const HttpResponseHead& head, unsigned version, bool keep_alive, bool chunked,
                      std::string& out);

}  // namespace rampart::net
