#pragma once

// HttpClient: an asynchronous HTTP/1.1 (and HTTPS) client for talking to upstream servers, with
// keep-alive connection pools, per-call timeouts, streamed response bodies with backpressure,
// and cancellation.
//
// Threads. The client runs `HttpClientOptions::threads` I/O threads ("<name>-io-<i>"), each with
// its own Boost.Asio io_context. Every endpoint (scheme, host, port: endpoints that differ only
// in their path prefix share everything but the prefix) is pinned to one of them
// when first used (in turn), and all of that endpoint's connections and calls live on it: its
// pool needs no lock, and its limits are exact. Spread load over threads with several endpoints.
//
// Calls. Send() queues a request and returns at once; the sink (HttpResponseSink) is then called
// on the endpoint's I/O thread, in order: OnHead once, OnBody for each piece of the body as it
// arrives, and OnComplete exactly once, last, whatever happens (the response ended, an error, a
// timeout, Cancel, or the client's destruction). A call that failed before its head arrived
// gets only OnComplete. Sinks must not block: they run on a thread shared with other calls.
//
// Connections. Each endpoint keeps up to `max_idle_per_endpoint` idle keep-alive connections
// (most recently used first; closed after `idle_connection_timeout`) and opens at most
// `max_connections_per_endpoint` at once; past that, calls wait (in order) for one to be free,
// within their connect timeout. An idle connection found closed by the server when taken (the
// socket reads as ended or reset) is dropped for another; a reused connection that fails while
// the request is being written (so the server cannot have acted on it) is retried once on a
// fresh connection; one that fails after the request was written is not retried (the server may
// have acted on it), the caller decides. A call that ends early (cancelled, timed out, or
// failed) closes its connection rather than pooling it.
//
// Errors. OnComplete gets a Status and an HttpClientError naming the failure, so callers can
// tell failures where nothing was sent (so any request may be retried) from the rest: see
// HttpClientError. Exceptions never leave the client: one thrown by a sink ends its call
// (Internal, kSinkFailed), and the client's own handlers catch theirs.
//
// Thread safety: HttpClient's methods and HttpCall's may be called from any thread. The client
// must outlive nothing: destroying it completes the calls still in flight (Cancelled,
// kShutdown), closes every connection and joins its threads; it must not be destroyed from one
// of its own sinks, nor race HttpCall methods still being called.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/unique_function.h"

namespace rampart::net {

// Where a call goes: scheme, host and port, and a path prefix put before every request's target.
struct Endpoint {
  bool tls = false;         // https
  std::string host;         // a name, an IPv4 address, or an IPv6 address without brackets
  uint16_t port = 0;        // the URL's, or 80 / 443
  std::string path_prefix;  // "" or "/v1" (no trailing slash)

  // "https://host:port": what pools are keyed by.
  std::string Key() const;
};

// Parses "http://host[:port][/prefix]" or "https://...". IPv6 hosts go in brackets
// ("http://[::1]:8000"). A trailing slash on the prefix is dropped. Errors: InvalidArgument
// naming the URL and what is wrong (scheme, host, port, user info, query or fragment).
Result<Endpoint> ParseEndpoint(std::string_view url);

// Header fields: an ordered list of (name, value) pairs in one buffer (two allocations however
// many fields there are), looked up without regard to the name's case.
class HttpHeaders {
 public:
  void Add(std::string_view name, std::string_view value);
  // Replaces every field named `name` by one (appends it when there is none).
  void Set(std::string_view name, std::string_view value);
  // The first field named `name` (any case), or nullopt.
  std::optional<std::string_view> Get(std::string_view name) const;
  bool Has(std::string_view name) const { return Get(name).has_value(); }

  size_t size() const { return fields_.size(); }
  bool empty() const { return fields_.empty(); }
  std::string_view name(size_t i) const { return Slice(fields_[i].name, fields_[i].name_size); }
  std::string_view value(size_t i) const { return Slice(fields_[i].value, fields_[i].value_size); }
  void Clear();
  void Reserve(size_t fields, size_t bytes);

