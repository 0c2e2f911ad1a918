// Every unary RPC of the gRPC front end over a real loopback channel.

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "grpc_test_fixture.h"

namespace rampart::api {
namespace {

TEST_P(GrpcTest, ServerHealthAndMetadata) {
  inference::ServerLiveResponse live;
  ASSERT_TRUE(Call([&](auto* c) { return stub_->ServerLive(c, {}, &live); }).ok());
  EXPECT_TRUE(live.live());
  inference::ServerReadyResponse ready;
  ASSERT_TRUE(Call([&](auto* c) { return stub_->ServerReady(c, {}, &ready); }).ok());
  EXPECT_TRUE(ready.ready());
  inference::ServerMetadataResponse metadata;
  ASSERT_TRUE(Call([&](auto* c) { return stub_->ServerMetadata(c, {}, &metadata); }).ok());
  EXPECT_EQ(metadata.name(), "rampart");
  EXPECT_EQ(metadata.version(), "1.2.3");
  EXPECT_EQ(std::vector<std::string>(metadata.extensions().begin(), metadata.extensions().end()),
            (std::vector<std::string>{"model_configuration", "statistics", "model_repository"}));
}

TEST_P(GrpcTest, ModelReadyFollowsLoadedVersions) {
  const auto ready = [&](const std::string& name, const std::string& version) {
    inference::ModelReadyRequest request;
    request.set_name(name);
    request.set_version(version);
    inference::ModelReadyResponse response;
    grpc::Status status = Call([&](auto* c) { return stub_->ModelReady(c, request, &response); });
    return status.ok() ? std::string(response.ready() ? "ready" : "not ready")
                       : "error " + std::to_string(status.error_code());
  };
  EXPECT_EQ(ready("add", ""), "ready");
  EXPECT_EQ(ready("add", "1"), "ready");
  // As Triton: a model or version not loaded is NOT_FOUND, not merely "not ready".
  EXPECT_EQ(ready("add", "2"), "error 5");
  EXPECT_EQ(ready("nope", ""), "error 5");
  EXPECT_EQ(ready("add", "x"), "error 3");  // INVALID_ARGUMENT
}

// Triton implements RPCs Rampart does not (shared memory, trace and log settings); their
// UNIMPLEMENTED, and any unknown method's, names the method (gRPC's own has no message).
TEST_P(GrpcTest, AnUnimplementedMethodSaysWhichOne) {
  std::string response;
  const grpc::Status status = GenericUnary(
      channel_, "/inference.GRPCInferenceService/SystemSharedMemoryStatus", "", response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(status.error_message(),
            "method '/inference.GRPCInferenceService/SystemSharedMemoryStatus' is not "
            "implemented by this server");
}

TEST_P(GrpcTest, TheServerNameIsConfigurable) {
  KServeGrpcOptions options = Options();
  options.server_name = "triton";
  auto named = KServeGrpc::Start(*server_, options);
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  auto stub = GRPCInferenceService::NewStub(
      grpc::CreateChannel(Target((*named)->port()), grpc::InsecureChannelCredentials()));
  inference::ServerMetadataResponse metadata;
  ASSERT_TRUE(Call([&](auto* c) { return stub->ServerMetadata(c, {}, &metadata); }).ok());
  EXPECT_EQ(metadata.name(), "triton");
}

TEST_P(GrpcTest, ModelMetadataMirrorsHttp) {
  inference::ModelMetadataRequest request;
  request.set_name("add");
  inference::ModelMetadataResponse response;
  ASSERT_TRUE(Call([&](auto* c) { return stub_->ModelMetadata(c, request, &response); }).ok());
  EXPECT_EQ(response.name(), "add");
  EXPECT_EQ(std::vector<std::string>(response.versions().begin(), response.versions().end()),
            (std::vector<std::string>{"1"}));
  ASSERT_EQ(response.inputs_size(), 2);
  EXPECT_EQ(response.inputs(1).name(), "INPUT1");
  EXPECT_EQ(response.inputs(1).datatype(), "INT32");
  EXPECT_EQ(
      std::vector<int64_t>(response.inputs(1).shape().begin(), response.inputs(1).shape().end()),
      (std::vector<int64_t>{-1, -1}));
  ASSERT_EQ(response.outputs_size(), 2);
  EXPECT_EQ(response.outputs(0).name(), "OUTPUT0");

  request.set_name("nope");
  grpc::Status missing = Call([&](auto* c) { return stub_->ModelMetadata(c, request, &response); });
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(missing.error_message(), "Request for unknown model: 'nope' is not found");
}

TEST_P(GrpcTest, ModelConfigIsTheProtobufConfig) {
  inference::ModelConfigRequest request;
  request.set_name("add");
  inference::ModelConfigResponse response;
  ASSERT_TRUE(Call([&](auto* c) { return stub_->ModelConfig(c, request, &response); }).ok());
  EXPECT_EQ(response.config().name(), "add");
  EXPECT_EQ(response.config().max_batch_size(), 8);
  EXPECT_EQ(response.config().input_size(), 2);
  EXPECT_EQ(response.config().backend(), "fake");

  request.set_version("2");
  EXPECT_EQ(Call([&](auto* c) { return stub_->ModelConfig(c, request, &response); }).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_P(GrpcTest, InferWithTypedAndRawContents) {
  for (bool raw : {false, true}) {
    SCOPED_TRACE(raw ? "raw" : "typed");
    ModelInferResponse response;
    grpc::Status status = Infer(AddRequest({1, 2, 3}, {10, 20, 30}, raw), response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.model_name(), "add");
    EXPECT_EQ(response.model_version(), "1");
    EXPECT_EQ(response.id(), "add-1");
    ASSERT_EQ(response.outputs_size(), 2);
    EXPECT_EQ(response.outputs(0).name(), "OUTPUT0");
    EXPECT_EQ(response.outputs(0).datatype(), "INT32");
    EXPECT_EQ(std::vector<int64_t>(response.outputs(0).shape().begin(),
                                   response.outputs(0).shape().end()),
              (std::vector<int64_t>{1, 3}));
    EXPECT_FALSE(response.outputs(0).has_contents()) << "outputs travel raw, as Triton's do";
    ASSERT_EQ(response.raw_output_contents_size(), 2);
    EXPECT_EQ(FromBytes<int32_t>(response.raw_output_contents(0)),
              (std::vector<int32_t>{11, 22, 33}));
    EXPECT_EQ(FromBytes<int32_t>(response.raw_output_contents(1)),
              (std::vector<int32_t>{-9, -18, -27}));
  }
}

TEST_P(GrpcTest, InferReturnsOnlyRequestedOutputsAndTakesParameters) {
  ModelInferRequest request = AddRequest({5}, {1}, /*raw=*/true);
  request.add_outputs()->set_name("OUTPUT1");
  (*request.mutable_parameters())["priority"].set_uint64_param(0);
  (*request.mutable_parameters())["timeout"].set_int64_param(1000000);
  ModelInferResponse response;
  grpc::Status status = Infer(request, response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.outputs_size(), 1);
  EXPECT_EQ(response.outputs(0).name(), "OUTPUT1");
  EXPECT_EQ(FromBytes<int32_t>(response.raw_output_contents(0)), (std::vector<int32_t>{4}));
}

// Triton ignores the sequence parameters on a model without a sequence batcher, and custom
// parameters of its types; the reserved ones need theirs.
TEST_P(GrpcTest, ParametersTritonIgnoresAreIgnored) {
  ModelInferRequest request = AddRequest({5}, {1}, /*raw=*/true);
  auto& parameters = *request.mutable_parameters();
  parameters["sequence_id"].set_int64_param(42);
  parameters["sequence_start"].set_bool_param(true);
  parameters["sequence_end"].set_bool_param(false);
  parameters["my_flag"].set_bool_param(true);
  parameters["my_text"].set_string_param("x");
  parameters["my_number"].set_double_param(0.5);
  parameters["triton_enable_empty_final_response"].set_bool_param(true);
  (*request.mutable_inputs(0)->mutable_parameters())["custom"].set_string_param("y");
  auto* output = request.add_outputs();
  output->set_name("OUTPUT0");
  (*output->mutable_parameters())["custom"].set_int64_param(1);
  ModelInferResponse response;
  grpc::Status status = Infer(request, response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(FromBytes<int32_t>(response.raw_output_contents(0)), (std::vector<int32_t>{6}));
  request.mutable_parameters()->at("sequence_id").set_string_param("corr-1");
  ASSERT_TRUE(Infer(request, response).ok());

  const auto refused = [&](const std::string& name, auto set) {
    ModelInferRequest bad = AddRequest({5}, {1}, /*raw=*/true);
    set((*bad.mutable_parameters())[name]);
    ModelInferResponse ignored;
    const grpc::Status answer = Infer(bad, ignored);
    EXPECT_EQ(answer.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << name;
    return answer.error_message();
  };
  EXPECT_EQ(refused("sequence_id", [](auto& p) { p.set_uint64_param(1); }),
            "invalid value type for 'sequence_id' parameter, expected int64_param or "
            "string_param.");
  EXPECT_EQ(refused("timeout", [](auto& p) { p.set_uint64_param(1); }),
            "invalid value type for 'timeout' parameter, expected int64_param.");
  EXPECT_EQ(refused("my_unsigned", [](auto& p) { p.set_uint64_param(1); }),
            "invalid value type for 'my_unsigned' parameter, expected int64_param, bool_param, "
            "or string_param.");
  EXPECT_EQ(refused("triton_other", [](auto& p) { p.set_bool_param(true); }),
            "parameter keys starting with 'triton_' are reserved for Triton usage. Only the "
            "following keys starting with 'triton_' are allowed: "
            "triton_enable_empty_final_response");
}

TEST_P(GrpcTest, InferBytesTypedAndRawAndFp16Raw) {
  ModelInferRequest request;
  request.set_model_name("echo_bytes");
  auto* input = request.add_inputs();
  input->set_name("INPUT0");
  input->set_datatype("BYTES");
  input->add_shape(2);
  input->mutable_contents()->add_bytes_contents("hello");
  input->mutable_contents()->add_bytes_contents(std::string("\0x", 2));
  const std::string serialized = std::string("\x05\x00\x00\x00hello\x02\x00\x00\x00\0x", 15);
  ModelInferResponse response;
  ASSERT_TRUE(Infer(request, response).ok());
  EXPECT_EQ(response.outputs(0).datatype(), "BYTES");
  EXPECT_EQ(response.raw_output_contents(0), serialized);

  input->clear_contents();
  request.add_raw_input_contents(serialized);
  response.Clear();
  ASSERT_TRUE(Infer(request, response).ok());
  EXPECT_EQ(response.raw_output_contents(0), serialized);

  ModelInferRequest half;
  half.set_model_name("echo_fp16");
  auto* half_input = half.add_inputs();
  half_input->set_name("INPUT0");
  half_input->set_datatype("FP16");
  half_input->add_shape(2);
  half.add_raw_input_contents(std::string("\x00\x3c\x00\xc0", 4));  // 1.0, -2.0
  response.Clear();
  ASSERT_TRUE(Infer(half, response).ok());
  EXPECT_EQ(response.outputs(0).datatype(), "FP16");
  EXPECT_EQ(response.raw_output_contents(0), std::string("\x00\x3c\x00\xc0", 4));
}

struct BadInfer {
  std::string label;
  std::function<void(ModelInferRequest&)> change;
  grpc::StatusCode code;
  std::string message;
};

TEST_P(GrpcTest, BadInferRequestsGetAPreciseStatus) {
  const std::vector<BadInfer> cases = {
      {"unknown model", [](auto& r) { r.set_model_name("nope"); }, grpc::StatusCode::NOT_FOUND,
       "Request for unknown model: 'nope' is not found"},
      {"unknown version", [](auto& r) { r.set_model_version("4"); }, grpc::StatusCode::NOT_FOUND,
       "'add' version 4 is not found"},
      {"malformed version", [](auto& r) { r.set_model_version("latest"); },
       grpc::StatusCode::INVALID_ARGUMENT, "'latest' is not a valid model version"},
      {"datatype the model does not take",
       [](auto& r) {
         r.mutable_inputs(0)->set_datatype("FP32");
         r.mutable_inputs(0)->mutable_contents()->Clear();
         for (int i = 0; i < 2; ++i) r.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "INPUT0"},
      {"contents field of another type",
       [](auto& r) { r.mutable_inputs(0)->mutable_contents()->add_fp64_contents(1); },
       grpc::StatusCode::INVALID_ARGUMENT,
       "datatype INT32 takes int_contents, but "
       "fp64_contents is set"},
      {"contents and raw",
       [](auto& r) {
         r.add_raw_input_contents(ToBytes(std::vector<int32_t>{1, 2}));
         r.add_raw_input_contents(ToBytes(std::vector<int32_t>{1, 2}));
       },
       grpc::StatusCode::INVALID_ARGUMENT,
       "'contents' must not be set when the request uses "
       "raw_input_contents"},
      {"raw size",
       [](auto& r) {
         for (auto& input : *r.mutable_inputs()) input.clear_contents();
         r.add_raw_input_contents(ToBytes(std::vector<int32_t>{1, 2}));
         r.add_raw_input_contents(ToBytes(std::vector<int32_t>{1, 2, 3}));
       },
       grpc::StatusCode::INVALID_ARGUMENT,
       "input byte size mismatch for input 'INPUT1' for model 'add'. Expected 8, got 12"},
      {"typed element count",
       [](auto& r) { r.mutable_inputs(1)->mutable_contents()->add_int_contents(7); },
       grpc::StatusCode::INVALID_ARGUMENT,
       "input 'INPUT1': shape [1,2] needs 2 elements but "
       "int_contents has 3"},
      {"FP16 in typed contents", [](auto& r) { r.mutable_inputs(0)->set_datatype("FP16"); },
       grpc::StatusCode::INVALID_ARGUMENT, "FP16 data cannot travel in typed contents"},
      {"missing input", [](auto& r) { r.mutable_inputs()->RemoveLast(); },
       grpc::StatusCode::INVALID_ARGUMENT,
       "expected 2 inputs but got 1 inputs for model 'add'. Got input(s) ['INPUT0'], but "
       "missing required input(s) ['INPUT1']. Please provide all required input(s)."},
      {"unknown output", [](auto& r) { r.add_outputs()->set_name("OUTPUT9"); },
       grpc::StatusCode::INVALID_ARGUMENT, "OUTPUT9"},
      {"sequence parameter of the wrong type",
       [](auto& r) { (*r.mutable_parameters())["sequence_start"].set_int64_param(1); },
       grpc::StatusCode::INVALID_ARGUMENT,
       "invalid value type for 'sequence_start' parameter, expected bool_param."},
      {"priority as a string",
       [](auto& r) { (*r.mutable_parameters())["priority"].set_string_param("high"); },
       grpc::StatusCode::INVALID_ARGUMENT,
       "invalid value type for 'priority' parameter, expected int64_param or uint64_param."},
  };
  for (const BadInfer& each : cases) {
    SCOPED_TRACE(each.label);
    ModelInferRequest request = AddRequest({1, 2}, {3, 4}, /*raw=*/false);
    each.change(request);
    ModelInferResponse response;
    grpc::Status status = Infer(request, response);
    EXPECT_EQ(status.error_code(), each.code) << status.error_message();
    EXPECT_NE(status.error_message().find(each.message), std::string::npos)
        << status.error_message();
  }
}

TEST_P(GrpcTest, StatisticsComeFromTheSameSnapshotAsHttp) {
  ModelInferResponse response;
  ASSERT_TRUE(Infer(AddRequest({1}, {2}, true), response).ok());
  ASSERT_TRUE(Infer(AddRequest({1}, {2}, false), response).ok());

  inference::ModelStatisticsRequest request;
  request.set_name("add");
  inference::ModelStatisticsResponse stats;
  ASSERT_TRUE(Call([&](auto* c) { return stub_->ModelStatistics(c, request, &stats); }).ok());
  ASSERT_EQ(stats.model_stats_size(), 1);
  const inference::ModelStatistics& add = stats.model_stats(0);
  EXPECT_EQ(add.name(), "add");
  EXPECT_EQ(add.version(), "1");
  EXPECT_GT(add.last_inference(), 0u);
  EXPECT_EQ(add.inference_count(), 2u);
  EXPECT_EQ(add.execution_count(), 2u);
  EXPECT_EQ(add.inference_stats().success().count(), 2u);
  EXPECT_EQ(add.inference_stats().fail().count(), 0u);
  EXPECT_EQ(add.inference_stats().queue().count(), 2u);
  EXPECT_EQ(add.inference_stats().compute_infer().count(), 2u);
  EXPECT_TRUE(add.inference_stats().has_cache_hit());
  ASSERT_EQ(add.batch_stats_size(), 1);
  EXPECT_EQ(add.batch_stats(0).batch_size(), 1u);
  EXPECT_EQ(add.batch_stats(0).compute_infer().count(), 2u);

  stats.Clear();
  ASSERT_TRUE(Call([&](auto* c) { return stub_->ModelStatistics(c, {}, &stats); }).ok());
  EXPECT_EQ(stats.model_stats_size(), 6);

  request.set_version("1");
  stats.Clear();
  ASSERT_TRUE(Call([&](auto* c) { return stub_->ModelStatistics(c, request, &stats); }).ok());
  EXPECT_EQ(stats.model_stats_size(), 1);

  request.set_version("9");
  EXPECT_EQ(Call([&](auto* c) { return stub_->ModelStatistics(c, request, &stats); }).error_code(),
            grpc::StatusCode::NOT_FOUND);
  request.set_name("nope");
  request.clear_version();
  EXPECT_EQ(Call([&](auto* c) { return stub_->ModelStatistics(c, request, &stats); }).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_P(GrpcTest, RepositoryIndexAndControl) {
  inference::RepositoryIndexRequest request;
  request.set_ready(true);
  inference::RepositoryIndexResponse index;
  ASSERT_TRUE(Call([&](auto* c) { return stub_->RepositoryIndex(c, request, &index); }).ok());
  ASSERT_EQ(index.models_size(), 6);
  EXPECT_EQ(index.models(0).name(), "add");
  EXPECT_EQ(index.models(0).version(), "1");
  EXPECT_EQ(index.models(0).state(), "READY");
  EXPECT_EQ(index.models(0).reason(), "");

  request.set_repository_name("elsewhere");
  EXPECT_EQ(Call([&](auto* c) { return stub_->RepositoryIndex(c, request, &index); }).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);

  // This server loads everything at start (control mode none), like HTTP it refuses the API.
  inference::RepositoryModelLoadRequest load;
  load.set_model_name("add");
  inference::RepositoryModelLoadResponse loaded;
  grpc::Status status = Call([&](auto* c) { return stub_->RepositoryModelLoad(c, load, &loaded); });
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);  // as Triton
  EXPECT_NE(status.error_message().find("not allowed in model control mode 'none'"),
            std::string::npos)
      << status.error_message();
  inference::RepositoryModelUnloadRequest unload;
  unload.set_model_name("add");
  inference::RepositoryModelUnloadResponse unloaded;
  EXPECT_EQ(Call([&](auto* c) {
              return stub_->RepositoryModelUnload(c, unload, &unloaded);
            }).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  (*load.mutable_parameters())["file:1/model.pt"].set_bytes_param("x");
  EXPECT_EQ(
      Call([&](auto* c) { return stub_->RepositoryModelLoad(c, load, &loaded); }).error_code(),
      grpc::StatusCode::UNIMPLEMENTED);
}

TEST_P(GrpcTest, ExplicitModeLoadsAndUnloadsThroughTheApi) {
  serve::ServerOptions options;
  options.repository = repository_;
  options.control_mode = serve::ModelControlMode::kExplicit;
  serve::InferenceServer explicit_server(options, backends_);
  ASSERT_TRUE(explicit_server.LoadStartupModels().ok());
  auto front = KServeGrpc::Start(explicit_server, Options());
  ASSERT_TRUE(front.ok()) << front.status().ToString();
  auto stub = GRPCInferenceService::NewStub(
      grpc::CreateChannel(Target((*front)->port()), grpc::InsecureChannelCredentials()));
  const auto ready = [&] {
    inference::ModelReadyRequest request;
    request.set_name("add");
    inference::ModelReadyResponse response;
    const grpc::Status status =
        Call([&](auto* c) { return stub->ModelReady(c, request, &response); });
    EXPECT_EQ(status.ok(), response.ready()) << status.error_message();  // NOT_FOUND when not
    return response.ready();
  };
  EXPECT_FALSE(ready());

  inference::RepositoryModelLoadRequest load;
  load.set_model_name("add");
  inference::RepositoryModelLoadResponse loaded;
  grpc::Status status = Call([&](auto* c) { return stub->RepositoryModelLoad(c, load, &loaded); });
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(ready());
  ModelInferResponse response;
  ASSERT_TRUE(Call([&](auto* c) {
                return stub->ModelInfer(c, AddRequest({1}, {2}, true), &response);
              }).ok());

  inference::RepositoryModelUnloadRequest unload;
  unload.set_model_name("add");
  inference::RepositoryModelUnloadResponse unloaded;
  ASSERT_TRUE(
      Call([&](auto* c) { return stub->RepositoryModelUnload(c, unload, &unloaded); }).ok());
  EXPECT_FALSE(ready());
  // Unloading what is not loaded succeeds, as in Triton.
  ASSERT_TRUE(
      Call([&](auto* c) { return stub->RepositoryModelUnload(c, unload, &unloaded); }).ok());
  unload.set_model_name("nope");
  ASSERT_TRUE(
      Call([&](auto* c) { return stub->RepositoryModelUnload(c, unload, &unloaded); }).ok());

  load.set_model_name("nope");
  status = Call([&](auto* c) { return stub->RepositoryModelLoad(c, load, &loaded); });
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  (*front)->Shutdown(5s);
}

TEST_P(GrpcTest, OversizedMessageIsRejected) {
  KServeGrpcOptions options = Options();
  options.max_receive_bytes = 1024;
  auto small = KServeGrpc::Start(*server_, options);
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  auto stub = GRPCInferenceService::NewStub(
      grpc::CreateChannel(Target((*small)->port()), grpc::InsecureChannelCredentials()));
  ModelInferResponse response;
  grpc::Status status = Call([&](auto* c) {
    return stub->ModelInfer(
        c, AddRequest(std::vector<int32_t>(512), std::vector<int32_t>(512), true), &response);
  });
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

// Clients may compress their messages (Triton's clients' `compression_algorithm`); the server
// reads gzip and deflate, and the size limit holds for the inflated message too.
TEST_P(GrpcTest, CompressedRequestsAreReadAndLimitedInflated) {
  for (const grpc_compression_algorithm algorithm : {GRPC_COMPRESS_GZIP, GRPC_COMPRESS_DEFLATE}) {
    grpc::ChannelArguments arguments;
    arguments.SetCompressionAlgorithm(algorithm);
    auto stub = GRPCInferenceService::NewStub(grpc::CreateCustomChannel(
        Target(grpc_->port()), grpc::InsecureChannelCredentials(), arguments));
    ModelInferResponse response;
    const std::vector<int32_t> a(512, 3), b(512, 4);
    grpc::Status status =
        Call([&](auto* c) { return stub->ModelInfer(c, AddRequest(a, b, true), &response); });
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(response.raw_output_contents_size(), 2);
    EXPECT_EQ(FromBytes<int32_t>(response.raw_output_contents(0)), std::vector<int32_t>(512, 7));
  }

  KServeGrpcOptions options = Options();
  options.max_receive_bytes = 1024;
  auto small = KServeGrpc::Start(*server_, options);
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  grpc::ChannelArguments arguments;
  arguments.SetCompressionAlgorithm(GRPC_COMPRESS_GZIP);
  auto stub = GRPCInferenceService::NewStub(grpc::CreateCustomChannel(
      Target((*small)->port()), grpc::InsecureChannelCredentials(), arguments));
  ModelInferResponse response;
  // 4 KiB of zeros: far below the limit compressed, above it inflated.
  const grpc::Status status = Call([&](auto* c) {
    return stub->ModelInfer(
        c, AddRequest(std::vector<int32_t>(512), std::vector<int32_t>(512), true), &response);
  });
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
}

TEST_P(GrpcTest, StartFailsOnABusyPort) {
  KServeGrpcOptions options = Options();
  options.port = grpc_->port();
  auto second = KServeGrpc::Start(*server_, options);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("cannot listen on 127.0.0.1:"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Engines, GrpcTest,
                         ::testing::Values(GrpcEngine::kCore, GrpcEngine::kNative), EngineName);

}  // namespace
}  // namespace rampart::api
