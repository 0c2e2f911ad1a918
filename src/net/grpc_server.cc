// gRPC over nghttp2 on Rampart's event loops (see grpc_server.h): the listener, the I/O threads
// and shutdown. The connections and their calls are in grpc_connection.cc.

#include "net/grpc_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "core/cpu_affinity.h"
#include "core/exceptions.h"
#include "core/logging.h"
#include "core/thread_name.h"
#include "net/accept.h"
#include "net/event_loop.h"
#include "net/grpc_connection.h"
#include "net/grpc_tls.h"
#include "net/local_port.h"

namespace rampart::net {
namespace {

// How often an I/O thread looks for calls past their deadlines.
constexpr std::chrono::milliseconds kDeadlineTick{10};

}  // namespace

void GrpcIo::SendAll() {
  for (size_t i = 0; i < unsent.size(); ++i) {
    std::shared_ptr<GrpcConnection> connection = std::move(unsent[i]);
    connection->Send();
  }
  unsent.clear();
}

void GrpcIo::CheckStarted() {
  const SteadyTime now = Clock::Coarse().Now();
  // A copy: a connection that closes leaves `open`.
  std::vector<std::shared_ptr<GrpcConnection>> connections;
  connections.reserve(open.size());
  for (const auto& entry : open) connections.push_back(entry.second);
  for (const auto& connection : connections) connection->CheckStarted(now);
}

void GrpcIo::ExpireDeadlines() {
  if (deadlines.empty()) return;
  const SteadyTime now = Clock::Real().Now();
  while (!deadlines.empty() && deadlines.begin()->first <= now) {
    // Expire takes the entry out (the call ends); an entry of a connection already gone is
    // taken out here.
    const auto [connection, stream_id] = deadlines.begin()->second;
    if (auto alive = connection.lock(); alive != nullptr && alive->Expire(stream_id)) continue;
    deadlines.erase(deadlines.begin());
  }
}

struct GrpcServer::Impl final : public EventLoop::Watcher {
  Impl(const GrpcServerOptions& options, GrpcService service, std::shared_ptr<SSL_CTX> tls)
      : shared_owned(std::make_shared<GrpcShared>(options, std::move(service), std::move(tls))),
        shared(*shared_owned) {}
  ~Impl() override {
    if (listener >= 0) ::close(listener);
  }

  // Edge-triggered: accepts until none is left; connections go to the loops in turn.
  void OnEvents(uint32_t) override {
    while (listener >= 0) {
      const int fd = AcceptNext(listener, stalled, shared.options.name);
      if (fd < 0) return;
      const size_t limit = shared.options.max_connections;
      if (limit > 0 && shared.open_connections.load(std::memory_order_relaxed) >= limit) {
        shared.refused_connections.fetch_add(1, std::memory_order_relaxed);
        ::close(fd);
        continue;
      }
      const int on = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
      GrpcIo& target = *io[next_io];
      next_io = (next_io + 1) % io.size();
      auto connection = std::make_shared<GrpcConnection>(fd, target, shared_owned);
      target.loop->Dispatch([connection = std::move(connection)] { connection->Open(); });
    }
  }

  // Runs `task(io)` on every I/O thread and waits for all.
  template <typename Task>
  void OnEveryThread(Task task) {
    std::vector<std::future<void>> done;
    for (auto& each : io) {
      auto ran = std::make_shared<std::promise<void>>();
      done.push_back(ran->get_future());
      each->loop->Post([&each = *each, ran, &task] {
        RunLoggingExceptions("a gRPC I/O task", [&] { task(each); });
        ran->set_value();
      });
    }
    for (auto& each : done) each.wait();
  }

