#include "net/http_connection.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/status.hpp>

#include "core/exceptions.h"
#include "json/writer.h"

namespace rampart::net {

namespace {

// Values may carry names from the repository (Server-Timing's ensemble steps) and a stream's
// content type is any text: a line break in one must not end the head early.
void AppendHeaderValue(std::string_view value, std::string& out) {
  // (A plain scan: libstdc++'s find_first_of calls memchr once per character.)
  if (std::none_of(value.begin(), value.end(), [](char c) { return c == '\r' || c == '\n'; })) {
    out += value;
  } else {
    for (char c : value) out += c == '\r' || c == '\n' ? ' ' : c;
  }
}

}  // namespace

std::string_view HttpRefusalName(HttpRefusal refusal) {
  switch (refusal) {
    case HttpRefusal::kConnections: return "connections";
    case HttpRefusal::kHeaderTimeout: return "header_timeout";
    case HttpRefusal::kBodyTimeout: return "body_timeout";
    case HttpRefusal::kBodyTooLarge: return "body_too_large";
    case HttpRefusal::kBodiesInFlight: return "bodies_in_flight";
    case HttpRefusal::kMalformed: return "malformed";
  }
  return "unknown";
}

BodyReservation& BodyReservation::operator=(BodyReservation&& other) noexcept {
  if (this != &other) {
    Release();
    core_ = std::exchange(other.core_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

bool BodyReservation::Grow(HttpCore& core, uint64_t bytes) {
  const uint64_t limit = core.options().max_body_bytes_in_flight;
  std::atomic<uint64_t>& in_flight = core.body_bytes_in_flight_;
  if (limit > 0) {
    uint64_t current = in_flight.load(std::memory_order_relaxed);
    do {
      if (bytes > limit || current > limit - bytes) return false;
    } while (!in_flight.compare_exchange_weak(current, current + bytes, std::memory_order_relaxed));
  } else {
    in_flight.fetch_add(bytes, std::memory_order_relaxed);
  }
  core_ = &core;
  bytes_ += bytes;
  return true;
}

void BodyReservation::Release() {
  if (core_ != nullptr && bytes_ > 0) {
    core_->body_bytes_in_flight_.fetch_sub(bytes_, std::memory_order_relaxed);
  }
  bytes_ = 0;
}

ConnectionSlot::~ConnectionSlot() {
  if (core_ != nullptr) core_->open_connections_.fetch_sub(1, std::memory_order_relaxed);
}

std::optional<ConnectionSlot> HttpCore::OpenConnection() {
  const uint64_t open = open_connections_.fetch_add(1, std::memory_order_relaxed);
  if (options_.max_connections > 0 && open >= options_.max_connections) {
    open_connections_.fetch_sub(1, std::memory_order_relaxed);
    Refused(HttpRefusal::kConnections);
    return std::nullopt;
  }
  return ConnectionSlot(this);
}

void HttpCore::Refused(HttpRefusal refusal) {
  refused_[static_cast<size_t>(refusal)].fetch_add(1, std::memory_order_relaxed);
  if (options_.on_refused) options_.on_refused(refusal);
}

HttpServer::Stats HttpCore::stats() const {
  HttpServer::Stats stats;
  stats.requests = requests_.load(std::memory_order_relaxed);
  stats.handle_ns_total = handle_ns_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < refused_.size(); ++i) {
    stats.refused[i] = refused_[i].load(std::memory_order_relaxed);
  }
  stats.open_connections = open_connections_.load(std::memory_order_relaxed);
  stats.body_bytes_in_flight = body_bytes_in_flight_.load(std::memory_order_relaxed);
  return stats;
}

void HttpCore::Dispatch(HttpRequest&& request, Responder responder) {
  in_flight_.Enter();
  // The handler owns the responder: if it throws before answering, the responder it drops on
  // the way out answers 500. The exception goes no further than the log.
  RunLoggingExceptions("handling an HTTP request",
                       [&] { handler_(std::move(request), std::move(responder)); });
}

void RequestDeadline::BodyReceived(uint64_t total_bytes) {
  if (options_.body_min_rate == 0 || !body_started_) return;
  // One second more for every body_min_rate bytes, from the body's start (capped far inside
  // the clock's range, whatever the limits).
  const double seconds =
      std::min(1e9, static_cast<double>(total_bytes) / static_cast<double>(options_.body_min_rate));
  due_ = *body_started_ + options_.body_timeout +
         std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

HttpResponse TimeoutResponse(HttpRefusal refusal) {
  return ErrorResponse(408,
                       refusal == HttpRefusal::kBodyTimeout
                           ? "the request body came too slowly (--http-body-timeout-secs, "
                             "--http-body-min-rate)"
                           : "the request head did not come in time (--http-header-timeout-secs)");
}

void HttpCore::Finished(SteadyTime received) {
  handle_ns_.fetch_add(static_cast<uint64_t>(NanosBetween(received, Clock::Real().Now())),
                       std::memory_order_relaxed);
  requests_.fetch_add(1, std::memory_order_relaxed);
  in_flight_.Leave();
}

void HttpCore::Abandoned() { in_flight_.Leave(); }

void FormatHeadLines(int status, std::string_view content_type,
                     const std::vector<std::pair<std::string, std::string>>& headers,
                     unsigned version, std::string& out) {
  namespace http = boost::beast::http;
  out += version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
  out += fmt::format_int(status).c_str();
  out += ' ';
  const auto reason = http::obsolete_reason(static_cast<http::status>(status));
  out.append(reason.data(), reason.size());
  out += "\r\nServer: rampart\r\nContent-Type: ";
  AppendHeaderValue(content_type, out);
  out += "\r\n";
  for (const auto& [name, value] : headers) {
    AppendHeaderValue(name, out);
    out += ": ";
    AppendHeaderValue(value, out);
    out += "\r\n";
  }
}

void FormatHead(const HttpResponse& response, unsigned version, bool keep_alive, std::string& out) {
  FormatHeadLines(response.status, response.content_type, response.headers, version, out);
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

RequestParser::RequestParser(HttpRequest& request, uint64_t body_limit, HttpCore& core,
                             std::string* stream_sink)
    : request_(request), core_(core) {
  request_.headers.reserve(8);  // one allocation for a typical request's headers, not three
  if (stream_sink != nullptr && core.options().streamed_body) {
    // Which limit applies is known only once the head is read (on_header_impl), after Beast
    // checks a declared length against its own limit: the limits are checked here instead.
    stream_sink_ = stream_sink;
    whole_limit_ = body_limit;
    this->body_limit(std::numeric_limits<uint64_t>::max());
  } else {
    this->body_limit(body_limit);
  }
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

void RequestParser::on_header_impl(error_code& error) {
  const boost::optional<uint64_t> length = content_length();
  if (stream_sink_ != nullptr) {
    stream_limit_ = core_.options().streamed_body(request_);
    if (stream_limit_ > 0) {
      // Not held in memory: nothing reserved. Over the limit, the consumer is told (BodyReader).
      if (length && *length > stream_limit_) over_limit_ = true;
      return;
    }
    if (length && *length > whole_limit_) {
      error = boost::beast::http::error::body_limit;
      return;
    }
  }
  // A declared length counts against the bodies in flight in full, from the head on: it is the
  // memory the body may take, however slowly it comes.
  if (length && *length > 0 && !reservation_.Grow(core_, *length)) error = kBodiesInFlightError;
}

void RequestParser::on_body_init_impl(const boost::optional<uint64_t>& length, error_code&) {
  // The declared length is a promise, not bytes: reserving all of it in memory for every
  // connection that sends only headers would hold up to the body limit each. Past kBodyReserve
  // the body grows as it arrives.
  if (length) request_.body.reserve(std::min<uint64_t>(*length, kBodyReserve));
}

bool RequestParser::TakeStreamed(string_view body, error_code& error) {
  if (over_limit_ || body.size() > stream_limit_ - streamed_bytes_) {
    over_limit_ = true;
    error = kStreamLimitError;
    return false;
  }
  streamed_bytes_ += body.size();
  stream_sink_->append(body.data(), body.size());
  return true;
}

size_t RequestParser::on_body_impl(string_view body, error_code& error) {
  if (streamed()) return TakeStreamed(body, error) ? body.size() : 0;
  request_.body.append(body.data(), body.size());
  return body.size();
}

void RequestParser::on_chunk_header_impl(uint64_t size, string_view, error_code& error) {
  if (streamed()) {
    if (size > stream_limit_ - streamed_bytes_) {
      over_limit_ = true;
      error = kStreamLimitError;
    }
  } else if (stream_sink_ != nullptr && size > whole_limit_ - request_.body.size()) {
    error = boost::beast::http::error::body_limit;
  }
}

size_t RequestParser::on_chunk_body_impl(uint64_t, string_view body, error_code& error) {
  if (streamed()) return TakeStreamed(body, error) ? body.size() : 0;
  if (!reservation_.Grow(core_, body.size())) {
    error = kBodiesInFlightError;
    return 0;
  }
  request_.body.append(body.data(), body.size());
  return body.size();
}

std::optional<HttpResponse> ParseErrorResponse(boost::beast::error_code error, HttpCore& core) {
  namespace http = boost::beast::http;
  if (error == http::error::body_limit || error == RequestParser::kStreamLimitError) {
    core.Refused(HttpRefusal::kBodyTooLarge);
    return ErrorResponse(413, fmt::format("request body exceeds the {} byte limit "
                                          "(--http-max-input-size)",
                                          core.options().max_body_bytes));
  }
  if (error == RequestParser::kBodiesInFlightError) {
    core.Refused(HttpRefusal::kBodiesInFlight);
    HttpResponse response = ErrorResponse(
        503, fmt::format("the server is reading {} bytes of request bodies already; retry later "
                         "(--http-max-body-bytes-in-flight)",
                         core.options().max_body_bytes_in_flight));
    response.headers.emplace_back("Retry-After", "1");
    return response;
  }
  if (error == http::error::end_of_stream || error == http::error::partial_message ||
      error.category() != http::make_error_code(http::error::bad_target).category()) {
    return std::nullopt;
  }
  core.Refused(HttpRefusal::kMalformed);
  return ErrorResponse(400, fmt::format("malformed HTTP request: {}", error.message()));
}

}  // namespace rampart::net
