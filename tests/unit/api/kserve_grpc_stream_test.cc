// ModelStreamInfer, cancellation, the drain, health checks and reflection, over real channels.

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "api/health.grpc.pb.h"
#include "grpc_test_fixture.h"
#include "testing/eventually.h"

namespace rampart::api {
namespace {

// Triton writes a stream's answers in request order (for models that are not decoupled):
// clients that send no `id` match them by position.
TEST_P(GrpcTest, StreamKeepsRequestsInFlightAndAnswersInRequestOrder) {
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  auto stream = stub_->ModelStreamInfer(&context);
  for (int32_t key : {1, 2, 3}) ASSERT_TRUE(stream->Write(GateRequest("gate", key)));
  // All three are executing at once, on the gate model's three instances; they finish last
  // first.
  ASSERT_TRUE(gate_.WaitEntered(3));
  auto gate = server_->GetModel("gate", serve::kLatestVersion);
  ASSERT_TRUE(gate.ok());
  for (int32_t key : {3, 2, 1}) {
    gate_.Release(key);
    const uint64_t done = static_cast<uint64_t>(4 - key);
    ASSERT_TRUE(testing::Eventually(
        [&] { return (*gate)->statistics().Snapshot().success.count == done; }));
  }
  for (int32_t key : {1, 2, 3}) {
    inference::ModelStreamInferResponse response;
    ASSERT_TRUE(stream->Read(&response));
    EXPECT_EQ(response.error_message(), "");
    EXPECT_EQ(response.infer_response().id(), "key-" + std::to_string(key));
    EXPECT_EQ(FromBytes<int32_t>(response.infer_response().raw_output_contents(0)),
              (std::vector<int32_t>{key}));
    // As Triton's stream writer marks each request's final response.
    const auto& parameters = response.infer_response().parameters();
    ASSERT_TRUE(parameters.contains("triton_final_response"));
    EXPECT_TRUE(parameters.at("triton_final_response").bool_param());
  }

  // A failed request is answered in the stream, which stays open.
  ModelInferRequest bad = AddRequest({1}, {2}, true);
  bad.set_model_name("nope");
  bad.set_id("bad-1");
  ASSERT_TRUE(stream->Write(bad));
  inference::ModelStreamInferResponse error;
  ASSERT_TRUE(stream->Read(&error));
  EXPECT_EQ(error.error_message(), "Request for unknown model: 'nope' is not found");
  EXPECT_EQ(error.infer_response().id(), "bad-1");
  EXPECT_TRUE(error.infer_response().parameters().at("triton_final_response").bool_param());
  ModelInferRequest malformed = AddRequest({1}, {2}, true);
  malformed.mutable_inputs(0)->set_datatype("INT33");
  ASSERT_TRUE(stream->Write(malformed));
  ASSERT_TRUE(stream->Read(&error));
  EXPECT_EQ(error.error_message(), "input 'INPUT0': unknown datatype 'INT33'");

  ASSERT_TRUE(stream->Write(AddRequest({1}, {2}, true)));
  inference::ModelStreamInferResponse sum;
  ASSERT_TRUE(stream->Read(&sum));
  EXPECT_EQ(sum.error_message(), "");
  EXPECT_EQ(FromBytes<int32_t>(sum.infer_response().raw_output_contents(0)),
            (std::vector<int32_t>{3}));

  ASSERT_TRUE(stream->WritesDone());
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_P(GrpcTest, DrainAnswersStreamRequestsInFlightBeforeEndingTheStream) {
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  auto stream = stub_->ModelStreamInfer(&context);
  ASSERT_TRUE(stream->Write(GateRequest("gate", 7)));
  ASSERT_TRUE(gate_.WaitEntered(1));
  grpc_->StopServing();  // the stream has a request in flight: it may not end yet
  gate_.Release(7);
  inference::ModelStreamInferResponse response;
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.infer_response().id(), "key-7");
  EXPECT_FALSE(stream->Read(&response));
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_P(GrpcTest, ConcurrentStreamsSurviveClientCancellation) {
  constexpr int kStreams = 8;
  constexpr int kRequests = 100;
  std::vector<std::thread> clients;
  std::vector<grpc::Status> statuses(kStreams);
  std::vector<int> answered(kStreams, 0);
  for (int i = 0; i < kStreams; ++i) {
    clients.emplace_back([&, i] {
      grpc::ClientContext context;
      context.set_deadline(Deadline());
      auto stream = stub_->ModelStreamInfer(&context);
      const bool cancel = i % 2 == 0;
      for (int r = 0; r < kRequests; ++r) {
        if (!stream->Write(AddRequest({r}, {i}, /*raw=*/r % 2 == 0))) break;
        if (cancel && r == kRequests / 2) context.TryCancel();
      }
      if (!cancel) {
        stream->WritesDone();
        inference::ModelStreamInferResponse response;
        while (stream->Read(&response)) {
          if (response.error_message().empty()) ++answered[i];
        }
      }
      statuses[i] = stream->Finish();
    });
  }
  for (std::thread& client : clients) client.join();
  for (int i = 0; i < kStreams; ++i) {
    SCOPED_TRACE(i);
    if (i % 2 == 0) {
      EXPECT_EQ(statuses[i].error_code(), grpc::StatusCode::CANCELLED);
    } else {
      EXPECT_TRUE(statuses[i].ok()) << statuses[i].error_message();
      EXPECT_EQ(answered[i], kRequests);
    }
  }
  grpc_->Shutdown(5s);  // returns only once every stream's reactor is done
}

TEST_P(GrpcTest, CancelledCallNeverReachesTheBackend) {
  ModelInferResponse first_response;
  grpc::ClientContext first_context;
  first_context.set_deadline(Deadline());
  std::promise<grpc::Status> first_done;
  const ModelInferRequest first = GateRequest("gate1", 1);
  stub_->async()->ModelInfer(&first_context, &first, &first_response,
                             [&](grpc::Status status) { first_done.set_value(status); });
  ASSERT_TRUE(gate_.WaitEntered(1));  // gate1's only instance is now busy

  ModelInferResponse second_response;
  grpc::ClientContext second_context;
  second_context.set_deadline(Deadline());
  std::promise<grpc::Status> second_done;
  const ModelInferRequest second = GateRequest("gate1", 2);
  stub_->async()->ModelInfer(&second_context, &second, &second_response,
                             [&](grpc::Status status) { second_done.set_value(status); });
  auto gate1 = server_->GetModel("gate1", serve::kLatestVersion);
  ASSERT_TRUE(gate1.ok());
  ASSERT_TRUE(testing::Eventually([&] { return (*gate1)->QueueSize() == 1; }));

  second_context.TryCancel();
  EXPECT_EQ(second_done.get_future().get().error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_TRUE(testing::Eventually([&] { return grpc_->cancelled_calls() == 1; }));

  gate_.Release(1);
  EXPECT_TRUE(first_done.get_future().get().ok());
  ASSERT_TRUE(
      testing::Eventually([&] { return (*gate1)->statistics().Snapshot().fail.count == 1; }));
  const serve::StatisticsSnapshot stats = (*gate1)->statistics().Snapshot();
  EXPECT_EQ(stats.failures_by_reason[static_cast<int>(serve::FailureReason::kCanceled)], 1u);
  EXPECT_EQ(gate_.entered(), (std::vector<int32_t>{1}));
}

TEST_P(GrpcTest, TimeoutParameterReachesTheQueue) {
  ModelInferRequest first = GateRequest("gate_queue", 1);
  first.mutable_inputs(0)->add_shape(1);  // [1, 1]: batch of one
  ModelInferResponse first_response;
  grpc::ClientContext first_context;
  first_context.set_deadline(Deadline());
  std::promise<grpc::Status> first_done;
  stub_->async()->ModelInfer(&first_context, &first, &first_response,
                             [&](grpc::Status status) { first_done.set_value(status); });
  ASSERT_TRUE(gate_.WaitEntered(1));  // the only instance is busy until released

  ModelInferRequest second = GateRequest("gate_queue", 2);
  second.mutable_inputs(0)->add_shape(1);
  (*second.mutable_parameters())["timeout"].set_int64_param(1000);  // 1 ms in the queue
  ModelInferResponse second_response;
  grpc::Status status = Infer(second, second_response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(status.error_message(), "Request timeout expired");

  gate_.Release(1);
  EXPECT_TRUE(first_done.get_future().get().ok());
  EXPECT_EQ(gate_.entered(), (std::vector<int32_t>{1}));
}

TEST_P(GrpcTest, StopServingEndsOpenStreamsAndHealth) {
  EXPECT_EQ(HealthStatus(""), "SERVING");
  EXPECT_EQ(HealthStatus("inference.GRPCInferenceService"), "SERVING");
  EXPECT_EQ(HealthStatus("no.such.Service"), "error 5");  // NOT_FOUND

  grpc::ClientContext context;
  context.set_deadline(Deadline());
  auto stream = stub_->ModelStreamInfer(&context);
  ASSERT_TRUE(stream->Write(AddRequest({1}, {1}, true)));
  inference::ModelStreamInferResponse response;
  ASSERT_TRUE(stream->Read(&response));

  grpc_->StopServing();
  EXPECT_FALSE(stream->Read(&response));
  grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(status.error_message(), "the server is shutting down");
  EXPECT_EQ(HealthStatus(""), "NOT_SERVING");
  grpc_->Shutdown(5s);
}

TEST_P(GrpcTest, HealthWatchSendsTheStatusThenEachChangeUntilShutdown) {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  grpc::health::v1::HealthCheckRequest request;
  auto watch = health->Watch(&context, request);
  grpc::health::v1::HealthCheckResponse response;
  ASSERT_TRUE(watch->Read(&response));
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);

  grpc::ClientContext unknown_context;
  unknown_context.set_deadline(Deadline());
  request.set_service("no.such.Service");
  auto unknown = health->Watch(&unknown_context, request);
  ASSERT_TRUE(unknown->Read(&response));
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVICE_UNKNOWN);
  unknown_context.TryCancel();
  EXPECT_EQ(unknown->Finish().error_code(), grpc::StatusCode::CANCELLED);

  grpc_->StopServing();
  ASSERT_TRUE(watch->Read(&response));
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  grpc_->Shutdown(5s);  // ends the watch (the server's shutdown waits for it)
  EXPECT_FALSE(watch->Read(&response));
  EXPECT_EQ(watch->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

// One ServerReflectionInfo call with one request (serialized); the response's bytes, as text.
std::string Reflect(const std::shared_ptr<grpc::Channel>& channel, const std::string& request) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  grpc::CompletionQueue queue;
  auto call = stub.PrepareCall(
      &context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &queue);
  const auto step = [&](intptr_t tag) {
    void* got = nullptr;
    bool ok = false;
    return queue.Next(&got, &ok) && ok && got == reinterpret_cast<void*>(tag);
  };
  call->StartCall(reinterpret_cast<void*>(1));
  EXPECT_TRUE(step(1));
  grpc::Slice slice(request);
  grpc::ByteBuffer request_buffer(&slice, 1);
  call->Write(request_buffer, reinterpret_cast<void*>(2));
  EXPECT_TRUE(step(2));
  grpc::ByteBuffer response;
  call->Read(&response, reinterpret_cast<void*>(3));
  EXPECT_TRUE(step(3));
  call->WritesDone(reinterpret_cast<void*>(4));
  EXPECT_TRUE(step(4));
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  EXPECT_TRUE(step(5));
  EXPECT_TRUE(status.ok()) << status.error_message();
  queue.Shutdown();
  grpc::Slice all;
  if (!response.DumpToSingleSlice(&all).ok()) return "";
  return std::string(reinterpret_cast<const char*>(all.begin()), all.size());
}

TEST_P(GrpcTest, ReflectionListsTheServicesAndDescribesThem) {
  // ServerReflectionRequest{list_services = ""}
  const std::string services = Reflect(channel_, std::string("\x3a\x00", 2));
  EXPECT_NE(services.find("inference.GRPCInferenceService"), std::string::npos);
  EXPECT_NE(services.find("grpc.health.v1.Health"), std::string::npos);
  // ServerReflectionRequest{file_containing_symbol = "inference.GRPCInferenceService"}: the
  // FileDescriptorProto of the file that defines it (its name, its messages), as grpcurl asks.
  const std::string symbol = "inference.GRPCInferenceService";
  const std::string file = Reflect(channel_, std::string("\x22") + char(symbol.size()) + symbol);
  EXPECT_NE(file.find("grpc_service.proto"), std::string::npos);
  EXPECT_NE(file.find("ModelInferRequest"), std::string::npos);
  // An unknown symbol: an error_response (field 7, tag 0x3a), not a failed call.
  const std::string unknown = "no.such.Service";
  const std::string missing =
      Reflect(channel_, std::string("\x22") + char(unknown.size()) + unknown);
  EXPECT_NE(missing.find('\x3a'), std::string::npos);
  EXPECT_EQ(missing.find("grpc_service.proto"), std::string::npos);
}

}  // namespace
}  // namespace rampart::api
