// SocketCork: the gRPC front end's write coalescing corks the TCP connections accepted on the
// gRPC port, and only those, and uncorking sends what was written meanwhile; a server that corks
// (KServeGrpcOptions::cork_writes) answers every call of many in flight.

#include "api/kserve_grpc_cork.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "grpc_test_fixture.h"

namespace rampart::api {
namespace {

using grpc_calls::SocketCork;

// A file descriptor closed when it goes.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void reset(int fd) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

// A loopback listener on an ephemeral port, with one connection accepted.
struct Connection {
  Fd listener;
  Fd client;
  Fd accepted;
  int port = 0;
};

// A connection to `connection`'s listener: its client end and the end accepted.
void ConnectAgain(const Connection& connection, Fd& client, Fd& accepted) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(connection.port));
  client.reset(socket(AF_INET, SOCK_STREAM, 0));
  ASSERT_EQ(connect(client.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  accepted.reset(accept(connection.listener.get(), nullptr, nullptr));
  ASSERT_GE(accepted.get(), 0);
}

void Connect(Connection& connection) {
  connection.listener.reset(socket(AF_INET, SOCK_STREAM, 0));
  ASSERT_GE(connection.listener.get(), 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(bind(connection.listener.get(), reinterpret_cast<sockaddr*>(&address), length), 0);
  ASSERT_EQ(listen(connection.listener.get(), 4), 0);
  ASSERT_EQ(getsockname(connection.listener.get(), reinterpret_cast<sockaddr*>(&address), &length),
            0);
  connection.port = ntohs(address.sin_port);
  ASSERT_NO_FATAL_FAILURE(ConnectAgain(connection, connection.client, connection.accepted));
}

int Corked(int fd) {
  int value = -1;
  socklen_t length = sizeof(value);
  EXPECT_EQ(getsockopt(fd, IPPROTO_TCP, TCP_CORK, &value, &length), 0);
  return value;
}

// A bound the flusher never reaches in a test: the state the test sets stays.
constexpr auto kNoBound = std::chrono::hours(1);

// Waits up to `timeout` for `fd` to be readable; how long it took, or nothing.
std::optional<std::chrono::steady_clock::duration> WaitReadable(int fd,
                                                                std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  pollfd readable{.fd = fd, .events = POLLIN, .revents = 0};
  if (poll(&readable, 1, static_cast<int>(timeout.count())) != 1) return std::nullopt;
  return std::chrono::steady_clock::now() - start;
}

void Write(int fd, const std::string& text) {
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
}

TEST(SocketCorkTest, CorksOnlyTheConnectionsAcceptedOnThePort) {
  Connection grpc;
  Connection other;
  ASSERT_NO_FATAL_FAILURE(Connect(grpc));
  ASSERT_NO_FATAL_FAILURE(Connect(other));
  SocketCork cork(grpc.port, kNoBound);
  cork.Rescan();
  cork.Cork();
  EXPECT_TRUE(cork.Holds(grpc.accepted.get()));
  EXPECT_EQ(cork.socket_count(), 1u);
  EXPECT_FALSE(cork.Holds(grpc.listener.get()));
  EXPECT_FALSE(cork.Holds(grpc.client.get()));  // its local port is an ephemeral one
  EXPECT_FALSE(cork.Holds(other.accepted.get()));
  EXPECT_EQ(Corked(grpc.accepted.get()), 1);
  EXPECT_EQ(Corked(other.accepted.get()), 0);
  EXPECT_EQ(Corked(grpc.client.get()), 0);
  cork.Uncork();
  EXPECT_EQ(Corked(grpc.accepted.get()), 0);
}

TEST(SocketCorkTest, CorksNothingPastTheConnectionLimit) {
  Connection grpc;
  ASSERT_NO_FATAL_FAILURE(Connect(grpc));
  Fd client;
  Fd accepted;
  ASSERT_NO_FATAL_FAILURE(ConnectAgain(grpc, client, accepted));  // a second connection

  SocketCork limited(grpc.port, kNoBound, std::chrono::seconds(1), /*max_connections=*/1);
  limited.Rescan();
  EXPECT_EQ(limited.socket_count(), 2u);
  EXPECT_FALSE(limited.Cork());
  EXPECT_EQ(Corked(grpc.accepted.get()), 0);
  EXPECT_EQ(Corked(accepted.get()), 0);

  SocketCork enough(grpc.port, kNoBound, std::chrono::seconds(1), /*max_connections=*/2);
  enough.Rescan();
  ASSERT_TRUE(enough.Cork());
  EXPECT_EQ(Corked(grpc.accepted.get()), 1);
  EXPECT_EQ(Corked(accepted.get()), 1);
  enough.Uncork();
  EXPECT_EQ(Corked(grpc.accepted.get()), 0);
  EXPECT_EQ(Corked(accepted.get()), 0);
}

TEST(SocketCorkTest, UncorkingSendsWhatWasWrittenMeanwhile) {
  Connection grpc;
  ASSERT_NO_FATAL_FAILURE(Connect(grpc));
  SocketCork cork(grpc.port, kNoBound);
  cork.Rescan();
  cork.Cork();
  const std::string answer = "answer";
  ASSERT_NO_FATAL_FAILURE(Write(grpc.accepted.get(), answer));
  cork.Uncork();
  ASSERT_TRUE(WaitReadable(grpc.client.get(), std::chrono::seconds(10)));
  std::string received(answer.size(), '\0');
  EXPECT_EQ(read(grpc.client.get(), received.data(), received.size()),
            static_cast<ssize_t>(answer.size()));
  EXPECT_EQ(received, answer);
}

TEST(SocketCorkTest, FlushSendsAndStaysCorked) {
  Connection grpc;
  ASSERT_NO_FATAL_FAILURE(Connect(grpc));
  SocketCork cork(grpc.port, kNoBound);
  cork.Rescan();
  cork.Cork();
  ASSERT_NO_FATAL_FAILURE(Write(grpc.accepted.get(), "first"));
  cork.Flush();
  EXPECT_TRUE(WaitReadable(grpc.client.get(), std::chrono::seconds(10)));
  EXPECT_EQ(Corked(grpc.accepted.get()), 1);
  cork.Uncork();
}

// The kernel holds a corked socket's partial segment for up to 200 ms. The queue thread that
// corked does not run here (it is this thread, waiting for the answer): the flusher must let the
// answer out after about the bound.
TEST(SocketCorkTest, AnAnswerLeavesWithinTheBoundWhileTheCorkingThreadIsStalled) {
  Connection grpc;
  ASSERT_NO_FATAL_FAILURE(Connect(grpc));
  SocketCork cork(grpc.port, std::chrono::milliseconds(1));
  cork.Rescan();
  for (int round = 0; round < 3; ++round) {
    cork.Cork();
    ASSERT_NO_FATAL_FAILURE(Write(grpc.accepted.get(), "answer"));
    // Well under the kernel's 200 ms, well over the bound (for a loaded machine).
    const auto waited = WaitReadable(grpc.client.get(), std::chrono::milliseconds(150));
    ASSERT_TRUE(waited) << "round " << round << ": the answer stayed corked";
    char received[16];
    EXPECT_EQ(read(grpc.client.get(), received, sizeof(received)), 6);
    cork.Uncork();
  }
  EXPECT_GE(cork.forced_flushes(), 3u);
}

TEST(SocketCorkTest, ADescriptorReusedByAnotherSocketIsNeverCorked) {
  Connection grpc;
  Connection other;
  ASSERT_NO_FATAL_FAILURE(Connect(grpc));
  ASSERT_NO_FATAL_FAILURE(Connect(other));
  SocketCork cork(grpc.port, kNoBound);
  cork.Rescan();
  ASSERT_TRUE(cork.Holds(grpc.accepted.get()));
  // gRPC closes the connection, and its descriptor number goes to another socket (here, a
  // connection accepted on another port) before the next look.
  const int number = grpc.accepted.get();
  ASSERT_EQ(dup2(other.accepted.get(), number), number);
  cork.Cork();
  EXPECT_EQ(Corked(number), 0);
  EXPECT_EQ(Corked(other.accepted.get()), 0);
  cork.Uncork();
  cork.Rescan();  // the closed connection is let go
  EXPECT_EQ(cork.socket_count(), 0u);
}

TEST(SocketCorkTest, FindsConnectionsAcceptedAfterItsLastLook) {
  Connection first;
  ASSERT_NO_FATAL_FAILURE(Connect(first));
  SocketCork cork(first.port, kNoBound);
  cork.Rescan();
  EXPECT_EQ(cork.socket_count(), 1u);
  Fd client;
  Fd accepted;
  ASSERT_NO_FATAL_FAILURE(ConnectAgain(first, client, accepted));
  cork.Rescan();
  EXPECT_EQ(cork.socket_count(), 2u);
  cork.Cork();
  EXPECT_TRUE(cork.Holds(accepted.get()));
  EXPECT_EQ(Corked(accepted.get()), 1);
  EXPECT_EQ(Corked(first.accepted.get()), 1);
  cork.Uncork();
}

TEST(SocketCorkTest, CorkedWhileAnyThreadIsInARound) {
  Connection grpc;
  ASSERT_NO_FATAL_FAILURE(Connect(grpc));
  SocketCork cork(grpc.port, kNoBound);
  cork.Rescan();
  cork.Cork();  // one queue thread's round
  cork.Cork();  // another's
  ASSERT_NO_FATAL_FAILURE(Write(grpc.accepted.get(), "first"));
  cork.Uncork();  // the first ends: what it wrote goes out, the other's round goes on
  EXPECT_TRUE(WaitReadable(grpc.client.get(), std::chrono::seconds(10)));
  EXPECT_EQ(Corked(grpc.accepted.get()), 1);
  cork.Uncork();
  EXPECT_EQ(Corked(grpc.accepted.get()), 0);
}

TEST(SocketCorkTest, DestructionUncorks) {
  Connection grpc;
  ASSERT_NO_FATAL_FAILURE(Connect(grpc));
  {
    SocketCork cork(grpc.port, kNoBound);
    cork.Rescan();
    cork.Cork();
    EXPECT_EQ(Corked(grpc.accepted.get()), 1);
  }
  EXPECT_EQ(Corked(grpc.accepted.get()), 0);
}

TEST(SocketCorkTest, PortZeroCorksNothing) {
  Connection grpc;
  ASSERT_NO_FATAL_FAILURE(Connect(grpc));
  SocketCork cork(0);
  cork.Rescan();
  cork.Cork();
  EXPECT_EQ(cork.socket_count(), 0u);
  EXPECT_EQ(Corked(grpc.accepted.get()), 0);
  cork.Uncork();
}

class GrpcCorkTest : public GrpcTest {
 protected:
  GrpcCorkTest() { cork_writes_ = true; }
};

TEST_P(GrpcCorkTest, ManyCallsInFlightAreAllAnswered) {
  constexpr int kClients = 8;
  constexpr int kCalls = 200;
  std::vector<std::thread> clients;
  std::vector<int> right(kClients, 0);
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      for (int call = 0; call < kCalls; ++call) {
        ModelInferResponse response;
        const grpc::Status status = Infer(AddRequest({call}, {i}, /*raw=*/true), response);
        if (status.ok() && response.raw_output_contents_size() == 2 &&
            FromBytes<int32_t>(response.raw_output_contents(0)) == std::vector<int32_t>{call + i}) {
          ++right[i];
        }
      }
    });
  }
  for (std::thread& client : clients) client.join();
  for (int i = 0; i < kClients; ++i) EXPECT_EQ(right[i], kCalls) << "client " << i;
}

