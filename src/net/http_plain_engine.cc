// Plain HTTP: the I/O threads' loops and the listener (see http_plain.h).

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/logging.h"
#include "net/accept.h"
#include "net/http_plain.h"

namespace rampart::net {

PlainIo::~PlainIo() {
  if (gate) gate->Close();
  for (const auto& entry : open) entry.second->DetachStream();
}

void PlainIo::CheckDeadlines() {
  const SteadyTime now = core.Now();
  // A copy: a connection past its deadline closes, leaving `open`.
  std::vector<PlainConnection*> connections;
  connections.reserve(open.size());
  for (const auto& entry : open) connections.push_back(entry.first);
  for (PlainConnection* connection : connections) connection->CheckDeadline(now);
}

void PlainIo::SendAnswers() {
  // By index: a connection whose answer goes may read, dispatch and answer its next request
  // here, which joins the list and leaves in this same call.
  for (size_t i = 0; i < unsent.size(); ++i) {
    std::shared_ptr<PlainConnection> connection = std::move(unsent[i]);
    connection->SendAnswer();
  }
  unsent.clear();
}

namespace {

// Accepts on the first I/O thread's loop and hands connections out to the loops in turn.
class PlainEngine final : public HttpEngine, private EventLoop::Watcher {
 public:
  PlainEngine(HttpCore& core, std::vector<std::unique_ptr<PlainIo>> io)
      : core_(core), io_(std::move(io)) {}
  ~PlainEngine() override {
    if (listener_ >= 0) ::close(listener_);
  }

  Status Listen(int listener) override {
    listener_ = listener;
    // Out of descriptors, accept fails while connections wait: rather than spin on a
    // level-triggered listener, wait for the next connection's edge or the next tick to retry.
    io_[0]->loop->Every(std::chrono::seconds(1), [this] {
      if (stalled_) OnEvents(EPOLLIN);
    });
    return io_[0]->loop->Add(listener_, EPOLLIN | EPOLLET, this);
  }

  void Run(size_t index) override { io_[index]->loop->Run(); }

  void StopAccepting() override {
    std::promise<void> closed;
    io_[0]->loop->Post([this, &closed] {
      if (listener_ >= 0) ::close(listener_);  // also ends its registration
      listener_ = -1;
      closed.set_value();
    });
    closed.get_future().wait();
  }

  void Stop() override {
    for (auto& io : io_) io->loop->Stop();
  }

  void CheckDeadlines() override {
    std::vector<std::future<void>> done;
    for (auto& io : io_) {
      auto checked = std::make_shared<std::promise<void>>();
      done.push_back(checked->get_future());
      io->loop->Post([&plain = *io, checked] {
        plain.CheckDeadlines();
        checked->set_value();
      });
    }
    for (auto& each : done) each.wait();
  }

 private:
  // Edge-triggered: accepts until none is left.
  void OnEvents(uint32_t) override {
    while (listener_ >= 0) {
      const int fd = AcceptNext(listener_, stalled_, core_.options().name);
      if (fd < 0) return;
      std::optional<ConnectionSlot> slot = core_.OpenConnection();
      if (!slot) {
        RefuseConnection(fd);
        continue;
      }
      const int on = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
      PlainIo& target = *io_[next_io_];
      next_io_ = (next_io_ + 1) % io_.size();
      // Made here, so that the socket is closed even if the target loop has stopped.
      auto connection = std::make_shared<PlainConnection>(fd, core_, target, std::move(*slot));
      target.loop->Dispatch([connection = std::move(connection)] { connection->Open(); });
    }
  }

  // Over max_connections: a 503 and the end, without a connection object. What the client has
  // sent already is read and dropped first, so the close does not reset the connection before
  // the client reads the answer.
  static void RefuseConnection(int fd) {
    static const std::string kAnswer = [] {
      std::string head;
      HttpResponse response =
          ErrorResponse(503, "too many open connections; retry later (--http-max-connections)");
      response.headers.emplace_back("Retry-After", "1");
      FormatHead(response, 11, /*keep_alive=*/false, head);
      return head + response.body;
    }();
    [[maybe_unused]] const ssize_t sent =
        ::send(fd, kAnswer.data(), kAnswer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    ::shutdown(fd, SHUT_WR);
    std::array<char, 4096> drained;
    while (::recv(fd, drained.data(), drained.size(), MSG_DONTWAIT) > 0) {
    }
    ::close(fd);
  }

  HttpCore& core_;
  std::vector<std::unique_ptr<PlainIo>> io_;
  int listener_ = -1;
  size_t next_io_ = 0;    // only touched on the first loop
  bool stalled_ = false;  // accept failed with connections waiting (out of descriptors)
};

}  // namespace

Result<std::unique_ptr<HttpEngine>> MakePlainEngine(HttpCore& core, size_t threads) {
  std::vector<std::unique_ptr<PlainIo>> io;
  for (size_t i = 0; i < threads; ++i) {
    io.push_back(std::make_unique<PlainIo>(core));
    PlainIo& plain = *io.back();
    ASSIGN_OR_RETURN(plain.loop, EventLoop::Create());
    plain.gate = std::make_shared<IoGate>(
        [loop = plain.loop.get()](UniqueFunction<void()> task) { loop->Post(std::move(task)); });
    plain.loop->AtBatchEnd([&plain] { plain.SendAnswers(); });
    // Connections past their deadline are closed: waiting for a request or the rest of its
    // body, for their client to take an answer, or lingering after a refusal.
    plain.loop->Every(std::chrono::seconds(1), [&plain] { plain.CheckDeadlines(); });
  }
  return std::unique_ptr<HttpEngine>(new PlainEngine(core, std::move(io)));
}

}  // namespace rampart::net
