#include "api/kserve_grpc_codec.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>

namespace rampart::api {
namespace {

using inference::ModelInferRequest;

template <typename T>
std::string Bytes(std::vector<T> values) {
  std::string out(values.size() * sizeof(T), '\0');
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

ModelInferRequest::InferInputTensor* AddInput(ModelInferRequest& request, std::string name,
                                              std::string datatype, std::vector<int64_t> shape) {
  auto* input = request.add_inputs();
  input->set_name(std::move(name));
  input->set_datatype(std::move(datatype));
  for (int64_t dim : shape) input->add_shape(dim);
  return input;
}

struct TypedCase {
  std::string datatype;
  std::function<void(inference::InferTensorContents&)> fill;
  std::string expected;  // raw little-endian bytes
};

TEST(DecodeGrpcInfer, EveryTypedContentsFieldBecomesRawBytes) {
  const std::vector<TypedCase> cases = {
      {"BOOL",
       [](auto& c) {
         c.add_bool_contents(true);
         c.add_bool_contents(false);
       },
       std::string("\x01\x00", 2)},
      {"INT8",
       [](auto& c) {
         c.add_int_contents(-128);
         c.add_int_contents(127);
       },
       Bytes<int8_t>({-128, 127})},
      {"INT16",
       [](auto& c) {
         c.add_int_contents(-300);
         c.add_int_contents(300);
       },
       Bytes<int16_t>({-300, 300})},
      {"INT32",
       [](auto& c) {
         c.add_int_contents(-70000);
         c.add_int_contents(70000);
       },
       Bytes<int32_t>({-70000, 70000})},
      {"INT64",
       [](auto& c) {
         c.add_int64_contents(-(int64_t{1} << 40));
         c.add_int64_contents(1);
       },
       Bytes<int64_t>({-(int64_t{1} << 40), 1})},
      {"UINT8",
       [](auto& c) {
         c.add_uint_contents(0);
         c.add_uint_contents(255);
       },
       Bytes<uint8_t>({0, 255})},
      {"UINT16",
       [](auto& c) {
         c.add_uint_contents(1);
         c.add_uint_contents(65535);
       },
       Bytes<uint16_t>({1, 65535})},
      {"UINT32",
       [](auto& c) {
         c.add_uint_contents(1);
         c.add_uint_contents(4000000000u);
       },
       Bytes<uint32_t>({1, 4000000000u})},
      {"UINT64",
       [](auto& c) {
         c.add_uint64_contents(1);
         c.add_uint64_contents(uint64_t{1} << 63);
       },
       Bytes<uint64_t>({1, uint64_t{1} << 63})},
      {"FP32",
       [](auto& c) {
         c.add_fp32_contents(0.5f);
         c.add_fp32_contents(-2.25f);
       },
       Bytes<float>({0.5f, -2.25f})},
      {"FP64",
       [](auto& c) {
         c.add_fp64_contents(0.1);
         c.add_fp64_contents(-1e300);
       },
       Bytes<double>({0.1, -1e300})},
      {"BYTES",
       [](auto& c) {
         c.add_bytes_contents("hi");
         c.add_bytes_contents("");
       },
       std::string("\x02\x00\x00\x00hi\x00\x00\x00\x00", 10)},
  };
  for (const TypedCase& each : cases) {
    SCOPED_TRACE(each.datatype);
    ModelInferRequest request;
    request.set_model_name("m");
    each.fill(*AddInput(request, "x", each.datatype, {1, 2})->mutable_contents());
    auto decoded = DecodeInferRequest(request);
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    ASSERT_EQ((*decoded)->inputs.size(), 1u);
    EXPECT_EQ(tensor::DataTypeName((*decoded)->inputs[0].datatype), each.datatype);
    EXPECT_EQ((*decoded)->inputs[0].shape, (tensor::Shape{1, 2}));
    EXPECT_EQ((*decoded)->inputs[0].data, each.expected);
  }
}

TEST(DecodeGrpcInfer, MovesRawContentsAndReadsEverythingElse) {
  ModelInferRequest request;
  request.set_model_name("m");
  request.set_model_version("3");
  request.set_id("r1");
  (*request.mutable_parameters())["priority"].set_uint64_param(2);
  (*request.mutable_parameters())["timeout"].set_int64_param(5000);
  (*request.mutable_parameters())["binary_data_output"].set_bool_param(true);  // ignored
  AddInput(request, "a", "FP16", {2});
  request.add_raw_input_contents(std::string("\x00\x3c\x00\x40", 4));
  request.add_outputs()->set_name("y");
  auto decoded = DecodeInferRequest(request);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  const serve::InferRequest& out = **decoded;
  EXPECT_EQ(out.model_name, "m");
  EXPECT_EQ(out.model_version, 3);
  EXPECT_EQ(out.id, "r1");
  EXPECT_EQ(out.priority, 2u);
  EXPECT_EQ(out.timeout_us, 5000u);
  EXPECT_EQ(out.inputs[0].data, std::string("\x00\x3c\x00\x40", 4));
  EXPECT_EQ(out.requested_outputs, (std::vector<std::string>{"y"}));
  EXPECT_TRUE(request.raw_input_contents(0).empty()) << "raw bytes are moved, not copied";
}

TEST(DecodeGrpcInfer, EmptyTensorNeedsNoData) {
  ModelInferRequest request;
  AddInput(request, "a", "FP32", {0, 4});
  auto decoded = DecodeInferRequest(request);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_TRUE((*decoded)->inputs[0].data.empty());
}

struct BadCase {
  std::string label;
  std::function<void(ModelInferRequest&)> build;
  StatusCode code;
  std::string message;
};

TEST(DecodeGrpcInfer, BadInputNamesTheProblem) {
  const std::vector<BadCase> cases = {
      {"unknown datatype",
       [](auto& r) { AddInput(r, "a", "INT33", {1})->mutable_contents()->add_int_contents(1); },
       StatusCode::kInvalidArgument, "input 'a': unknown datatype 'INT33'"},
      {"wrong contents field",
       [](auto& r) { AddInput(r, "a", "INT32", {1})->mutable_contents()->add_fp32_contents(1); },
       StatusCode::kInvalidArgument,
       "input 'a': datatype INT32 takes int_contents, but "
       "fp32_contents is set"},
      {"element count",
       [](auto& r) {
         AddInput(r, "a", "INT32", {2, 2})->mutable_contents()->add_int_contents(1);
       },
       StatusCode::kInvalidArgument,
       "input 'a': shape [2,2] needs 4 elements but int_contents "
       "has 1"},
      {"contents and raw",
       [](auto& r) {
         AddInput(r, "a", "INT32", {1})->mutable_contents()->add_int_contents(1);
         r.add_raw_input_contents(Bytes<int32_t>({1}));
       },
       StatusCode::kInvalidArgument,
       "input 'a': 'contents' must not be set when the request "
       "uses raw_input_contents"},
      {"raw count",
       [](auto& r) {
         AddInput(r, "a", "INT32", {1});
         AddInput(r, "b", "INT32", {1});
         r.add_raw_input_contents(Bytes<int32_t>({1}));
       },
       StatusCode::kInvalidArgument,
       "raw_input_contents has 1 entries but the request has 2 "
       "inputs"},
      {"FP16 typed",
       [](auto& r) { AddInput(r, "a", "FP16", {1})->mutable_contents()->add_fp32_contents(1); },
       StatusCode::kInvalidArgument,
       "input 'a': FP16 data cannot travel in typed contents; "
       "send it in raw_input_contents"},
      {"BF16 typed",
       [](auto& r) { AddInput(r, "a", "BF16", {1})->mutable_contents()->add_fp32_contents(1); },
       StatusCode::kInvalidArgument, "BF16 data cannot travel in typed contents"},
      {"no data", [](auto& r) { AddInput(r, "a", "INT32", {1}); }, StatusCode::kInvalidArgument,
       "input 'a': no data; set 'contents' or raw_input_contents"},
      {"negative dim",
       [](auto& r) { AddInput(r, "a", "INT32", {-1})->mutable_contents()->add_int_contents(1); },
       StatusCode::kInvalidArgument, "input 'a': shape [-1] has a negative dimension"},
      {"INT8 out of range",
       [](auto& r) { AddInput(r, "a", "INT8", {1})->mutable_contents()->add_int_contents(200); },
       StatusCode::kInvalidArgument, "input 'a': element 0 = 200 is out of range for INT8"},
      {"UINT16 out of range",
       [](auto& r) {
         AddInput(r, "a", "UINT16", {1})->mutable_contents()->add_uint_contents(70000);
       },
       StatusCode::kInvalidArgument, "out of range for UINT16"},
      {"unnamed input", [](auto& r) { AddInput(r, "", "INT32", {0}); },
       StatusCode::kInvalidArgument, "inputs[0]: 'name' is required"},
      {"bad version", [](auto& r) { r.set_model_version("v1"); }, StatusCode::kInvalidArgument,
       "'v1' is not a valid model version"},
      // Triton's words (SetInferenceRequestMetadata).
      {"priority type",
       [](auto& r) { (*r.mutable_parameters())["priority"].set_string_param("1"); },
       StatusCode::kInvalidArgument,
       "invalid value type for 'priority' parameter, expected int64_param or uint64_param."},
      {"negative priority",
       [](auto& r) { (*r.mutable_parameters())["priority"].set_int64_param(-1); },
       StatusCode::kInvalidArgument, "invalid value for 'priority', expected value >= 0."},
      {"negative timeout",
       [](auto& r) { (*r.mutable_parameters())["timeout"].set_int64_param(-5); },
       StatusCode::kInvalidArgument, "invalid value for 'timeout', expected value >= 0."},
      {"sequence_end type",
       [](auto& r) { (*r.mutable_parameters())["sequence_end"].set_string_param("yes"); },
       StatusCode::kInvalidArgument,
       "invalid value type for 'sequence_end' parameter, expected bool_param."},
      {"unset custom parameter", [](auto& r) { (*r.mutable_parameters())["mine"]; },
       StatusCode::kInvalidArgument,
       "invalid value type for 'mine' parameter, expected int64_param, bool_param, or "
       "string_param."},
      {"shared memory input",
       [](auto& r) {
         auto* input = AddInput(r, "a", "INT32", {1});
         (*input->mutable_parameters())["shared_memory_region"].set_string_param("r");
       },
       StatusCode::kUnimplemented, "input 'a': shared memory is not supported"},
      // tritonclient sends no raw entry for a shared-memory input: the reason is named, not the
      // count.
      {"shared memory beside raw inputs",
       [](auto& r) {
         AddInput(r, "a", "INT32", {1});
         auto* input = AddInput(r, "b", "INT32", {1});
         (*input->mutable_parameters())["shared_memory_region"].set_string_param("r");
         r.add_raw_input_contents(Bytes<int32_t>({1}));
       },
       StatusCode::kUnimplemented, "input 'b': shared memory is not supported"},
      {"shared memory output",
       [](auto& r) {
         auto* output = r.add_outputs();
         output->set_name("y");
         (*output->mutable_parameters())["shared_memory_region"].set_string_param("r");
       },
       StatusCode::kUnimplemented, "output 'y': shared memory is not supported"},
      {"classification",
       [](auto& r) {
         auto* output = r.add_outputs();
         output->set_name("y");
         (*output->mutable_parameters())["classification"].set_int64_param(3);
       },
       StatusCode::kUnimplemented, "output 'y': the classification extension is not supported"},
  };
  for (const BadCase& each : cases) {
    SCOPED_TRACE(each.label);
    ModelInferRequest request;
    request.set_model_name("m");
    each.build(request);
    auto decoded = DecodeInferRequest(request);
    ASSERT_FALSE(decoded.ok());
    EXPECT_EQ(decoded.status().code(), each.code) << decoded.status().ToString();
    EXPECT_NE(decoded.status().message().find(each.message), std::string::npos)
        << decoded.status().message();
  }
}

TEST(EncodeGrpcInfer, MovesOutputsIntoRawContents) {
  serve::InferResponse response;
  response.model_name = "m";
  response.model_version = 2;
  response.id = "r";
  response.outputs.push_back({"y", tensor::DataType::kInt32, {1, 2}, Bytes<int32_t>({7, 8})});
  inference::ModelInferResponse out;
  EncodeInferResponse(response, out);
  EXPECT_EQ(out.model_name(), "m");
  EXPECT_EQ(out.model_version(), "2");
  EXPECT_EQ(out.id(), "r");
  ASSERT_EQ(out.outputs_size(), 1);
  EXPECT_EQ(out.outputs(0).name(), "y");
  EXPECT_EQ(out.outputs(0).datatype(), "INT32");
  EXPECT_EQ(std::vector<int64_t>(out.outputs(0).shape().begin(), out.outputs(0).shape().end()),
            (std::vector<int64_t>{1, 2}));
  ASSERT_EQ(out.raw_output_contents_size(), 1);
  EXPECT_EQ(out.raw_output_contents(0), Bytes<int32_t>({7, 8}));
}

TEST(ToGrpcStatus, MapsEveryCode) {
  const std::vector<std::pair<Status, grpc::StatusCode>> cases = {
      {Status::Ok(), grpc::StatusCode::OK},
      {NotFound("x"), grpc::StatusCode::NOT_FOUND},
      {InvalidArgument("x"), grpc::StatusCode::INVALID_ARGUMENT},
      {Unavailable("x"), grpc::StatusCode::UNAVAILABLE},
      {Unimplemented("x"), grpc::StatusCode::UNIMPLEMENTED},
      {Internal("x"), grpc::StatusCode::INTERNAL},
      {ResourceExhausted("x"), grpc::StatusCode::RESOURCE_EXHAUSTED},
      {PayloadTooLarge("x"), grpc::StatusCode::RESOURCE_EXHAUSTED},
      {Cancelled("x"), grpc::StatusCode::CANCELLED},
      {AlreadyExists("x"), grpc::StatusCode::ALREADY_EXISTS},
      {PermissionDenied("x"), grpc::StatusCode::PERMISSION_DENIED},
      {Unauthenticated("x"), grpc::StatusCode::UNAUTHENTICATED},
      {FailedPrecondition("x"), grpc::StatusCode::FAILED_PRECONDITION},
  };
  for (const auto& [status, code] : cases) {
    SCOPED_TRACE(status.ToString());
    const grpc::Status mapped = ToGrpcStatus(status);
    EXPECT_EQ(mapped.error_code(), code);
    EXPECT_EQ(mapped.error_message(), status.message());
  }
}

// Every gRPC error carries a message, as Triton's do.
TEST(ToGrpcStatus, AnErrorWithoutAMessageGetsItsCodesName) {
  const grpc::Status mapped = ToGrpcStatus(Status(StatusCode::kUnimplemented, ""));
  EXPECT_EQ(mapped.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_FALSE(mapped.error_message().empty());
}

// Whether raw data is the size its shape needs is the model's check, in Triton's words that
// name the model (ModelVersion::Validate); the codec only moves the bytes.
TEST(DecodeGrpcInfer, RawDataOfAnySizeIsLeftToTheModelsCheck) {
  ModelInferRequest request;
  request.set_model_name("m");
  AddInput(request, "a", "INT32", {1, 4});
  request.add_raw_input_contents(Bytes<int32_t>({1, 2, 3}));
  auto decoded = DecodeInferRequest(request);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ((*decoded)->inputs[0].data.size(), 12u);
}

TEST(ParseModelVersion, EmptyIsLatestAndOnlyDigitsParse) {
  EXPECT_EQ(*ParseModelVersion(""), serve::kLatestVersion);
  EXPECT_EQ(*ParseModelVersion("12"), 12);
  EXPECT_FALSE(ParseModelVersion("-1").ok());
  EXPECT_FALSE(ParseModelVersion("1x").ok());
}

}  // namespace
}  // namespace rampart::api
