#pragma once

// What HttpClient's tests share: a recording sink, request makers, and a fixture with a client
// and a FakeUpstream.

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <string>

#include "net/http_client.h"
#include "testing/fake_upstream.h"

namespace rampart::net {

using namespace std::chrono_literals;
using testing::FakeUpstream;
using testing::UpstreamBehaviour;
using testing::UpstreamFault;

inline constexpr auto kWait = std::chrono::seconds(10);

// Records what a call delivers; optionally pauses once `pause_at` pieces have arrived.
class RecordingSink final : public HttpResponseSink {
 public:
  explicit RecordingSink(int pause_at = 0) : pause_at_(pause_at) {}

  void OnHead(const HttpClientResponseHead& head) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++heads_;
    status_code_ = head.status;
    headers_ = head.headers;
  }
  bool OnBody(std::string_view piece) override {
    std::lock_guard<std::mutex> lock(mutex_);
    body_.append(piece);
    ++pieces_;
    changed_.notify_all();
    return pause_at_ == 0 || pieces_ < pause_at_;
  }
  void OnComplete(const Status& status, HttpClientError error) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++completions_;
    status_ = status;
    error_ = error;
    changed_.notify_all();
  }

  bool WaitDone() {
    return Wait([&] { return completions_ > 0; });
  }
  bool WaitPieces(int pieces) {
    return Wait([&] { return pieces_ >= pieces; });
  }
  void StopPausing() {
    std::lock_guard<std::mutex> lock(mutex_);
    pause_at_ = 0;
  }

  int heads() const { return Locked(heads_); }
  int pieces() const { return Locked(pieces_); }
  int completions() const { return Locked(completions_); }
  int status_code() const { return Locked(status_code_); }
  std::string body() const { return Locked(body_); }
  HttpHeaders headers() const { return Locked(headers_); }
  Status status() const { return Locked(status_); }
  HttpClientError error() const { return Locked(error_); }

 private:
  template <typename T>
  T Locked(const T& value) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return value;
  }
  template <typename Condition>
  bool Wait(Condition condition) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, kWait, condition);
  }

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  int pause_at_;
  int heads_ = 0;
  int pieces_ = 0;
  int completions_ = 0;
  int status_code_ = 0;
  std::string body_;
  HttpHeaders headers_;
  Status status_;
  HttpClientError error_ = HttpClientError::kNone;
};

inline HttpClientRequest Get(std::string target) {
  HttpClientRequest request;
  request.target = std::move(target);
  return request;
}

inline HttpClientRequest Chat(bool stream) {
  HttpClientRequest request;
  request.method = "POST";
  request.target = "/v1/chat/completions";
  request.headers.Add("Content-Type", "application/json");
  request.body =
      std::string(R"({"model":"fake-model","messages":[{"role":"user","content":"hi"}])") +
      (stream ? R"(,"stream":true})" : "}");
  return request;
}

class HttpClientTest : public ::testing::Test {
 protected:
  void SetUp() override { MakeClient({}); }

  void MakeClient(HttpClientOptions options) {
    client_.reset();
    auto created = HttpClient::Create(options);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    client_ = std::move(created).value();
  }

  Endpoint Upstream(const FakeUpstream& fake) const {
    auto endpoint = ParseEndpoint(fake.url());
    EXPECT_TRUE(endpoint.ok());
    return *endpoint;
  }

  // Fetches and waits for the result.
  HttpFetchResult Fetch(const Endpoint& endpoint, HttpClientRequest request) {
    auto done = std::make_shared<std::promise<HttpFetchResult>>();
    std::future<HttpFetchResult> result = done->get_future();
    client_->Fetch(endpoint, std::move(request),
                   [done](HttpFetchResult fetched) { done->set_value(std::move(fetched)); });
    if (result.wait_for(kWait) != std::future_status::ready) {
      ADD_FAILURE() << "no answer within " << kWait.count() << " s";
      return {};
    }
    return result.get();
  }
  HttpFetchResult Fetch(HttpClientRequest request) {
    return Fetch(Upstream(fake_), std::move(request));
  }

  std::shared_ptr<RecordingSink> Stream(HttpClientRequest request, int pause_at = 0,
                                        HttpCall* call = nullptr) {
    auto sink = std::make_shared<RecordingSink>(pause_at);
    HttpCall sent = client_->Send(Upstream(fake_), std::move(request), sink);
    if (call != nullptr) *call = sent;
    return sink;
  }

  FakeUpstream fake_;
  std::unique_ptr<HttpClient> client_;
};

}  // namespace rampart::net
