// libFuzzer target: the HTTP/1.1 request parser (net/http_connection.h's RequestParser, Beast's
// parser underneath) on a connection's byte stream, fed in pieces as the plain-HTTP connection
// feeds it: unparsed bytes stay in the buffer and the next read is appended to them; a finished
// request on a keep-alive connection starts the next one (pipelining).
//
// Input layout: byte 0 is the largest piece (0: the whole stream in one piece), byte 1 seeds the
// piece sizes (1 to that largest, pseudo-random) and its top bit picks a 64-byte body limit
// instead of 1 MiB; the rest is the stream. At the end of the stream the parser sees an end of
// file, as Beast's reads (the HTTPS connections) give it.
//
// Checks: the parser never consumes more than it was given; a parse error maps to a 400/413
// answer or to closing the connection, and the answer's head formats; a finished request's
// accessors work.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>

#include "fuzz_check.h"
#include "net/http_connection.h"

// Boost's assertions (BOOST_ENABLE_ASSERT_HANDLER, set for this target) come here; all abort but
// one. Beast 1.74's chunked-body parser asserts that a final chunk it parses again holds at least
// 5 bytes, but a read that ends inside an empty body's "0\r\n\r\n" leaves it 3 or 4, which the
// code after the assertion handles (it waits for more); Beast relaxed the assertion upstream
// (boostorg/beast#2861). Rampart's builds define NDEBUG, which compiles it out; `make asan` (a
// Debug build) would abort.
namespace boost {
void assertion_failed_msg(char const* expression, char const* message, char const* function,
                          char const* file, long line) {
  if (std::string_view(expression) == "n >= 5" &&
      std::string_view(file).ends_with("beast/http/impl/basic_parser.ipp")) {
    return;
  }
  std::fprintf(stderr, "%s:%ld: %s: assertion '%s' failed%s%s\n", file, line, function, expression,
               message ? ": " : "", message ? message : "");
  std::abort();
}
void assertion_failed(char const* expression, char const* function, char const* file, long line) {
  assertion_failed_msg(expression, nullptr, function, file, line);
}
}  // namespace boost

namespace {

namespace http = boost::beast::http;
using rampart::fuzz::Check;
using rampart::net::HttpRequest;
using rampart::net::HttpResponse;
using rampart::net::RequestParser;

// A finished request, as the server would dispatch it: its accessors and an answer's head.
void Dispatch(const HttpRequest& request, const RequestParser& parser) {
  Check(request.path().size() <= request.target.size(), "path longer than the target");
  Check(request.query().size() <= request.target.size(), "query longer than the target");
  (void)request.Header("content-type");
  (void)request.Header("inference-header-content-length");
  HttpResponse response;
  response.body = request.body;
  std::string head;
  rampart::net::FormatHead(response, parser.version(), parser.keep_alive(), head);
}

// The connection's answer to a parse error (or none: it closes).
void Reject(boost::beast::error_code error, uint64_t body_limit) {
  std::optional<HttpResponse> answer = rampart::net::ParseErrorResponse(error, body_limit);
  if (!answer) return;
  Check(answer->status == 400 || answer->status == 413,
        "a parse error answered neither 400 nor 413");
  std::string head;
  rampart::net::FormatHead(*answer, 11, false, head);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t largest_piece = data[0] == 0 ? size : data[0];
  uint32_t random = 0x9e3779b9u ^ (data[1] & 0x7f);
  const uint64_t body_limit = (data[1] & 0x80) != 0 ? 64 : uint64_t{1} << 20;
  const std::string_view stream(reinterpret_cast<const char*>(data) + 2, size - 2);

  std::string buffer;  // read and not yet parsed
  size_t fed = 0;      // bytes of `stream` read so far
  HttpRequest request;
  std::optional<RequestParser> parser(std::in_place, request, body_limit);
  while (true) {
    boost::beast::error_code error;
    if (!buffer.empty()) {
      const size_t used = parser->put(boost::asio::buffer(buffer), error);
      Check(used <= buffer.size(), "the parser consumed more than it was given");
      buffer.erase(0, used);
    } else {
      error = http::error::need_more;
    }
    if (error && error != http::error::need_more) {
      Reject(error, body_limit);
      return 0;
    }
    if (parser->is_done()) {
      Dispatch(request, *parser);
      if (!parser->keep_alive()) return 0;
      request = HttpRequest();
      parser.emplace(request, body_limit);
      continue;
    }
    if (fed == stream.size()) break;
    random = random * 1664525u + 1013904223u;
    const size_t piece = 1 + (random >> 8) % largest_piece;
    const std::string_view read = stream.substr(fed, piece);
    buffer.append(read);
    fed += read.size();
  }
  // The peer closed with a request unfinished: as Beast's reads end a message.
  if (!parser->got_some()) return 0;
  boost::beast::error_code error;
  parser->put_eof(error);
  if (error) {
    Reject(error, body_limit);
  } else if (parser->is_done()) {
    Dispatch(request, *parser);
  }
  return 0;
}
