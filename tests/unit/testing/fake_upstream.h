#pragma once

// FakeUpstream: a small OpenAI-compatible HTTP/1.1 server on loopback (port 0) for testing
// clients, which can be told to misbehave.
//
// It serves GET /health, GET /v1/models, POST /v1/embeddings and POST /v1/chat/completions
// (a JSON answer, or with "stream": true Server-Sent Events: `stream_chunks` chunks
// `data: {...}\n\n`, each its own HTTP chunk, then `data: [DONE]\n\n`); anything else is 404.
// Each request is answered as the behaviour in force when its first byte arrives says
// (UpstreamFault): the next one pushed with PushOnce, else the one set with SetBehaviour.
//
// Every connection runs on its own thread with blocking I/O, so a fault that waits (hang, stall,
// stop reading) just blocks that thread until the client closes the connection or the fake
// stops. What it saw is counted (requests by path, connections accepted and closed by the
// client, body bytes sent, stalled writes); tests wait for those counts (WaitFor) instead of
// sleeping.
//
// Thread safety: all methods from any thread. Stop (or the destructor) ends every connection.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace rampart::testing {

enum class UpstreamFault {
  kNone,              // answer normally
  kDelayFirstByte,    // wait `delay`, then answer normally
  kCutStream,         // a stream answer: close the connection after `chunks` chunks
  kStallStream,       // a stream answer: after `chunks` chunks send nothing more (hold)
  kStatus,            // answer `status` (500, 502, 503, ...) with a JSON error
  kTooManyRequests,   // answer 429 with `Retry-After: <retry_after>`
  kInvalidJson,       // answer 200 application/json with a body that is not JSON
  kHugeBody,          // answer 200 with `huge_bytes` bytes of body (Content-Length), written
                      // in 64 KiB pieces; a write the client does not take for 100 ms counts
                      // as a stall (then it goes on trying)
  kHang,              // read the request and never answer (hold)
  kStopReading,       // read nothing of the connection at all (hold)
  kReadSlowly,        // read the request 4 KiB per `delay`, then answer normally
  kCloseMidResponse,  // send the head and half the body of a JSON answer, then close
  kCloseAfterAnswer,  // answer normally (keep-alive), then close the connection
  kCloseUnanswered,   // read the request, then close the connection without a byte of answer
                      // (a server closing an idle keep-alive connection as a request arrives)
  kRaw,               // send `raw` as the whole answer, then close the connection
};

struct UpstreamBehaviour {
  UpstreamFault fault = UpstreamFault::kNone;
  std::chrono::milliseconds delay{0};
  int chunks = 0;
  int status = 500;
  int retry_after = 1;
  uint64_t huge_bytes = 0;
  std::string raw;
};

struct FakeUpstreamOptions {
  int stream_chunks = 3;  // SSE chunks before [DONE]
  // PEM text; with cert and key set the fake speaks HTTPS (TLS 1.2+).
  std::string tls_cert_pem;
  std::string tls_key_pem;
  std::string client_ca_pem;  // when set, a client certificate signed by it is required
};

class FakeUpstream {
 public:
  explicit FakeUpstream(FakeUpstreamOptions options = {});
  ~FakeUpstream();  // Stop()

  uint16_t port() const { return port_; }
  // "http://127.0.0.1:<port>" (https:// with TLS).
  std::string url() const;

  void SetBehaviour(UpstreamBehaviour behaviour);
  void PushOnce(UpstreamBehaviour behaviour);

  int requests(const std::string& path) const;  // requests whose head was read, by path
  int total_requests() const;
  int connections_accepted() const { return accepted_.load(); }
  int connections_closed() const { return closed_.load(); }  // ended by the client (EOF, reset)
  int connections_ended() const { return ended_.load(); }    // closed, by either side
  uint64_t body_bytes_sent() const { return body_bytes_sent_.load(); }  // of kHugeBody answers
  int stalls() const { return stalls_.load(); }
  // The last request's body and a header of it (lower-case name), for asserting on what the
  // client sent.
  std::string last_body() const;
  std::optional<std::string> last_header(const std::string& name) const;

  // Waits until `condition` holds (checked whenever the counts change, and every 10 ms);
  // false after `timeout`.
  bool WaitFor(const std::function<bool()>& condition,
               std::chrono::milliseconds timeout = std::chrono::seconds(10));

  void Stop();

  class Connection;  // fake_upstream.cc's

 private:
  friend class Connection;
  void AcceptLoop();
  UpstreamBehaviour Take();
  void Notify();
  bool stopping() const { return stopping_.load(); }

  FakeUpstreamOptions options_;
  struct Io;  // the sockets' io_context and the TLS context
  std::unique_ptr<Io> io_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::thread acceptor_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> accepted_{0};
  std::atomic<int> closed_{0};
  std::atomic<int> ended_{0};
  std::atomic<uint64_t> body_bytes_sent_{0};
  std::atomic<int> stalls_{0};

  mutable std::mutex mutex_;  // guards everything below
  std::condition_variable changed_;
  UpstreamBehaviour behaviour_;
  std::deque<UpstreamBehaviour> once_;
  std::map<std::string, int> requests_;
  std::string last_body_;
  std::map<std::string, std::string> last_headers_;
  std::set<int> open_fds_;
  std::vector<std::thread> connections_;
};

}  // namespace rampart::testing
