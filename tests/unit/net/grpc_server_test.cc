// The native gRPC transport (net/grpc_server.h) on its own, with gRPC's C++ client: deadlines,
// paused reading, the reading budget, and its small parsers.

#include "net/grpc_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <mutex>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

namespace rampart::net {
namespace {

using namespace std::chrono_literals;

TEST(GrpcTimeoutTest, ParsesEveryUnitAndRefusesTheRest) {
  EXPECT_EQ(ParseGrpcTimeout("1S"), std::chrono::seconds(1));
  EXPECT_EQ(ParseGrpcTimeout("100m"), std::chrono::milliseconds(100));
  EXPECT_EQ(ParseGrpcTimeout("30u"), std::chrono::microseconds(30));
  EXPECT_EQ(ParseGrpcTimeout("5n"), std::chrono::nanoseconds(5));
  EXPECT_EQ(ParseGrpcTimeout("2M"), std::chrono::minutes(2));
  EXPECT_EQ(ParseGrpcTimeout("1H"), std::chrono::hours(1));
  EXPECT_EQ(ParseGrpcTimeout("99999999S"), std::chrono::seconds(99999999));
  for (const char* bad : {"", "S", "1", "1s", "-1S", "123456789S", "1.5S", "1 S"}) {
    EXPECT_FALSE(ParseGrpcTimeout(bad).has_value()) << bad;
  }
}

TEST(GrpcMessageTest, PercentEncodesOutsidePrintableAscii) {
  EXPECT_EQ(PercentEncodeGrpcMessage("plain text: ok"), "plain text: ok");
  EXPECT_EQ(PercentEncodeGrpcMessage("100% \n\xc3\xa9"), "100%25 %0A%C3%A9");
}

// A service whose handlers the test drives: each call's messages are recorded, and the test
// answers through the call.
class Recorder {
 public:
  struct Seen {
    std::shared_ptr<GrpcCall> call;
    std::vector<std::string> messages;
    bool half_closed = false;
    bool cancelled = false;
  };

  GrpcService Service(bool pause_after_first) {
    return [this, pause_after_first](std::shared_ptr<GrpcCall> call) {
      std::lock_guard lock(mutex_);
      seen_.push_back({call, {}, false, false});
      changed_.notify_all();
      return std::make_unique<Handler>(*this, seen_.size() - 1, pause_after_first);
    };
  }

  // Waits until `done(seen)` holds for call `index`; false after 10 s.
  template <typename Done>
  bool WaitFor(size_t index, Done done) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, 10s, [&] { return index < seen_.size() && done(seen_[index]); });
  }
  Seen Snapshot(size_t index) {
    std::lock_guard lock(mutex_);
    return seen_.at(index);
  }

 private:
  class Handler final : public GrpcCallHandler {
   public:
    Handler(Recorder& recorder, size_t index, bool pause_after_first)
        : recorder_(recorder), index_(index), pause_after_first_(pause_after_first) {}
    void OnMessage(std::string message) override {
      std::lock_guard lock(recorder_.mutex_);
      Seen& seen = recorder_.seen_[index_];
      seen.messages.push_back(std::move(message));
      if (pause_after_first_ && seen.messages.size() == 1) seen.call->PauseReading();
      recorder_.changed_.notify_all();
    }
    void OnHalfClose() override {
      std::lock_guard lock(recorder_.mutex_);
      recorder_.seen_[index_].half_closed = true;
      recorder_.changed_.notify_all();
    }
    void OnCancel() override {
      std::lock_guard lock(recorder_.mutex_);
      recorder_.seen_[index_].cancelled = true;
      recorder_.changed_.notify_all();
    }

   private:
    Recorder& recorder_;
    const size_t index_;
    const bool pause_after_first_;
  };

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Seen> seen_;  // guarded by mutex_
};

class GrpcServerTest : public ::testing::Test {
 protected:
  void Start(GrpcServerOptions options, bool pause_after_first = false) {
    options.threads = 1;
    Result<Listener> listener = Listener::Open("127.0.0.1", 0);
    ASSERT_TRUE(listener.ok()) << listener.status().ToString();
    auto started = GrpcServer::Start(options, recorder_.Service(pause_after_first),
                                     std::move(listener).value());
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    server_ = std::move(started).value();
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                   grpc::InsecureChannelCredentials());
  }

  Recorder recorder_;
  std::unique_ptr<GrpcServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