// The queue thread corks, then stalls (the hook stands for a thread preempted there); an answer
// that an instance thread writes meanwhile must still reach the client within about the bound,
// not after the kernel's 200 ms.
TEST_P(GrpcCorkTest, AnAnswerLeavesWhileTheCorkingThreadIsStalled) {
  // A second server (the fixture's has no hook), on the same InferenceServer.
  std::mutex mutex;
  std::condition_variable changed;
  bool stalled = false;   // guarded by mutex
  bool released = false;  // guarded by mutex
  KServeGrpcOptions options = Options();
  options.cork_writes = true;
  options.after_cork = [&] {
    std::unique_lock lock(mutex);
    if (stalled) return;  // once
    stalled = true;
    changed.notify_all();
    changed.wait(lock, [&] { return released; });
  };
  auto started = KServeGrpc::Start(*server_, options);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  std::unique_ptr<KServeGrpc> grpc = std::move(started).value();
  const auto release = [&] {
    std::lock_guard lock(mutex);
    released = true;
    changed.notify_all();
  };
  auto stub = GRPCInferenceService::NewStub(
      grpc::CreateChannel(Target(grpc->port()), grpc::InsecureChannelCredentials()));

  // Calls to `gate` in a burst, until the queue thread takes enough of them in a row to cork.
  struct Call {
    grpc::ClientContext context;
    ModelInferRequest request;
    ModelInferResponse response;
    grpc::Status status;
  };
  std::vector<std::unique_ptr<Call>> calls;
  std::vector<std::chrono::steady_clock::time_point> answered;  // guarded by mutex
  int completed = 0;                                            // guarded by mutex
  const auto start_burst = [&] {
    for (int i = 0; i < 32; ++i) {
      auto call = std::make_unique<Call>();
      call->context.set_deadline(Deadline());
      call->request = GateRequest("gate", static_cast<int32_t>(calls.size()));
      Call* raw = call.get();
      calls.push_back(std::move(call));
      stub->async()->ModelInfer(&raw->context, &raw->request, &raw->response,
                                [&, raw](grpc::Status status) {
                                  std::lock_guard lock(mutex);
                                  raw->status = std::move(status);
                                  answered.push_back(std::chrono::steady_clock::now());
                                  ++completed;
                                  changed.notify_all();
                                });
    }
  };
  bool corked = false;
  for (int burst = 0; burst < 20 && !corked; ++burst) {
    start_burst();
    std::unique_lock lock(mutex);
    corked = changed.wait_for(lock, 500ms, [&] { return stalled; });
  }
  if (!corked) release();
  ASSERT_TRUE(corked) << "the queue thread never corked";
  // The instance threads hold the calls that reached them; one is released and answers from
  // its instance thread while the queue thread stays stalled.
  ASSERT_TRUE(gate_.WaitEntered(1));
  const auto released_at = std::chrono::steady_clock::now();
  gate_.Release(gate_.entered().front());
  bool answered_in_time = false;
  {
    std::unique_lock lock(mutex);
    answered_in_time = changed.wait_for(lock, 150ms, [&] { return completed > 0; });
  }
  release();
  gate_.Open();
  {
    std::unique_lock lock(mutex);
    ASSERT_TRUE(
        changed.wait_for(lock, 10s, [&] { return completed == static_cast<int>(calls.size()); }));
  }
  EXPECT_TRUE(answered_in_time) << "the answer stayed corked while the queue thread was stalled";
  if (answered_in_time) {
    std::lock_guard lock(mutex);
    EXPECT_LT(answered.front() - released_at, 150ms);
  }
  for (const auto& call : calls) EXPECT_TRUE(call->status.ok()) << call->status.error_message();
  grpc->StopServing();
}

// Corking is gRPC core's engine's.
INSTANTIATE_TEST_SUITE_P(Engines, GrpcCorkTest, ::testing::Values(GrpcEngine::kCore), EngineName);

}  // namespace
}  // namespace rampart::api