  const std::shared_ptr<GrpcShared> shared_owned;  // also held by every connection
  GrpcShared& shared;
  std::vector<std::unique_ptr<GrpcIo>> io;
  std::vector<std::thread> threads;
  int listener = -1;
  size_t next_io = 0;
  bool stalled = false;
  bool accepting = true;
  bool shut_down = false;
};

Result<std::unique_ptr<GrpcServer>> GrpcServer::Start(const GrpcServerOptions& options,
                                                      GrpcService service, Listener listener) {
  std::shared_ptr<SSL_CTX> tls;
  if (options.tls) {
    ASSIGN_OR_RETURN(tls, MakeGrpcTlsContext(*options.tls));
  }
  auto impl = std::make_unique<Impl>(options, std::move(service), std::move(tls));
  const size_t threads = options.threads > 0 ? static_cast<size_t>(options.threads)
                                             : static_cast<size_t>(UsableCpuCount());
  for (size_t i = 0; i < threads; ++i) {
    auto io = std::make_unique<GrpcIo>(impl->shared);
    ASSIGN_OR_RETURN(io->loop, EventLoop::Create());
    EventLoop* loop = io->loop.get();
    io->gate = std::make_shared<IoGate>(
        [loop](UniqueFunction<void()> task) { loop->Post(std::move(task)); });
    GrpcIo* raw = io.get();
    loop->AtBatchEnd([raw] { raw->SendAll(); });
    loop->Every(kDeadlineTick, [raw] { raw->ExpireDeadlines(); });
    loop->Every(std::chrono::seconds(1), [raw] { raw->CheckStarted(); });
    impl->io.push_back(std::move(io));
  }
  if (!listener.open()) return InvalidArgument("{}: no listening socket", options.name);
  impl->listener = listener.Release();
  const uint16_t port = LocalPort(impl->listener);
  RETURN_IF_ERROR(impl->io[0]->loop->Add(impl->listener, EPOLLIN | EPOLLET, impl.get()));
  Impl* raw = impl.get();
  impl->io[0]->loop->Every(std::chrono::seconds(1), [raw] {
    if (raw->stalled) raw->OnEvents(EPOLLIN);
  });
  for (size_t i = 0; i < threads; ++i) {
    impl->threads.emplace_back([raw, i, name = fmt::format("{}-io-{}", options.name, i)] {
      NameThisThread(name);
      if (Status pinned = PinThisThread(raw->shared.options.cpus); !pinned.ok()) {
        LOG_WARN("{}: {}", name, pinned.message());
      }
      if (raw->shared.options.sched_batch) {
        if (Status batch = UseBatchScheduling(); !batch.ok()) {
          LOG_WARN("{}: {}", name, batch.message());
        }
      }
      raw->io[i]->loop->Run();
    });
  }
  return std::unique_ptr<GrpcServer>(new GrpcServer(std::move(impl), port));
}

GrpcServer::GrpcServer(std::unique_ptr<Impl> impl, uint16_t port)
    : impl_(std::move(impl)), port_(port) {}

GrpcServer::~GrpcServer() { Shutdown(std::chrono::milliseconds(0)); }

GrpcServer::Stats GrpcServer::stats() const {
  const GrpcShared& shared = impl_->shared;
  return Stats{.calls = shared.calls.load(std::memory_order_relaxed),
               .cancelled_calls = shared.cancelled_calls.load(std::memory_order_relaxed),
               .open_connections = shared.open_connections.load(std::memory_order_relaxed),
               .refused_connections = shared.refused_connections.load(std::memory_order_relaxed)};
}

void GrpcServer::StopAccepting() {
  if (!impl_->accepting) return;
  impl_->accepting = false;
  impl_->shared.stopping.store(true);
  Impl* impl = impl_.get();
  impl_->OnEveryThread([impl](GrpcIo& io) {
    if (&io == impl->io[0].get() && impl->listener >= 0) {
      ::close(impl->listener);  // also ends its registration
      impl->listener = -1;
    }
    std::vector<std::shared_ptr<GrpcConnection>> open;
    for (const auto& entry : io.open) open.push_back(entry.second);
    for (const auto& connection : open) connection->GoAway();
  });
}

void GrpcServer::Shutdown(std::chrono::milliseconds timeout) {
  if (impl_->shut_down) return;
  StopAccepting();
  impl_->shut_down = true;
  impl_->shared.WaitIdle(timeout);
  // Calls still open are cancelled, their connections closed.
  impl_->OnEveryThread([](GrpcIo& io) {
    std::vector<std::shared_ptr<GrpcConnection>> open;
    for (const auto& entry : io.open) open.push_back(entry.second);
    for (const auto& connection : open) connection->Close();
  });
  for (auto& io : impl_->io) io->loop->Stop();
  for (std::thread& thread : impl_->threads) thread.join();
  for (auto& io : impl_->io) {
    io->gate->Close();
    io->unsent.clear();
    io->deadlines.clear();
    io->open.clear();
  }
}

}  // namespace rampart::net
