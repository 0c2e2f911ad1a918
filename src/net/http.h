#pragma once

// Plain HTTP request/response values shared by the server and the API layer; no Beast types
// leak past src/net.

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/peer.h"
#include "core/status.h"
#include "core/unique_function.h"

namespace rampart::net {

// A request body handed over in pieces as it arrives (HttpServerOptions::streamed_body), for
// bodies too large to hold whole (file uploads).
//
// Backpressure: the connection reads from its client only while a Next is outstanding, so a body
// is never read faster than its consumer takes it; at most one read buffer (16 KiB) waits.
//
// Next's callback gets a piece (not empty), or an empty string once the body has ended whole, or
// an error: PayloadTooLarge when the body passes the route's limit (declared or as it comes),
// InvalidArgument when its framing is malformed (chunked encoding), Unavailable when the client
// went away or sent too slowly (the body timeout counts from when a piece was asked for), Cancelled
// after the request was answered. After an end or an error every Next gets that error again (an
// end: FailedPrecondition). The callback runs on the connection's I/O thread (or at once on the
// caller's) and must not block: hand a piece to a worker, and call Next again from there.
//
// Answering before the body has ended is allowed (a 400, a 413): the connection then closes after
// the answer, dropping what the client still sends.
//
// Thread safety: Next may be called from any thread, one call at a time (the next only after the
// previous callback ran).
class BodyReader {
 public:
  using Callback = UniqueFunction<void(Result<std::string> piece)>;
  virtual ~BodyReader() = default;
  virtual void Next(Callback callback) = 0;
};

struct HttpRequest {
  std::string method;                                        // "GET", "POST", ...
  std::string target;                                        // path and query as sent
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;                                          // empty when body_reader is set
  // Set instead of `body` for a request whose route streams its body (HttpServerOptions::
  // streamed_body); such a request is handed over as soon as its head is read.
  std::shared_ptr<BodyReader> body_reader;
  SteadyTime received{};  // when the whole request had been read
  // Becomes true if the client closes its connection before the answer is written, so work
  // queued for it can be dropped.
  std::shared_ptr<const std::atomic<bool>> client_gone;
  // Who is at the other end: its address and, on a mutual-TLS connection, its verified client
  // certificate. Made once per connection and shared by its requests; never null for requests
  // the server dispatches.
  std::shared_ptr<const Peer> peer;

  std::string_view path() const;   // target up to '?'
  std::string_view query() const;  // after '?', or empty
  // First header with that (lower-case) name.
  std::optional<std::string_view> Header(std::string_view lower_name) const;
};

// A whole answer. `headers` are extra response headers (x-request-id, Server-Timing,
// Retry-After, ...), written as given after Content-Type; a line break in a value is written as a
// space. The server writes Server, Content-Type, Content-Length and Connection itself.
struct HttpResponse {
  int status = 200;
  // Static text (a literal), not copied: owning it would cost an allocation per answer, as
  // "application/json" is one byte past std::string's inline capacity.
  std::string_view content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

// The head of a streamed answer (Responder::StartStream): its status, content type (any text,
// owned) and extra headers, as in HttpResponse. The server adds Transfer-Encoding: chunked for
// HTTP/1.1 clients; HTTP/1.0 clients get a body that ends when the connection closes.
struct HttpResponseHead {
  int status = 200;
  std::string content_type = "text/event-stream";
  std::vector<std::pair<std::string, std::string>> headers;
  // The bytes written and not yet on the wire at which StreamWriter::Write says to stop
  // (StreamWriter::kFull); at twice this a Write aborts the stream instead. At least 1.
  uint64_t max_queued_bytes = 1 << 20;
};

}  // namespace rampart::net
