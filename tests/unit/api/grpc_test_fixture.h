#pragma once

// The gRPC front end's test fixture: an InferenceServer over the fake repository of
// grpc_test_support.h, a KServeGrpc on 127.0.0.1 port 0, and a stub on a real channel to it.

#include <gtest/gtest.h>
#include <unistd.h>

#include <future>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "api/grpc_service.grpc.pb.h"
#include "api/kserve_grpc.h"
#include "grpc_test_support.h"

namespace rampart::api {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using inference::GRPCInferenceService;
using inference::ModelInferRequest;
using inference::ModelInferResponse;
using testing::FromBytes;
using testing::ToBytes;

inline std::chrono::system_clock::time_point Deadline() {
  return std::chrono::system_clock::now() + 10s;
}

// `simple`-like request for the add model: INPUT0 = a, INPUT1 = b, shape [1, n].
inline ModelInferRequest AddRequest(const std::vector<int32_t>& a, const std::vector<int32_t>& b,
                                    bool raw) {
  ModelInferRequest request;
  request.set_model_name("add");
  request.set_id("add-1");
  for (const auto& [name, values] : {std::pair{"INPUT0", &a}, std::pair{"INPUT1", &b}}) {
    auto* input = request.add_inputs();
    input->set_name(name);
    input->set_datatype("INT32");
    input->add_shape(1);
    input->add_shape(static_cast<int64_t>(values->size()));
    if (raw) {
      request.add_raw_input_contents(ToBytes(*values));
    } else {
      for (int32_t value : *values) input->mutable_contents()->add_int_contents(value);
    }
  }
  return request;
}

// One INT32 key for a gate model; the request id is "key-<key>".
inline ModelInferRequest GateRequest(const std::string& model, int32_t key) {
  ModelInferRequest request;
  request.set_model_name(model);
  request.set_id("key-" + std::to_string(key));
  auto* input = request.add_inputs();
  input->set_name("INPUT0");
  input->set_datatype("INT32");
  input->add_shape(1);
  request.add_raw_input_contents(ToBytes(std::vector<int32_t>{key}));
  return request;
}

// Every test runs on both engines (KServeGrpcOptions::engine): gRPC core and the native one.
class GrpcTest : public ::testing::TestWithParam<GrpcEngine> {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    repository_ =
        fs::path(::testing::TempDir()) / fmt::format("rampart_grpc_{}_{}", getpid(), info->name());
    testing::WriteFakeRepository(repository_);
    backends_.Register(testing::MakeFakeBackend(gate_));
    serve::ServerOptions options;
    options.repository = repository_;
    server_ = std::make_unique<serve::InferenceServer>(options, backends_);
    ASSERT_TRUE(server_->LoadStartupModels().ok());
    KServeGrpcOptions grpc_options = Options();
    grpc_options.access = access_;
    if (max_inflight_bytes_ > 0) grpc_options.max_inflight_bytes = max_inflight_bytes_;
    grpc_options.cork_writes = cork_writes_;
    auto started = KServeGrpc::Start(*server_, grpc_options);
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    grpc_ = std::move(started).value();
    channel_ = grpc::CreateChannel(Target(grpc_->port()), grpc::InsecureChannelCredentials());
    stub_ = GRPCInferenceService::NewStub(channel_);
  }

  void TearDown() override {
    gate_.Open();
    grpc_.reset();  // before the server it calls into
    server_.reset();
    fs::remove_all(repository_);
  }

  KServeGrpcOptions Options() const {
    KServeGrpcOptions options;
    options.engine = GetParam();
    options.address = "127.0.0.1";
    options.port = 0;
    options.server_version = "1.2.3";
    return options;
  }
  static std::string Target(int port) { return "127.0.0.1:" + std::to_string(port); }

  // Runs one unary call with a deadline: Call([&](auto* c) { return stub_->X(c, req, &resp); }).
  template <typename Rpc>
  static grpc::Status Call(Rpc&& rpc) {
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    return rpc(&context);
  }

  grpc::Status Infer(const ModelInferRequest& request, ModelInferResponse& response) {
    return Call([&](auto* c) { return stub_->ModelInfer(c, request, &response); });
  }

  // A raw unary call on any method of the channel (for the standard services we have no stubs
  // for); returns the response bytes.
  static grpc::Status GenericUnary(const std::shared_ptr<grpc::Channel>& channel,
                                   const std::string& method, const std::string& request,
                                   std::string& response) {
    grpc::GenericStub stub(channel);
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    grpc::Slice slice(request);
    grpc::ByteBuffer request_buffer(&slice, 1);
    grpc::ByteBuffer response_buffer;
    std::promise<grpc::Status> done;
    stub.UnaryCall(&context, method, grpc::StubOptions(), &request_buffer, &response_buffer,
                   [&done](grpc::Status status) { done.set_value(std::move(status)); });
    grpc::Status status = done.get_future().get();
    std::vector<grpc::Slice> slices;
    if (status.ok() && response_buffer.Dump(&slices).ok()) {
      for (const grpc::Slice& each : slices) {
        response.append(reinterpret_cast<const char*>(each.begin()), each.size());
      }
    }
    return status;
  }

  std::string HealthStatus(const std::string& service) {
    std::string request;
    if (!service.empty()) request = std::string("\x0a", 1) + char(service.size()) + service;
    std::string response;
    grpc::Status status = GenericUnary(channel_, "/grpc.health.v1.Health/Check", request, response);
    if (!status.ok()) return "error " + std::to_string(status.error_code());
    // HealthCheckResponse{status = 1}: SERVING = 1, NOT_SERVING = 2.
    if (response == std::string("\x08\x01", 2)) return "SERVING";
    if (response == std::string("\x08\x02", 2)) return "NOT_SERVING";
    return "unexpected response";
  }

  // Access control for the front end (null: open); a derived fixture sets it in its
  // constructor.
  const policy::AccessControl* access_ = nullptr;
  // The front end's budget of request bytes in flight (0: the default); likewise.
  size_t max_inflight_bytes_ = 0;
  bool cork_writes_ = true;  // KServeGrpcOptions::cork_writes
  testing::Gate gate_;
  backend::BackendRegistry backends_;
  fs::path repository_;
  std::unique_ptr<serve::InferenceServer> server_;
  std::unique_ptr<KServeGrpc> grpc_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<GRPCInferenceService::Stub> stub_;
};

// "core", "native": the parameter's part of a test's name.
inline std::string EngineName(const ::testing::TestParamInfo<GrpcEngine>& info) {
  return std::string(GrpcEngineName(info.param));
}

}  // namespace rampart::api
