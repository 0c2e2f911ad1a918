// libFuzzer target: the HTTP/1.1 request parser (net/http_connection.h's RequestParser, Beast's
// parser underneath) on a connection's byte stream, fed in pieces as the plain-HTTP connection
// feeds it: unparsed bytes stay in the buffer and the next read is appended to them; a request's
// deadline advances as it comes; a finished request on a keep-alive connection starts the next
// one (pipelining).
//
// Input layout: byte 0 is the largest piece (0: the whole stream in one piece); byte 1 seeds the
// piece sizes (1 to that largest, pseudo-random) from its low 6 bits, its top bit picks a 64-byte
// body limit instead of 1 MiB and the next one 128 bytes of bodies in flight instead of 1 GiB;
// the rest is the stream. At the end of the stream the parser sees an end of file, as Beast's
// reads (the HTTPS connections) give it.
//
// Checks: the parser never consumes more than it was given; a parse error maps to a 400, 413 or
// 503 answer or to closing the connection, and the answer's head formats; a finished request's
// accessors work; a request's deadline is never before its start; once a parser is gone, none
// of the server's bodies-in-flight budget stays reserved.

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
using rampart::SteadyTime;
using rampart::fuzz::Check;
using rampart::net::HttpCore;
using rampart::net::HttpRequest;
using rampart::net::HttpResponse;
using rampart::net::HttpServerOptions;
using rampart::net::RequestDeadline;
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
void Reject(boost::beast::error_code error, HttpCore& core) {
  std::optional<HttpResponse> answer = rampart::net::ParseErrorResponse(error, core);
  if (!answer) return;
  Check(answer->status == 400 || answer->status == 413 || answer->status == 503,
        "a parse error answered other than 400, 413 or 503");
  std::string head;
  rampart::net::FormatHead(*answer, 11, false, head);
}

// What a connection does while a request is unfinished: its deadline advances.
void AdvanceDeadline(RequestDeadline& deadline, const RequestParser& parser,
                     const HttpRequest& request, SteadyTime now) {
  if (!deadline.started()) deadline.HeadStarted(now);
  if (parser.is_header_done()) {
    if (!deadline.reading_body()) deadline.BodyStarted(now);
    deadline.BodyReceived(request.body.size());
  }
  Check(deadline.due() >= now, "a request's deadline is before its start");
}

void CheckNothingReserved(const HttpCore& core) {
  Check(core.stats().body_bytes_in_flight == 0, "a finished parser left body bytes reserved");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t largest_piece = data[0] == 0 ? size : data[0];
  uint32_t random = 0x9e3779b9u ^ (data[1] & 0x3f);
  HttpServerOptions options;
  options.max_body_bytes = (data[1] & 0x80) != 0 ? 64 : uint64_t{1} << 20;
  options.max_body_bytes_in_flight = (data[1] & 0x40) != 0 ? 128 : uint64_t{1} << 30;
  HttpCore core(options, [](HttpRequest&&, rampart::net::Responder) {});
  const SteadyTime now = rampart::Clock::Real().Now();
  const std::string_view stream(reinterpret_cast<const char*>(data) + 2, size - 2);

  std::string buffer;  // read and not yet parsed
  size_t fed = 0;      // bytes of `stream` read so far
  HttpRequest request;
  RequestDeadline deadline(options);
  std::optional<RequestParser> parser(std::in_place, request, options.max_body_bytes, core);
  while (true) {
    boost::beast::error_code error;
    const bool parsed = !buffer.empty();
    if (parsed) {
      const size_t used = parser->put(boost::asio::buffer(buffer), error);
      Check(used <= buffer.size(), "the parser consumed more than it was given");
      buffer.erase(0, used);
    } else {
      error = http::error::need_more;
    }
    if (error && error != http::error::need_more) {
      Reject(error, core);
      parser.reset();
      CheckNothingReserved(core);
      return 0;
    }
    if (parser->is_done()) {
      Dispatch(request, *parser);
      const bool keep_alive = parser->keep_alive();
      parser.reset();
      CheckNothingReserved(core);
      if (!keep_alive) return 0;
      request = HttpRequest();
      deadline.Reset();
      parser.emplace(request, options.max_body_bytes, core);
      continue;
    }
    if (parsed) AdvanceDeadline(deadline, *parser, request, now);
    if (fed == stream.size()) break;
    random = random * 1664525u + 1013904223u;
    const size_t piece = 1 + (random >> 8) % largest_piece;
    const std::string_view read = stream.substr(fed, piece);
    buffer.append(read);
    fed += read.size();
  }
  // The peer closed with a request unfinished: as Beast's reads end a message.
  if (parser->got_some()) {
    boost::beast::error_code error;
    parser->put_eof(error);
    if (error) {
      Reject(error, core);
    } else if (parser->is_done()) {
      Dispatch(request, *parser);
    }
  }
  parser.reset();
  CheckNothingReserved(core);
  return 0;
}
