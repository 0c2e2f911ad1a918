#pragma once

// MultipartParser: a multipart/form-data body (RFC 7578) parsed as it streams in, piece by piece,
// for uploads too large to hold whole. It holds at most one part's head and a delimiter's length
// of data; each part's content goes to the sink as it is found.
//
// Errors (InvalidArgument, with what was wrong): a missing or malformed boundary, a part without
// `Content-Disposition: form-data; name=...`, a part head over kMaxHeadBytes, more than kMaxParts
// parts, a body that ends before its closing delimiter. A sink's own error stops parsing and is
// returned as is.
//
// Thread safety: none; one parser per body, fed from one thread at a time.

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace rampart::net {

// What a part's head says.
struct MultipartPartHead {
  std::string name;      // Content-Disposition's name
  std::string filename;  // its filename; empty when it has none
  bool has_filename = false;
  std::string content_type;  // the part's Content-Type; empty when absent
};

// Receives the parts in order: OnPart, OnData any number of times (pieces, never empty), OnPartEnd.
class MultipartSink {
 public:
  virtual ~MultipartSink() = default;
  virtual Status OnPart(const MultipartPartHead& head) = 0;
  virtual Status OnData(std::string_view bytes) = 0;
  virtual Status OnPartEnd() = 0;
};

class MultipartParser {
 public:
  static constexpr size_t kMaxHeadBytes = 16 * 1024;
  static constexpr size_t kMaxParts = 1000;

  // The boundary of a `multipart/form-data; boundary=...` Content-Type (quoted or not; 1 to 70
  // characters). InvalidArgument for another type or no usable boundary.
  static Result<std::string> BoundaryOf(std::string_view content_type);

  // `sink` must outlive the parser.
  MultipartParser(std::string_view boundary, MultipartSink& sink);

  // The body's next bytes.
  Status Feed(std::string_view bytes);
  // The body has ended: OK only when the closing delimiter was seen.
  Status Finish();
  bool done() const { return state_ == State::kEpilogue; }

 private:
  enum class State { kPreamble, kAfterDelimiter, kHead, kContent, kEpilogue, kFailed };

  Status Run();
  Status ParseHead(std::string_view head);
  Status Fail(Status error);

  MultipartSink& sink_;
  std::string delimiter_;  // CRLF "--" boundary
  std::string buffer_;     // bytes received and not yet parsed
  State state_ = State::kPreamble;
  size_t parts_ = 0;
  Status error_;
};

}  // namespace rampart::net
