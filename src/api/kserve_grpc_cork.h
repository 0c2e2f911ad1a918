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
// than one call's, flushing them every few calls' answers and uncorking them once its queue is
// empty: the kernel then sends those answers together. A call alone in its round is answered at
// once, uncorked (CallPollers, api/kserve_grpc_calls.h).
//
// Bounded wait. While the connections are corked, an answer waits for the corking thread's next
// flush; if that thread is preempted, it would wait for as long as the thread is off its core
// (the kernel's own limit is 200 ms). So a flusher thread (`grpc-cork`) watches: it uncorks the
// connections when they have been corked for `bound` without a queue thread flushing them. No
// answer stays corked much longer than `bound`, whatever the queue threads' scheduling: a thread
// that sleeps and wakes is run ahead of busy ones. The flusher wakes about once a bound while
// corking is in use (it goes back to sleep a rescan interval after the last cork) and never waits
// for a queue thread.
//
// Which sockets. The front end finds gRPC's connections by their local port (every TCP
// connection accepted on the gRPC server's port), looking in /proc/self/fd at most once per
// `rescan_interval` (on the flusher thread; the first corked round looks itself), so a new
// connection is corked from the next look on. It keeps a duplicate descriptor of each socket it
// finds and corks through that one only: a descriptor number gRPC closes and the process reuses for
// another socket (an outgoing connection, another server's) is never touched. A look drops the
// duplicates of connections gRPC has closed (gRPC shuts a socket down before it closes it, so a
// duplicate held until the next look does not keep the connection open).
//
// Several queue threads share one SocketCork: the connections are corked while any of them is
// in a corked round, and a thread that ends its round flushes what was written (uncorking only
// when it was the last).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <sys/types.h>

namespace rampart::api::grpc_calls {

class SocketCork {
 public:
  // `port`: the gRPC server's listening port; 0 turns corking off (nothing is corked, no thread
  // runs).
  // `max_connections`: with more connections on the port than this, nothing is corked (see
  // kMaxConnections).
  explicit SocketCork(int port,
                      std::chrono::steady_clock::duration bound = std::chrono::milliseconds(1),
                      std::chrono::steady_clock::duration rescan_interval = std::chrono::seconds(1),
                      size_t max_connections = kMaxConnections);
  // Stops the flusher, uncorks and closes the duplicates.
  ~SocketCork();
  SocketCork(const SocketCork&) = delete;
  SocketCork& operator=(const SocketCork&) = delete;

  // Corking and uncorking cost two system calls per connection each time, whether or not the
  // connection had anything to send: past a few dozen connections (each then carrying few of a
  // round's answers) that costs more than it saves. At 256 connections with one call in flight
  // each, corking them all took ~8 % more server CPU per call than not corking; at 64, ~13 %
  // less (docs/benchmarks.md, "Corking and many connections").
  static constexpr size_t kMaxConnections = 64;

  // A queue thread starts a corked round: the connections found so far are corked (unless
  // another thread's round has them corked already). False, and no round, when the last look
  // found more than max_connections (or corking is off). Each Cork that returned true is ended
  // by one Uncork.
  bool Cork();
  // During a round: what was written so far goes out now; the connections stay corked.
  void Flush();
  // Ends the round Cork started: what was written goes out now; the connections are uncorked
  // once no thread is in a round.
  void Uncork();

  // Looks for the connections now, on the calling thread (the flusher does it otherwise).
  void Rescan();
  // Whether the last look found socket `fd` (any descriptor of it), and how many it found.
  bool Holds(int fd) const;
  size_t socket_count() const;
  // How often the flusher uncorked connections that a queue thread left corked past the bound.
  uint64_t forced_flushes() const { return forced_flushes_.load(std::memory_order_relaxed); }

 private:
  using Clock = std::chrono::steady_clock;
  static Clock::rep Now();

  // A socket found on the port, through a duplicate descriptor of its own (closed when it goes).
  struct Socket {
    Socket(int fd_in, ino_t inode_in) : fd(fd_in), inode(inode_in) {}
    ~Socket();
    Socket(const Socket&) = delete;
    Socket& operator=(const Socket&) = delete;
    const int fd;
    const ino_t inode;
  };
  using Sockets = std::vector<std::shared_ptr<const Socket>>;

  void Scan();  // REQUIRES: scan_mutex_
  void SetAll(int value);
  void RunFlusher();

  const int port_;
  const Clock::duration bound_;
  const Clock::duration rescan_interval_;
  const size_t max_connections_;

  // What the last look found. Replaced whole by a look; a queue thread corks the sockets of the
  // set it loaded, which stay open while it holds them.
  std::atomic<std::shared_ptr<const Sockets>> sockets_;
  std::mutex scan_mutex_;  // one look at a time
  std::atomic<bool> looked_{false};

  std::mutex rounds_mutex_;  // the queue threads' Cork, Flush and Uncork; never the flusher's
  int rounds_ = 0;           // queue threads in a corked round; guarded by rounds_mutex_

  // Set before any socket is corked and cleared after the last is uncorked: while it is false
  // nothing is corked.
  std::atomic<bool> corked_{false};
  // When a queue thread last corked, flushed or uncorked (Clock's count): corked, and no change
  // for a bound, means nobody has let the answers out for that long.
  std::atomic<Clock::rep> changed_at_{0};
  std::atomic<uint64_t> forced_flushes_{0};

  std::mutex flusher_mutex_;
  std::condition_variable flusher_wake_;
  bool stopping_ = false;  // guarded by flusher_mutex_
  // The flusher sleeps without ticking: a Cork must wake it.
  std::atomic<bool> flusher_asleep_{false};
  std::thread flusher_;
};

}  // namespace rampart::api::grpc_calls