// Runs one client-streaming call sending `messages` (then half-closing) on a background thread;
// its status comes through the future. `written` (optional) is set once the client has handed
// every message and its half-close to its transport.
std::future<grpc::Status> CallAsync(const std::shared_ptr<grpc::Channel>& channel,
                                    std::vector<std::string> messages,
                                    std::chrono::milliseconds deadline,
                                    std::promise<void>* written = nullptr) {
  return std::async(std::launch::async,
                    [channel, messages = std::move(messages), deadline, written] {
                      grpc::GenericStub stub(channel);
                      grpc::ClientContext context;
                      context.set_deadline(std::chrono::system_clock::now() + deadline);
                      grpc::CompletionQueue queue;
                      auto call = stub.PrepareCall(&context, "/test.Service/Method", &queue);
                      void* tag = nullptr;
                      bool ok = false;
                      call->StartCall(reinterpret_cast<void*>(1));
                      queue.Next(&tag, &ok);
                      for (const std::string& message : messages) {
                        grpc::Slice slice(message);
                        grpc::ByteBuffer buffer(&slice, 1);
                        call->Write(buffer, reinterpret_cast<void*>(2));
                        queue.Next(&tag, &ok);
                        if (!ok) break;
                      }
                      call->WritesDone(reinterpret_cast<void*>(3));
                      queue.Next(&tag, &ok);
                      if (written != nullptr) written->set_value();
                      // Every answer is read before the status can come.
                      grpc::ByteBuffer response;
                      do {
                        call->Read(&response, reinterpret_cast<void*>(5));
                      } while (queue.Next(&tag, &ok) && ok);
                      grpc::Status status;
                      call->Finish(&status, reinterpret_cast<void*>(4));
                      while (queue.Next(&tag, &ok) && tag != reinterpret_cast<void*>(4)) {
                      }
                      queue.Shutdown();
                      while (queue.Next(&tag, &ok)) {
                      }
                      return status;
                    });
}

TEST_F(GrpcServerTest, ACallPastItsDeadlineIsCancelledOnTheServer) {
  Start(GrpcServerOptions{});
  std::future<grpc::Status> status = CallAsync(channel_, {"ping"}, 100ms);
  EXPECT_EQ(status.get().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // The handler never answered: the server cancels the call at its deadline.
  EXPECT_TRUE(recorder_.WaitFor(0, [](const Recorder::Seen& seen) { return seen.cancelled; }));
  EXPECT_TRUE(recorder_.Snapshot(0).call->cancelled());
  EXPECT_EQ(server_->stats().cancelled_calls, 1u);
}

TEST_F(GrpcServerTest, APausedCallGetsNoMoreMessagesUntilResumed) {
  Start(GrpcServerOptions{}, /*pause_after_first=*/true);
  std::vector<std::string> messages;
  for (int i = 0; i < 8; ++i)
    messages.push_back(std::string(100 * 1024, static_cast<char>('a' + i)));
  std::promise<void> written;
  std::future<grpc::Status> status = CallAsync(channel_, messages, 10s, &written);
  ASSERT_TRUE(
      recorder_.WaitFor(0, [](const Recorder::Seen& seen) { return !seen.messages.empty(); }));
  // The client has sent everything (it fits the stream's window); paused, the handler has had
  // one message and no half-close.
  written.get_future().wait();
  EXPECT_EQ(recorder_.Snapshot(0).messages.size(), 1u);
  EXPECT_FALSE(recorder_.Snapshot(0).half_closed);
  recorder_.Snapshot(0).call->ResumeReading();
  ASSERT_TRUE(recorder_.WaitFor(0, [](const Recorder::Seen& seen) { return seen.half_closed; }));
  const Recorder::Seen seen = recorder_.Snapshot(0);
  EXPECT_EQ(seen.messages, messages);
  seen.call->Finish(GrpcCode::kOk);
  EXPECT_TRUE(status.get().ok());
}

TEST_F(GrpcServerTest, MessagesPastTheReadingBudgetAreRefused) {
  GrpcServerOptions options;
  options.max_reading_bytes = 1000;
  Start(options);
  std::future<grpc::Status> status = CallAsync(channel_, {std::string(2000, 'x')}, 10s);
  const grpc::Status refused = status.get();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(refused.error_message().find("limit 1000 bytes"), std::string::npos)
      << refused.error_message();
  // A message that fits is read.
  std::future<grpc::Status> small = CallAsync(channel_, {std::string(500, 'y')}, 10s);
  ASSERT_TRUE(recorder_.WaitFor(1, [](const Recorder::Seen& seen) { return seen.half_closed; }))
      << recorder_.Snapshot(0).messages.size() << " " << recorder_.Snapshot(0).half_closed;
  recorder_.Snapshot(1).call->FinishWith(GrpcOutMessage::Of("answer"));
  const grpc::Status answered = small.get();
  EXPECT_TRUE(answered.ok()) << answered.error_code() << ": " << answered.error_message();
}

TEST_F(GrpcServerTest, AConnectionThatNeverStartsHttp2IsClosed) {
  GrpcServerOptions options;
  options.handshake_timeout = std::chrono::seconds(1);
  Start(options);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(server_->port());
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  // Sends nothing; the server (after its own SETTINGS frame) closes it a second or two later: a
  // read finds the end, not the 10 s receive timeout.
  const timeval wait{.tv_sec = 10, .tv_usec = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
  const auto start = std::chrono::steady_clock::now();
  char buffer[256];
  ssize_t got = 0;
  while ((got = ::recv(fd, buffer, sizeof(buffer), 0)) > 0) {
  }
  EXPECT_EQ(got, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 8s);
  ::close(fd);
}

}  // namespace
}  // namespace rampart::net
