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

namespace rampart::net {

struct HttpRequest {
  std::string method;                                        // "GET", "POST", ...
  std::string target;                                        // path and query as sent
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;
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
