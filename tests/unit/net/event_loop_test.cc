#include "net/event_loop.h"

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace rampart::net {
namespace {

class LoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loop = EventLoop::Create();
    ASSERT_TRUE(loop.ok()) << loop.status().ToString();
    loop_ = std::move(loop).value();
  }
  void StartThread() {
    thread_ = std::thread([this] { loop_->Run(); });
    // Runs once the loop is up.
    std::promise<void> running;
    loop_->Post([&running] { running.set_value(); });
    running.get_future().wait();
  }
  void TearDown() override {
    loop_->Stop();
    if (thread_.joinable()) thread_.join();
  }

  std::unique_ptr<EventLoop> loop_;
  std::thread thread_;
};

TEST_F(LoopTest, PostedTasksRunOnTheLoopThreadInOrder) {
  StartThread();
  std::vector<int> order;
  std::promise<std::thread::id> ran_on;
  for (int i = 0; i < 100; ++i) loop_->Post([&order, i] { order.push_back(i); });
  loop_->Post([&ran_on] { ran_on.set_value(std::this_thread::get_id()); });
  EXPECT_EQ(ran_on.get_future().get(), thread_.get_id());
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

TEST_F(LoopTest, DispatchRunsAtOnceOnlyOnTheLoopThread) {
  StartThread();
  EXPECT_FALSE(loop_->InThisThread());
  std::promise<std::pair<bool, bool>> result;
  loop_->Post([this, &result] {
    bool inline_ran = false;
    loop_->Dispatch([&inline_ran] { inline_ran = true; });
    result.set_value({loop_->InThisThread(), inline_ran});  // ran before Dispatch returned
  });
  const auto [in_thread, inline_ran] = result.get_future().get();
  EXPECT_TRUE(in_thread);
  EXPECT_TRUE(inline_ran);
}

TEST_F(LoopTest, PostsFromManyThreadsAllRun) {
  StartThread();
  std::atomic<int> ran{0};
  std::vector<std::thread> posters;
  for (int t = 0; t < 4; ++t) {
    posters.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) loop_->Post([&ran] { ran.fetch_add(1); });
    });
  }
  for (auto& poster : posters) poster.join();
  std::promise<int> seen;
  loop_->Post([&] { seen.set_value(ran.load()); });
  EXPECT_EQ(seen.get_future().get(), 4000);
}

// Counts the events of one socket pair's end and reads what arrived.
class Reader final : public EventLoop::Watcher {
 public:
  explicit Reader(int fd) : fd_(fd) {}
  void OnEvents(uint32_t events) override {
    if (!(events & EPOLLIN)) return;
    char buffer[64];
    ssize_t n;
    while ((n = ::recv(fd_, buffer, sizeof(buffer), MSG_DONTWAIT)) > 0) {
      received.append(buffer, static_cast<size_t>(n));
    }
    if (received.size() >= expected && !done) {
      done = true;
      finished.set_value();
    }
  }
  int fd_;
  std::string received;
  size_t expected = 0;
  bool done = false;
  std::promise<void> finished;
};

TEST_F(LoopTest, WatchedDescriptorsGetTheirEvents) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
  Reader reader(fds[0]);
  reader.expected = 10;
  ASSERT_TRUE(loop_->Add(fds[0], EPOLLIN | EPOLLET, &reader).ok());
  StartThread();
  ASSERT_EQ(::write(fds[1], "hello", 5), 5);
  ASSERT_EQ(::write(fds[1], "world", 5), 5);
  ASSERT_EQ(reader.finished.get_future().wait_for(std::chrono::seconds(10)),
            std::future_status::ready);
  std::promise<std::string> got;
  loop_->Post([&] { got.set_value(reader.received); });
  EXPECT_EQ(got.get_future().get(), "helloworld");
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST_F(LoopTest, TicksComeAboutEveryPeriod) {
  std::atomic<int> ticks{0};
  std::promise<void> third;
  const auto started = std::chrono::steady_clock::now();
  loop_->Every(std::chrono::milliseconds(5), [&] {
    if (ticks.fetch_add(1) == 2) third.set_value();
  });
  StartThread();
  ASSERT_EQ(third.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(15));
}

TEST_F(LoopTest, TheBatchEndHookRunsOnceATurnAfterItsTasks) {
  // Tasks posted before Run are one turn's work: the hook sees all of them done, once.
  std::vector<std::string> order;
  loop_->AtBatchEnd([&] {
    if (!order.empty() && order.back() != "end") order.push_back("end");
  });
  loop_->Post([&] { order.push_back("a"); });
  loop_->Post([&] {
    order.push_back("b");
    // Posted from the loop thread while its turn runs: the next turn's work.
    loop_->Post([&] {
      order.push_back("c");
      loop_->Stop();
    });
  });
  loop_->Run();  // on this thread: returns after the turn that stopped it, hook included
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b", "end", "c", "end"}));
}

TEST_F(LoopTest, TasksPostedAfterStopAreDestroyedWithoutRunning) {
  StartThread();
  loop_->Stop();
  thread_.join();
  auto token = std::make_shared<int>(0);
  bool ran = false;
  loop_->Post([token, &ran] { ran = true; });
  EXPECT_FALSE(ran);
  EXPECT_EQ(token.use_count(), 1);  // the task is gone
  EXPECT_FALSE(loop_->InThisThread());
}

}  // namespace
}  // namespace rampart::net
