#pragma once

// SseReader: reads a Server-Sent Events stream (the WHATWG event-stream format an OpenAI stream
// uses) incrementally, bytes in as they arrive, whole events out. Lines end in LF, CRLF or CR
// (a CRLF split across two reads counts once); `data:` lines of one event are joined with LF;
// comments (`:` lines, keep-alives) and other fields are skipped; a blank line ends an event.
// Not synchronised: one reader per stream.

#include <cstddef>
#include <string>
#include <string_view>

#include "core/status.h"
#include "core/unique_function.h"

namespace rampart::gateway {

class SseReader {
 public:
  explicit SseReader(size_t max_event_bytes = 1u << 20) : max_event_bytes_(max_event_bytes) {}

  // Reads `bytes`, calling `on_event(data)` for each event completed. Errors: ResourceExhausted
  // when one event (or one line) grows past max_event_bytes; the reader is then unusable.
  template <typename OnEvent>
  Status Feed(std::string_view bytes, OnEvent&& on_event);

  // Whether bytes of an unfinished event are held (a stream that ends here was cut).
  bool InEvent() const { return !line_.empty() || has_data_; }

 private:
  // Handles one whole line; true when it ended an event with data (then data_ holds it).
  bool Line(std::string_view line);

  size_t max_event_bytes_;
  std::string line_;  // the line being read
  std::string data_;  // the event's data so far
  bool has_data_ = false;
  bool after_cr_ = false;  // the last byte read was CR: an LF next belongs to it
};

template <typename OnEvent>
Status SseReader::Feed(std::string_view bytes, OnEvent&& on_event) {
  size_t start = 0;
  if (after_cr_ && !bytes.empty() && bytes[0] == '\n') start = 1;
  after_cr_ = false;
  while (start < bytes.size()) {
    const size_t end = bytes.find_first_of("\r\n", start);
    if (end == std::string_view::npos) {
      line_.append(bytes.substr(start));
      break;
    }
    std::string_view line = bytes.substr(start, end - start);
    if (!line_.empty()) {
      line_.append(line);
      line = line_;
    }
    if (line.size() + data_.size() > max_event_bytes_) {
      return ResourceExhausted("an event of the stream is over {} bytes", max_event_bytes_);
    }
    if (Line(line)) {
      on_event(std::string_view(data_));
      data_.clear();
      has_data_ = false;
    }
    line_.clear();
    if (bytes[end] == '\r') {
      if (end + 1 == bytes.size()) {
        after_cr_ = true;
        start = end + 1;
        break;
      }
      start = bytes[end + 1] == '\n' ? end + 2 : end + 1;
    } else {
      start = end + 1;
    }
  }
  if (line_.size() + data_.size() > max_event_bytes_) {
    return ResourceExhausted("an event of the stream is over {} bytes", max_event_bytes_);
  }
  return Status::Ok();
}

}  // namespace rampart::gateway
