#include "net/http_connection.h"

#include <algorithm>

#include <fmt/format.h>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/status.hpp>

#include "json/writer.h"

namespace rampart::net {

void HttpCore::Finished(SteadyTime received) {
  handle_ns_.fetch_add(static_cast<uint64_t>(NanosBetween(received, Clock::Real().Now())),
                       std::memory_order_relaxed);
  requests_.fetch_add(1, std::memory_order_relaxed);
  in_flight_.Leave();
}

void HttpCore::Abandoned() { in_flight_.Leave(); }

void FormatHead(const HttpResponse& response, unsigned version, bool keep_alive, std::string& out) {
  namespace http = boost::beast::http;
  out += version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
  out += fmt::format_int(response.status).c_str();
  out += ' ';
  const auto reason = http::obsolete_reason(static_cast<http::status>(response.status));
  out.append(reason.data(), reason.size());
  out += "\r\nServer: rampart\r\nContent-Type: ";
  out += response.content_type;
  out += "\r\n";
  for (const auto& [name, value] : response.headers) {
    out += name;
    out += ": ";
    // Values may carry names from the repository (Server-Timing's ensemble steps); a line
    // break in one must not end the head early.
    // (A plain scan: libstdc++'s find_first_of calls memchr once per character.)
    if (std::none_of(value.begin(), value.end(), [](char c) { return c == '\r' || c == '\n'; })) {
      out += value;
    } else {
      for (char c : value) out += c == '\r' || c == '\n' ? ' ' : c;
    }
    out += "\r\n";
  }
  out += "Content-Length: ";
  out += fmt::format_int(response.body.size()).c_str();
  out += "\r\n";
  if (version == 10 && keep_alive) out += "Connection: keep-alive\r\n";
  if (version != 10 && !keep_alive) out += "Connection: close\r\n";
  out += "\r\n";
}

HttpResponse ErrorResponse(int status, std::string_view message) {
  HttpResponse response;
  response.status = status;
  json::Writer body;
  body.StartObject();
  body.Key("error");
  body.String(message);
  body.EndObject();
  response.body = body.Take();
  return response;
}

RequestParser::RequestParser(HttpRequest& request, uint64_t body_limit) : request_(request) {
  request_.headers.reserve(8);  // one allocation for a typical request's headers, not three
  this->body_limit(body_limit);
  header_limit(kHeaderLimit);
  eager(true);  // parse the body in the same call as the header when it is there
}

void RequestParser::on_request_impl(boost::beast::http::verb, string_view method,
                                    string_view target, int version, error_code&) {
  request_.method.assign(method.data(), method.size());
  request_.target.assign(target.data(), target.size());
  version_ = static_cast<unsigned>(version);
}

void RequestParser::on_field_impl(boost::beast::http::field field, string_view name,
                                  string_view value, error_code&) {
  if (version_ >= 11 && field == boost::beast::http::field::expect &&
      boost::beast::iequals(value, "100-continue")) {
    expects_continue_ = true;
  }
  std::string lower(name.data(), name.size());
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  request_.headers.emplace_back(std::move(lower), std::string(value.data(), value.size()));
}

void RequestParser::on_body_init_impl(const boost::optional<uint64_t>& length, error_code&) {
  // The declared length is a promise, not bytes: reserving all of it for every connection that
  // sends only headers would hold up to the body limit each (and fail, unhandled, where memory
  // is not overcommitted). Past kBodyReserve the body grows as it arrives.
  if (length) request_.body.reserve(std::min<uint64_t>(*length, kBodyReserve));
}

size_t RequestParser::on_body_impl(string_view body, error_code&) {
  request_.body.append(body.data(), body.size());
  return body.size();
}

size_t RequestParser::on_chunk_body_impl(uint64_t, string_view body, error_code&) {
  request_.body.append(body.data(), body.size());
  return body.size();
}

std::optional<HttpResponse> ParseErrorResponse(boost::beast::error_code error,
                                               uint64_t body_limit) {
  namespace http = boost::beast::http;
  if (error == http::error::body_limit) {
    return ErrorResponse(
        413,
        fmt::format("request body exceeds the {} byte limit (--http-max-input-size)", body_limit));
  }
  if (error == http::error::end_of_stream || error == http::error::partial_message ||
      error.category() != http::make_error_code(http::error::bad_target).category()) {
    return std::nullopt;
  }
  return ErrorResponse(400, fmt::format("malformed HTTP request: {}", error.message()));
}

}  // namespace rampart::net
