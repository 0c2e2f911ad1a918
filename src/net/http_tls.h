#pragma once

// Internal to src/net: HTTPS connections, TLS 1.2+ through Boost.Asio's SSL stream, requests
// parsed by RequestParser. http_tls.cc serves a connection (requests, whole and streamed
// answers); http_tls_engine.cc makes the TLS context, accepts and runs the I/O threads.

#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>  // before Boost.Asio 1.74, whose awaitable.hpp needs std::exchange
#include <vector>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>

#include "net/http_connection.h"
#include "net/http_stream.h"

namespace rampart::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
// Sockets and timers bound to their io_context's concrete executor: the type-erased
// any_io_executor (beast::tcp_stream's) costs a copy and a virtual call per operation.
using Executor = asio::io_context::executor_type;
using Socket = asio::basic_stream_socket<tcp, Executor>;
using Stream = ssl::stream<Socket>;
using Timer = asio::basic_waitable_timer<std::chrono::steady_clock,
                                         asio::wait_traits<std::chrono::steady_clock>, Executor>;

class TlsConnection;

// Hang-up watches for requests still unanswered a while after they were dispatched. A watch is a
// wait for the socket to become readable (the client's end of stream, or its next pipelined
// request); arming one costs an epoll_ctl, and most answers come before it could matter. So
// watches are armed in sweeps: every tick arms those for the requests added before the previous
// tick, that is unanswered for one to two periods. One per I/O thread, used only on it.
class HangUpWatches {
 public:
  static constexpr std::chrono::milliseconds kPeriod{10};

  explicit HangUpWatches(asio::io_context& context) : timer_(context.get_executor()) {}

  // The connection's request number `request` was dispatched and is not answered yet.
  void Add(std::weak_ptr<TlsConnection> connection, uint64_t request) {
    young_.push_back({std::move(connection), request});
    if (!armed_) Arm();
  }

 private:
  struct Entry {
    std::weak_ptr<TlsConnection> connection;
    uint64_t request;
  };

  void Arm() {
    armed_ = true;
    timer_.expires_after(kPeriod);
    timer_.async_wait([this](beast::error_code error) {
      armed_ = false;
      if (!error) Tick();
    });
  }

  void Tick();

  Timer timer_;
  std::vector<Entry> young_;  // added since the last tick
  std::vector<Entry> old_;    // added before it: armed at the next tick
  bool armed_ = false;
};

// One I/O thread's io_context and what belongs to it (destroyed before the context).
struct TlsIo {
  static constexpr std::chrono::seconds kSweepPeriod{1};

  explicit TlsIo(HttpCore& http);
  // After the thread stopped: closes the gate and ends the streams still open, so that their
  // producers are told and their connections are freed before the context goes.
  ~TlsIo();

  // Applies the deadlines of the connections started on this thread, dropping those gone.
  void CheckDeadlines();
  void ArmSweep();

  HttpCore& core;
  asio::io_context context{1};
  HangUpWatches watches{context};
  Timer sweep_timer;
  std::shared_ptr<IoGate> gate;  // into `context`, for streams' producers
  // The connections started here (weak: a connection ends when its last operation, responder
  // or stream does, on whichever thread that is).
  std::vector<std::weak_ptr<TlsConnection>> open;
};

// Serves a newly accepted connection on `io`'s thread.
void ServeTls(Socket socket, ssl::context& tls, HttpCore& core, TlsIo& io, ConnectionSlot slot);

}  // namespace rampart::net
