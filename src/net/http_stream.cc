#include "net/http_stream.h"

#include <algorithm>
#include <utility>

#include "core/exceptions.h"
#include "net/http_connection.h"

namespace rampart::net {

namespace {

// Runs a producer's callback; what it throws goes no further than the log.
void CallBack(UniqueFunction<void()>& callback) {
  if (callback) RunLoggingExceptions("a stream's callback", [&] { callback(); });
}

}  // namespace

HttpStream::HttpStream(std::shared_ptr<IoGate> gate, std::shared_ptr<Connection> connection,
                       uint64_t max_queued_bytes)
    : max_queued_(std::max<uint64_t>(1, max_queued_bytes)),
      gate_(std::move(gate)),
      connection_(std::move(connection)) {}

void HttpStream::Wake() {
  if (pump_posted_ || !connection_) return;
  pump_posted_ = true;
  gate_->Post([connection = connection_] { connection->PumpStream(); });
}

StreamWriter::WriteResult HttpStream::Write(std::string chunk) {
  std::unique_lock lock(mutex_);
  if (finish_ || abort_ || ended_) return StreamWriter::kClosed;
  if (chunk.empty()) return StreamWriter::kQueued;
  const uint64_t queued = queued_.load(std::memory_order_relaxed);
  if (queued >= 2 * max_queued_) {
    // The producer wrote on past kFull: its memory stays bounded by ending the stream.
    abort_ = true;
    closed_.store(true, std::memory_order_release);
    pending_.clear();
    Wake();
    lock.unlock();
    LOG_WARN("a streamed answer was aborted: its producer wrote past {} queued bytes",
             2 * max_queued_);
    return StreamWriter::kClosed;
  }
  const uint64_t now_queued = queued + chunk.size();
  queued_.store(now_queued, std::memory_order_relaxed);
  pending_.push_back(std::move(chunk));
  Wake();
  return now_queued >= max_queued_ ? StreamWriter::kFull : StreamWriter::kQueued;
}

void HttpStream::Finish() {
  std::lock_guard lock(mutex_);
  if (finish_ || abort_ || ended_) return;
  finish_ = true;
  closed_.store(true, std::memory_order_release);
  Wake();
}

void HttpStream::Abort() {
  std::vector<std::string> dropped;
  std::lock_guard lock(mutex_);
  if (finish_ || abort_ || ended_) return;  // after Finish the end is on its way
  abort_ = true;
  closed_.store(true, std::memory_order_release);
  dropped.swap(pending_);
  Wake();
}

void HttpStream::OnDrained(UniqueFunction<void()> callback) {
  UniqueFunction<void()> replaced;
  {
    std::lock_guard lock(mutex_);
    if (!ended_ && queued_.load(std::memory_order_relaxed) >= LowWater()) {
      replaced = std::exchange(on_drained_, std::move(callback));
      return;
    }
  }
  CallBack(callback);
}

void HttpStream::OnClosed(UniqueFunction<void()> callback) {
  UniqueFunction<void()> replaced;
  {
    std::lock_guard lock(mutex_);
    if (!ended_) {
      replaced = std::exchange(on_closed_, std::move(callback));
      return;
    }
    if (!lost_) return;
  }
  CallBack(callback);
}

void HttpStream::Take(Input& input) {
  std::lock_guard lock(mutex_);
  pump_posted_ = false;
  input.chunks.swap(pending_);
  pending_.clear();
  input.finish = finish_;
  input.abort = abort_;
}

void HttpStream::Sent(uint64_t bytes) {
  UniqueFunction<void()> drained;
  {
    std::lock_guard lock(mutex_);
    const uint64_t queued = queued_.load(std::memory_order_relaxed);
    const uint64_t left = queued - std::min(queued, bytes);
    queued_.store(left, std::memory_order_relaxed);
    if (on_drained_ && left < LowWater()) drained = std::move(on_drained_);
  }
  CallBack(drained);
}

void HttpStream::End(bool finished) {
  UniqueFunction<void()> drained;
  UniqueFunction<void()> closed;
  std::shared_ptr<Connection> connection;
  std::vector<std::string> dropped;
  {
    std::lock_guard lock(mutex_);
    if (ended_) return;
    ended_ = true;
    lost_ = !finished && !abort_;
    closed_.store(true, std::memory_order_release);
    queued_.store(0, std::memory_order_relaxed);
    connection = std::move(connection_);  // released below, outside the lock
    dropped.swap(pending_);
    drained = std::move(on_drained_);
    if (lost_) closed = std::move(on_closed_);
    on_closed_ = {};
  }
  CallBack(drained);
  if (!finished && closed) CallBack(closed);  // only a lost stream keeps its OnClosed callback
}

StreamWriter::StreamWriter(std::shared_ptr<HttpStream> stream) : stream_(std::move(stream)) {}

StreamWriter& StreamWriter::operator=(StreamWriter&& other) noexcept {
  if (this != &other) {
    if (stream_) stream_->Abort();
    stream_ = std::move(other.stream_);
  }
  return *this;
}

StreamWriter::~StreamWriter() {
  if (stream_) stream_->Abort();  // nothing after Finish
}

StreamWriter::WriteResult StreamWriter::Write(std::string chunk) {
  return stream_ ? stream_->Write(std::move(chunk)) : kClosed;
}
void StreamWriter::Finish() {
  if (stream_) stream_->Finish();
}
void StreamWriter::Abort() {
  if (stream_) stream_->Abort();
}
uint64_t StreamWriter::queued_bytes() const { return stream_ ? stream_->queued_bytes() : 0; }
void StreamWriter::OnDrained(UniqueFunction<void()> callback) {
  if (stream_) {
    stream_->OnDrained(std::move(callback));
  } else {
    CallBack(callback);
  }
}
void StreamWriter::OnClosed(UniqueFunction<void()> callback) {
  if (stream_) {
    stream_->OnClosed(std::move(callback));
  } else {
    CallBack(callback);
  }
}
bool StreamWriter::closed() const { return !stream_ || stream_->closed(); }

void StreamOutput::Head(std::string head) { pieces_.push_back({std::move(head), {}, false}); }

void StreamOutput::Chunk(std::string data, bool chunked) {
  if (!chunked) {
    pieces_.push_back({{}, std::move(data), false});
    return;
  }
  // The size line in hex: at most 16 digits and CRLF, inside std::string's inline capacity for
  // any chunk under 2^52 bytes.
  char line[20];
  size_t at = sizeof(line);
  line[--at] = '\n';
  line[--at] = '\r';
  uint64_t size = data.size();
  do {
    line[--at] = "0123456789abcdef"[size & 0xf];
    size >>= 4;
  } while (size > 0);
  pieces_.push_back({std::string(line + at, sizeof(line) - at), std::move(data), true});
}

void StreamOutput::Last() { pieces_.push_back({"0\r\n\r\n", {}, false}); }

bool StreamOutput::Begin(const HttpResponseHead& head, unsigned version, bool& keep_alive) {
  const bool chunked = version != 10;
  if (!chunked) keep_alive = false;  // the body ends when the connection closes
  std::string formatted;
  FormatStreamHead(head, version, keep_alive, chunked, formatted);
  pieces_.clear();
  offset_ = 0;
  Head(std::move(formatted));
  return chunked;
}

bool StreamOutput::TakeFrom(HttpStream& stream, HttpStream::Input& input, bool chunked,
                            bool& finishing) {
  stream.Take(input);
  if (input.abort) {
    input.chunks.clear();
    return false;
  }
  for (std::string& chunk : input.chunks) Chunk(std::move(chunk), chunked);
  input.chunks.clear();
  if (input.finish && !finishing) {
    finishing = true;
    if (chunked) Last();
  }
  return true;
}

size_t StreamOutput::Gather(iovec* parts, size_t max) const {
  static constexpr char kCrlf[] = "\r\n";
  size_t count = 0;
  size_t skip = offset_;
  for (const Piece& piece : pieces_) {
    const std::string_view segments[3] = {piece.prefix, piece.data,
                                          piece.crlf ? std::string_view(kCrlf, 2) : ""};
    for (std::string_view segment : segments) {
      if (skip >= segment.size()) {
        skip -= segment.size();
        continue;
      }
      if (count == max) return count;
      parts[count++] = {const_cast<char*>(segment.data() + skip), segment.size() - skip};
      skip = 0;
    }
  }
  return count;
}

void StreamOutput::Copy(std::string& out, size_t limit) const {
  size_t skip = offset_;
  for (const Piece& piece : pieces_) {
    const std::string_view segments[3] = {piece.prefix, piece.data,
                                          piece.crlf ? std::string_view("\r\n", 2) : ""};
    for (std::string_view segment : segments) {
      if (skip >= segment.size()) {
        skip -= segment.size();
        continue;
      }
      if (out.size() >= limit) return;
      const size_t take = std::min(segment.size() - skip, limit - out.size());
      out.append(segment.data() + skip, take);
      skip = 0;
    }
  }
}

uint64_t StreamOutput::Consume(size_t bytes) {
  uint64_t chunk_bytes = 0;
  while (bytes > 0 && !pieces_.empty()) {
    const size_t left = pieces_.front().size() - offset_;
    if (bytes < left) {
      offset_ += bytes;
      return chunk_bytes;
    }
    bytes -= left;
    chunk_bytes += pieces_.front().data.size();
    pieces_.pop_front();
    offset_ = 0;
  }
  return chunk_bytes;
}

void FormatStreamHead(const HttpResponseHead& head, unsigned version, bool keep_alive, bool chunked,
                      std::string& out) {
  FormatHeadLines(head.status, head.content_type, head.headers, version, out);
  if (chunked) out += "Transfer-Encoding: chunked\r\n";
  if (version == 10 && keep_alive) out += "Connection: keep-alive\r\n";
  if (version != 10 && !keep_alive) out += "Connection: close\r\n";
  out += "\r\n";
}

}  // namespace rampart::net
