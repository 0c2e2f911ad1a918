// The gRPC front end's bound on the memory its calls hold: request bytes in flight, over all
// unary calls and streams, against KServeGrpcOptions::max_inflight_bytes.

#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <string>
#include <vector>

#include "grpc_test_fixture.h"

namespace rampart::api {
namespace {

constexpr size_t kBudget = size_t{1} << 20;  // 1 MiB
// A gate request carrying `bytes` more in a custom string parameter (which no model reads): three
// of 300 KiB fit in the budget, a fourth does not.
ModelInferRequest LargeGateRequest(int32_t key, size_t bytes = size_t{300} << 10) {
  ModelInferRequest request = GateRequest("gate", key);
  (*request.mutable_parameters())["padding"].set_string_param(std::string(bytes, 'x'));
  return request;
}

class GrpcBudgetTest : public GrpcTest {
 protected:
  GrpcBudgetTest() { max_inflight_bytes_ = kBudget; }
};

TEST_P(GrpcBudgetTest, ManyLargeConcurrentCallsAreRefusedPastTheBudget) {
  constexpr int kCalls = 16;
  std::vector<std::future<grpc::Status>> calls;
  for (int key = 1; key <= kCalls; ++key) {
    calls.push_back(std::async(std::launch::async, [this, key] {
      ModelInferResponse response;
      return Infer(LargeGateRequest(key), response);
    }));
  }
  // Three fit and wait in the gate's three instances; every other one is refused at once rather
  // than held (waiting for its answer does not wait for the gate).
  ASSERT_TRUE(gate_.WaitEntered(3));
  const std::vector<int32_t> entered = gate_.entered();
  int refused = 0;
  std::vector<size_t> waiting;
  for (size_t i = 0; i < calls.size(); ++i) {
    if (std::find(entered.begin(), entered.end(), static_cast<int32_t>(i) + 1) != entered.end()) {
      waiting.push_back(i);
      continue;
    }
    const grpc::Status status = calls[i].get();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
    EXPECT_NE(status.error_message().find("too many request bytes in flight"), std::string::npos)
        << status.error_message();
    ++refused;
  }
  EXPECT_EQ(refused, kCalls - 3);
  ASSERT_EQ(waiting.size(), 3u);
  EXPECT_EQ(gate_.entered().size(), 3u);

  gate_.Open();
  for (size_t i : waiting) EXPECT_TRUE(calls[i].get().ok());
  // Answered calls give their bytes back: a large call fits again.
  ModelInferResponse response;
  EXPECT_TRUE(Infer(LargeGateRequest(99), response).ok());
  // A request larger than the whole budget never fits.
  const grpc::Status status = Infer(LargeGateRequest(100, kBudget + 1), response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

TEST_P(GrpcBudgetTest, AStreamsRequestPastTheBudgetIsAnsweredInTheStream) {
  // Three unary calls hold most of the budget, waiting in the gate.
  std::vector<std::future<grpc::Status>> held;
  for (int32_t key : {1, 2, 3}) {
    held.push_back(std::async(std::launch::async, [this, key] {
      ModelInferResponse response;
      return Infer(LargeGateRequest(key), response);
    }));
  }
  ASSERT_TRUE(gate_.WaitEntered(3));

  grpc::ClientContext context;
  context.set_deadline(Deadline());
  auto stream = stub_->ModelStreamInfer(&context);
  ModelInferRequest large = AddRequest({1}, {2}, /*raw=*/true);
  (*large.mutable_parameters())["padding"].set_string_param(std::string(size_t{300} << 10, 'x'));
  ASSERT_TRUE(stream->Write(large));
  inference::ModelStreamInferResponse response;
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_NE(response.error_message().find("too many request bytes in flight"), std::string::npos)
      << response.error_message();
  EXPECT_EQ(response.infer_response().id(), "add-1");

  // The stream goes on; once the held calls are answered their bytes are back.
  gate_.Open();
  for (auto& call : held) EXPECT_TRUE(call.get().ok());
  ASSERT_TRUE(stream->Write(large));
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.error_message(), "");
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

INSTANTIATE_TEST_SUITE_P(Engines, GrpcBudgetTest,
                         ::testing::Values(GrpcEngine::kCore, GrpcEngine::kNative), EngineName);

}  // namespace
}  // namespace rampart::api
