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
  connection.client.reset(socket(AF_INET, SOCK_STREAM, 0));
  ASSERT_EQ(connect(connection.client.get(), reinterpret_cast<sockaddr*>(&address), length), 0);
  connection.accepted.reset(accept(connection.listener.get(), nullptr, nullptr));
  ASSERT_GE(connection.accepted.get(), 0);
}

int Corked(int fd) {
  int value = -1;
  socklen_t length = sizeof(value);
  EXPECT_EQ(getsockopt(fd, IPPROTO_TCP, TCP_CORK, &value, &length), 0);
  return value;
}

bool Found(const SocketCork& cork, int fd) {
  return std::find(cork.sockets().begin(), cork.sockets().end(), fd) != cork.sockets().end();
}

TEST(SocketCorkTest, CorksOnlyTheConnectionsAcceptedOnThePort) {
  Connection grpc;
  Connection other;
  ASSERT_NO_FATAL_FAILURE(Connect(grpc));
  ASSERT_NO_FATAL_FAILURE(Connect(other));
  SocketCork cork(grpc.port);
  cork.Cork();
  EXPECT_TRUE(Found(cork, grpc.accepted.get()));
  EXPECT_FALSE(Found(cork, grpc.listener.get()));
  EXPECT_FALSE(Found(cork, grpc.client.get()));  // its local port is an ephemeral one
  EXPECT_FALSE(Found(cork, other.accepted.get()));
  EXPECT_EQ(Corked(grpc.accepted.get()), 1);
  EXPECT_EQ(Corked(other.accepted.get()), 0);
  EXPECT_EQ(Corked(grpc.client.get()), 0);
  cork.Uncork();
  EXPECT_EQ(Corked(grpc.accepted.get()), 0);
}

TEST(SocketCorkTest, UncorkingSendsWhatWasWrittenMeanwhile) {
  Connection grpc;
  ASSERT_NO_FATAL_FAILURE(Connect(grpc));
  SocketCork cork(grpc.port);
  cork.Cork();
  const std::string answer = "answer";
  ASSERT_EQ(write(grpc.accepted.get(), answer.data(), answer.size()),
            static_cast<ssize_t>(answer.size()));
  cork.Uncork();
  pollfd readable{.fd = grpc.client.get(), .events = POLLIN, .revents = 0};
  ASSERT_EQ(poll(&readable, 1, 10'000), 1);
  std::string received(answer.size(), '\0');
  EXPECT_EQ(read(grpc.client.get(), received.data(), received.size()),
            static_cast<ssize_t>(answer.size()));
  EXPECT_EQ(received, answer);
}

TEST(SocketCorkTest, FindsConnectionsAcceptedAfterItsLastLook) {
  Connection first;
  ASSERT_NO_FATAL_FAILURE(Connect(first));
  SocketCork cork(first.port, std::chrono::seconds(0));  // looks again at every Cork
  cork.Cork();
  cork.Uncork();
  EXPECT_EQ(cork.sockets().size(), 1u);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(first.port));
  Fd client(socket(AF_INET, SOCK_STREAM, 0));
  ASSERT_EQ(connect(client.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  Fd accepted(accept(first.listener.get(), nullptr, nullptr));
  ASSERT_GE(accepted.get(), 0);
  cork.Cork();
  EXPECT_TRUE(Found(cork, accepted.get()));
  EXPECT_EQ(Corked(accepted.get()), 1);
}

TEST(SocketCorkTest, DestructionUncorks) {
  Connection grpc;
  ASSERT_NO_FATAL_FAILURE(Connect(grpc));
  {
    SocketCork cork(grpc.port);
    cork.Cork();
    EXPECT_EQ(Corked(grpc.accepted.get()), 1);
  }
  EXPECT_EQ(Corked(grpc.accepted.get()), 0);
}

TEST(SocketCorkTest, PortZeroCorksNothing) {
  Connection grpc;
  ASSERT_NO_FATAL_FAILURE(Connect(grpc));
  SocketCork cork(0);
  cork.Cork();
  EXPECT_TRUE(cork.sockets().empty());
  EXPECT_EQ(Corked(grpc.accepted.get()), 0);
}

class GrpcCorkTest : public GrpcTest {
 protected:
  GrpcCorkTest() { cork_writes_ = true; }
};

TEST_F(GrpcCorkTest, ManyCallsInFlightAreAllAnswered) {
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

}  // namespace
}  // namespace rampart::api