 private:
  struct Field {
    uint32_t name, name_size, value, value_size;  // offsets into text_
  };
  std::string_view Slice(uint32_t offset, uint32_t size) const {
    return std::string_view(text_).substr(offset, size);
  }
  std::string text_;
  std::vector<Field> fields_;
};

struct HttpClientTimeouts {
  // Resolving the host, the TCP connect and the TLS handshake, together with any wait for a
  // free connection when the endpoint is at max_connections_per_endpoint.
  std::chrono::milliseconds connect{10'000};
  // From the request being written to the response's first byte (time to first token when
  // streaming).
  std::chrono::milliseconds first_byte{60'000};
  // Between two reads of the response once it has begun (not counted while the sink pauses).
  std::chrono::milliseconds idle{60'000};
  // The whole call, from Send; zero = none.
  std::chrono::milliseconds total{0};
};

struct HttpClientRequest {
  std::string method = "GET";
  std::string target = "/";  // after the endpoint's path prefix; must start with '/'
  // Sent as given, after Host. Content-Length is set from the body (a given one is refused);
  // Host may be overridden by giving one. Names and values may not hold CR, LF or NUL.
  HttpHeaders headers;
  std::string body;  // sent with Content-Length (none for a GET or HEAD without a body)
  HttpClientTimeouts timeouts;
  // The response body's limit; passing it ends the call (kResponseTooLarge).
  uint64_t max_response_bytes = 64ull << 20;
};

// Why a call failed. The Status beside it carries the code (Unavailable for the upstream's and
// the network's faults, PayloadTooLarge, Cancelled, InvalidArgument, Internal) and the message.
enum class HttpClientError {
  kNone = 0,
  kInvalidRequest,     // the request cannot be sent as given; nothing was sent
  kConnectFailed,      // the name did not resolve or the connection was refused; nothing was sent
  kConnectTimeout,     // no connection (or none free) within timeouts.connect; nothing was sent
  kTlsFailed,          // the TLS handshake failed (certificate not trusted, wrong host name)
  kSendFailed,         // writing the request failed (it may have been partly sent)
  kFirstByteTimeout,   // no response byte within timeouts.first_byte after the request was sent
  kIdleTimeout,        // the response stalled for timeouts.idle
  kDeadlineExceeded,   // timeouts.total passed
  kResponseTooLarge,   // the body passed max_response_bytes (or the head 64 KiB)
  kMalformedResponse,  // not HTTP/1.x as the parser reads it (bad status line, chunk size, ...)
  kConnectionClosed,   // the server closed or reset the connection before the response ended
  kCancelled,          // HttpCall::Cancel
  kShutdown,           // the client was destroyed with the call in flight
  kSinkFailed,         // a sink method threw
  kInternal,           // the client itself failed (out of memory)
};
// "connect_failed", "first_byte_timeout", ...
std::string_view HttpClientErrorName(HttpClientError error);

// What the sink sees of a response before its body. Valid during OnHead only (copy what is kept).
struct HttpClientResponseHead {
  int status = 0;
  std::string_view reason;
  int version = 11;  // 10 or 11
  const HttpHeaders& headers;
};

// Receives one call's response, on the endpoint's I/O thread (see the header comment).
class HttpResponseSink {
 public:
  virtual ~HttpResponseSink() = default;
  virtual void OnHead(const HttpClientResponseHead& head) = 0;
  // A piece of the body, dechunked; valid during the call only. Return true to go on reading;
  // false pauses the call (nothing more is read from the socket, so the server is held back by
  // TCP flow control) until HttpCall::Resume.
  virtual bool OnBody(std::string_view piece) = 0;
  // Exactly once, last. OK (and kNone) when the whole response was read.
  virtual void OnComplete(const Status& status, HttpClientError error) = 0;
};

// A call in flight. Copyable; refers to the call weakly, so it may outlive it (then its methods
// do nothing). Both methods may be called from any thread at any time.
class HttpCall {
 public:
  class State;
  HttpCall() = default;
  explicit HttpCall(std::weak_ptr<State> state) : state_(std::move(state)) {}

  // Ends the call: its connection is closed (never pooled) and the sink gets OnComplete
  // (Cancelled, kCancelled) unless it already had its completion.
  void Cancel() const;
  // Continues a call whose sink paused it (OnBody returned false); no-op otherwise.
  void Resume() const;

 private:
  std::weak_ptr<State> state_;
};

// TLS settings for https endpoints (PEM files).
struct HttpClientTlsOptions {
  std::string ca_file;    // CAs that sign server certificates; empty = the system trust store
  std::string cert_file;  // client certificate chain for mutual TLS; empty = none
  std::string key_file;   // its private key; required with cert_file
};

struct HttpClientOptions {
  int threads = 1;
  // Idle connections kept per endpoint: at least the calls usually in flight to it, or
  // connections are closed as calls end in a burst and opened again for the next ones.
  size_t max_idle_per_endpoint = 128;
  size_t max_connections_per_endpoint = 1024;
  std::chrono::milliseconds idle_connection_timeout{60'000};
  HttpClientTlsOptions tls;
  std::string name = "http-client";  // threads are "<name>-io-<i>"
};

// A whole response (Fetch).
struct HttpClientResponse {
  int status = 0;
  HttpHeaders headers;
  std::string body;
};
struct HttpFetchResult {
  Status status;  // OK when the whole response was read, whatever its HTTP status
  HttpClientError error = HttpClientError::kNone;
  HttpClientResponse response;  // what arrived (the head is empty if it never did)
};

class HttpClient {
 public:
  // Starts the I/O threads. Errors: InvalidArgument for TLS files that cannot be read or used,
  // or threads < 1.
  static Result<std::unique_ptr<HttpClient>> Create(const HttpClientOptions& options);
  ~HttpClient();  // completes calls in flight (kShutdown), closes connections, joins threads

  // Sends `request` to `endpoint`; `sink` (not null) is told the rest. An invalid request is
  // completed (kInvalidRequest) on the I/O thread like any other failure.
  HttpCall Send(const Endpoint& endpoint, HttpClientRequest request,
                std::shared_ptr<HttpResponseSink> sink);

  // Sends `request` and collects the whole response (the body bounded by
  // request.max_response_bytes); `on_done` runs once, on the I/O thread.
  HttpCall Fetch(const Endpoint& endpoint, HttpClientRequest request,
                 UniqueFunction<void(HttpFetchResult)> on_done);

  struct Stats {
    uint64_t connections_opened = 0;  // connected (and handshaken, for TLS)
    uint64_t connections_reused = 0;  // calls that went out on a pooled connection
    uint64_t connections_failed = 0;  // connect or TLS handshake failures and timeouts
    // Reused connections replaced by a new one: the server closed them before the request went
    // out or before a byte of its answer.
    uint64_t retries = 0;
    uint64_t calls = 0;  // calls completed, however they ended
  };
  Stats stats() const;

  class Impl;

 private:
  explicit HttpClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rampart::net
