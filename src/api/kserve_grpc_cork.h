#pragma once

// Write coalescing for the gRPC front end's connections (internal to api/kserve_grpc).
//
// gRPC 1.51 writes every answer with its own sendmsg: each Finish runs the connection's
// transport in an execution context of its own, which flushes what it wrote, and a unary answer
// carries trailers, which always start a write. On loopback a sendmsg is also the receiver's
// TCP processing and wake-up, about 3 µs of the server's CPU per call at 64 calls in flight
// (docs/benchmarks.md, "Clients on the wire, and wake-ups"). gRPC gives an application no way to
// gather several calls' answers into one write, so a completion-queue thread corks the sockets
// of the connections instead (TCP_CORK) while it works through a round of events that holds more
// than one call's, uncorking them every few calls' answers and once its queue is empty: the
// kernel then sends those answers together. A call alone in its round is answered at once,
// uncorked (CallPollers, api/kserve_grpc_calls.h).
//
// The sockets are gRPC's: the front end finds them by their local port (every TCP connection
// accepted on the gRPC server's port), looking again at most once per `rescan_interval`, so a
// new connection is corked from the next look on. A socket found by an earlier look may have
// been closed since and its number reused; corking that one only delays its writes until the
// next uncork, and the kernel sends corked data after 200 ms whatever happens.

#include <chrono>
#include <vector>

namespace rampart::api::grpc_calls {

class SocketCork {
 public:
  // `port`: the gRPC server's listening port; 0 turns corking off (Cork does nothing).
  explicit SocketCork(
      int port, std::chrono::steady_clock::duration rescan_interval = std::chrono::seconds(1));
  // Uncorks.
  ~SocketCork();
  SocketCork(const SocketCork&) = delete;
  SocketCork& operator=(const SocketCork&) = delete;

  // Corks every connection accepted on the port (looking for them first when the last look is
  // older than the rescan interval). Idempotent until Uncork.
  void Cork();
  // Uncorks what Cork corked: what was written meanwhile goes out now. Idempotent.
  void Uncork();
  // Between a Cork that did something and the next Uncork.
  bool corked() const { return corked_; }

  // The connection sockets the last look found (for tests).
  const std::vector<int>& sockets() const { return sockets_; }

 private:
  // Lists the process's TCP connections (not listening sockets) whose local port is port_.
  void Scan();

  const int port_;
  const std::chrono::steady_clock::duration rescan_interval_;
  std::chrono::steady_clock::time_point last_scan_{};
  bool scanned_ = false;
  bool corked_ = false;
  std::vector<int> sockets_;
};

}  // namespace rampart::api::grpc_calls
