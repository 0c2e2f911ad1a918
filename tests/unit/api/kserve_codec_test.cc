#include "api/kserve_codec.h"

#include <gtest/gtest.h>

#include <malloc.h>

#include <cstdint>
#include <cstring>
#include <thread>

namespace rampart::api {
namespace {

template <typename T>
std::vector<T> Values(const tensor::Tensor& t) {
  std::vector<T> out(t.data.size() / sizeof(T));
  std::memcpy(out.data(), t.data.data(), t.data.size());
  return out;
}

TEST(DecodeInferRequest, ReadsFlatAndNestedData) {
  auto decoded = DecodeInferRequest(R"({"id":"r1","inputs":[
      {"name":"a","shape":[2,2],"datatype":"INT32","data":[1,2,3,4]},
      {"name":"b","shape":[2,2],"datatype":"FP32","data":[[0.5,1],[2,-3]]},
      {"name":"c","shape":[2],"datatype":"BOOL","data":[true,false]},
      {"name":"d","shape":[1],"datatype":"BYTES","data":["hi"]}],
      "outputs":[{"name":"y","parameters":{"binary_data":true}}]})",
                                    std::nullopt);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  const serve::InferRequest& request = *decoded->request;
  EXPECT_EQ(request.id, "r1");
  ASSERT_EQ(request.inputs.size(), 4u);
  EXPECT_EQ(Values<int32_t>(request.inputs[0]), (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(Values<float>(request.inputs[1]), (std::vector<float>{0.5f, 1, 2, -3}));
  EXPECT_EQ(request.inputs[2].data, std::string("\x01\x00", 2));
  EXPECT_EQ(request.inputs[3].data, std::string("\x02\x00\x00\x00hi", 6));
  EXPECT_EQ(request.requested_outputs, (std::vector<std::string>{"y"}));
  EXPECT_TRUE(decoded->encoding.Binary("y"));
  EXPECT_FALSE(decoded->encoding.Binary("z"));
}

TEST(DecodeInferRequest, ConvertsEveryFixedSizeDatatype) {
  auto decoded = DecodeInferRequest(R"({"inputs":[
      {"name":"u8","shape":[2],"datatype":"UINT8","data":[0,255]},
      {"name":"u16","shape":[2],"datatype":"UINT16","data":[1,65535]},
      {"name":"u32","shape":[1],"datatype":"UINT32","data":[4294967295]},
      {"name":"u64","shape":[1],"datatype":"UINT64","data":[18446744073709551615]},
      {"name":"i8","shape":[2],"datatype":"INT8","data":[-128,127]},
      {"name":"i16","shape":[1],"datatype":"INT16","data":[-32768]},
      {"name":"i64","shape":[1],"datatype":"INT64","data":[-9223372036854775808]},
      {"name":"f64","shape":[3],"datatype":"FP64","data":[0.25,-1,18446744073709551615]},
      {"name":"f32","shape":[1,1,2],"datatype":"FP32","data":[[[7,1e-3]]]}]})",
                                    std::nullopt);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  const std::vector<tensor::Tensor>& in = decoded->request->inputs;
  ASSERT_EQ(in.size(), 9u);
  EXPECT_EQ(Values<uint8_t>(in[0]), (std::vector<uint8_t>{0, 255}));
  EXPECT_EQ(Values<uint16_t>(in[1]), (std::vector<uint16_t>{1, 65535}));
  EXPECT_EQ(Values<uint32_t>(in[2]), (std::vector<uint32_t>{4294967295u}));
  EXPECT_EQ(Values<uint64_t>(in[3]), (std::vector<uint64_t>{18446744073709551615u}));
  EXPECT_EQ(Values<int8_t>(in[4]), (std::vector<int8_t>{-128, 127}));
  EXPECT_EQ(Values<int16_t>(in[5]), (std::vector<int16_t>{-32768}));
  EXPECT_EQ(Values<int64_t>(in[6]), (std::vector<int64_t>{INT64_MIN}));
  EXPECT_EQ(Values<double>(in[7]), (std::vector<double>{0.25, -1, 18446744073709551615.0}));
  EXPECT_EQ(Values<float>(in[8]), (std::vector<float>{7, 1e-3f}));
}

TEST(DecodeInferRequest, RefusesDataNestedTooDeeply) {
  const std::string deep = std::string(40, '[') + "1" + std::string(40, ']');
  for (const char* datatype : {"INT32", "BYTES"}) {
    auto decoded =
        DecodeInferRequest(std::string(R"({"inputs":[{"name":"a","shape":[1],)") +
                               R"("datatype":")" + datatype + R"(","data":)" + deep + "}]}",
                           std::nullopt);
    ASSERT_FALSE(decoded.ok()) << datatype;
    EXPECT_NE(decoded.status().message().find("nested too deeply"), std::string::npos)
        << decoded.status().message();
  }
}

TEST(DecodeInferRequest, ReadsBinaryTensorData) {
  const std::string json =
      R"({"inputs":[{"name":"a","shape":[2],"datatype":"INT32","parameters":{"binary_data_size":8}},)"
      R"({"name":"b","shape":[1],"datatype":"FP16","parameters":{"binary_data_size":2}}],)"
      R"("parameters":{"binary_data_output":true}})";
  std::string body = json;
  const int32_t values[2] = {7, -7};
  body.append(reinterpret_cast<const char*>(values), 8);
  body.append("\x00\x3c", 2);  // 1.0 in FP16
  const std::string length = std::to_string(json.size());
  auto decoded = DecodeInferRequest(body, length);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(Values<int32_t>(decoded->request->inputs[0]), (std::vector<int32_t>{7, -7}));
  EXPECT_EQ(decoded->request->inputs[1].data.size(), 2u);
  EXPECT_TRUE(decoded->encoding.Binary("anything"));
}

// Triton's HTTP front end: a listed output is binary only when its own binary_data says so;
// binary_data_output applies to the outputs the request does not list.
TEST(DecodeInferRequest, BinaryDataOutputLeavesListedOutputsToTheirOwnSetting) {
  const std::string json =
      R"({"inputs":[{"name":"a","shape":[1],"datatype":"INT32","data":[1]}],)"
      R"("parameters":{"binary_data_output":true},)"
      R"("outputs":[{"name":"plain"},{"name":"binary","parameters":{"binary_data":true}},)"
      R"({"name":"json","parameters":{"binary_data":false}}]})";
  auto decoded = DecodeInferRequest(json, std::nullopt);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_FALSE(decoded->encoding.Binary("plain"));
  EXPECT_TRUE(decoded->encoding.Binary("binary"));
  EXPECT_FALSE(decoded->encoding.Binary("json"));
  EXPECT_TRUE(decoded->encoding.Binary("unlisted"));
}

// Triton's HTTP front end ignores the sequence parameters on a model without a sequence
// batcher, and custom parameters that are strings, numbers or booleans, in the request and in
// its inputs' and outputs' parameters; the reserved ones need their types.
TEST(DecodeInferRequest, ParametersTritonIgnoresAreIgnored) {
  const std::string json =
      R"({"inputs":[{"name":"a","shape":[1],"datatype":"INT32","data":[1],)"
      R"("parameters":{"custom":{"any":"thing"}}}],)"
      R"("outputs":[{"name":"y","parameters":{"custom":[1]}}],)"
      R"("parameters":{"sequence_id":7,"sequence_start":true,"sequence_end":false,)"
      R"("my_text":"x","my_int":-3,"my_number":0.5,"my_flag":true,"priority":2,"timeout":9}})";
  auto decoded = DecodeInferRequest(json, std::nullopt);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->request->priority, 2u);
  EXPECT_EQ(decoded->request->timeout_us, 9u);
  EXPECT_TRUE(
      DecodeInferRequest(R"({"inputs":[],"parameters":{"sequence_id":"corr-1"}})", std::nullopt)
          .ok());

  const auto refused = [](std::string_view parameters) {
    auto bad = DecodeInferRequest(fmt::format(R"({{"inputs":[],"parameters":{{{}}}}})", parameters),
                                  std::nullopt);
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument) << parameters;
    return bad.status().message();
  };
  EXPECT_EQ(refused(R"("triton_anything":1)"),
            "parameter keys starting with 'triton_' are reserved for Triton usage and should not "
            "be specified.");
  EXPECT_EQ(refused(R"("mine":{"a":1})"),
            "parameter 'mine' has invalid type. It should be either 'int', 'bool', or 'string'.");
  EXPECT_EQ(refused(R"("sequence_start":1)").rfind("Unable to parse 'sequence_start': ", 0), 0u);
  EXPECT_EQ(refused(R"("sequence_id":-1)").rfind("Unable to parse 'sequence_id': ", 0), 0u);
  EXPECT_EQ(refused(R"("priority":"high")").rfind("Unable to parse 'priority': ", 0), 0u);
}

// Whether binary data is the size its shape needs is the model's check, in Triton's words that
// name the model (ModelVersion::Validate); the codec only cuts the bytes.
TEST(DecodeInferRequest, BinaryDataOfAnySizeIsLeftToTheModelsCheck) {
  const std::string json =
      R"({"inputs":[{"name":"a","shape":[2],"datatype":"INT32","parameters":{"binary_data_size":4}}]})";
  auto decoded = DecodeInferRequest(json + std::string(4, '\0'), std::to_string(json.size()));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->request->inputs[0].data.size(), 4u);
}

struct BadBody {
  std::string body;
  std::optional<std::string> header_length;
  std::string message;
};

TEST(DecodeInferRequest, RejectsBadInputPrecisely) {
  const std::string binary_json =
      R"({"inputs":[{"name":"a","shape":[2],"datatype":"INT32","parameters":{"binary_data_size":8}}]})";
  const std::vector<BadBody> cases = {
      {"{not json", std::nullopt, "malformed JSON"},
      {"[]", std::nullopt, "must be a JSON object"},
      {R"({})", std::nullopt, "'inputs' is required"},
      {R"({"inputs":[{"shape":[1],"datatype":"INT32","data":[1]}]})", std::nullopt,
       "'name' is required"},
      {R"({"inputs":[{"name":"a","shape":[1],"datatype":"INT33","data":[1]}]})", std::nullopt,
       "unknown datatype 'INT33'"},
      {R"({"inputs":[{"name":"a","shape":[3],"datatype":"INT32","data":[1,2]}]})", std::nullopt,
       "shape [3] needs 3 elements but 'data' has 2"},
      // More elements than the shape: the message gives the real count.
      {R"({"inputs":[{"name":"a","shape":[2],"datatype":"FP32","data":[[1,2],[3,4],[5]]}]})",
       std::nullopt, "shape [2] needs 2 elements but 'data' has 5"},
      // A shape no body of this size could fill: refused without reserving room for it.
      {R"({"inputs":[{"name":"a","shape":[1000000000000],"datatype":"FP64","data":[1,2]}]})",
       std::nullopt, "needs 1000000000000 elements but 'data' has 2"},
      // Element errors past the shape's end are still reported, by their index.
      {R"({"inputs":[{"name":"a","shape":[1],"datatype":"UINT16","data":[1,70000]}]})",
       std::nullopt, "data element 1 = 70000 is out of range for UINT16"},
      {R"({"inputs":[{"name":"a","shape":[2],"datatype":"INT32","data":[1,"x"]}]})", std::nullopt,
       "data element 1 must be an integer, got string"},
      {R"({"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":["1.0"]}]})", std::nullopt,
       "must be a number, got string"},
      {R"({"inputs":[{"name":"a","shape":[1],"datatype":"INT8","data":[300]}]})", std::nullopt,
       "out of range for INT8"},
      {R"({"inputs":[{"name":"a","shape":[1],"datatype":"UINT8","data":[-1]}]})", std::nullopt,
       "data element 0 must be a non-negative integer, got number"},
      {R"({"inputs":[{"name":"a","shape":[1],"datatype":"BOOL","data":[1]}]})", std::nullopt,
       "data element 0 must be a boolean, got number"},
      {R"({"inputs":[{"name":"a","shape":[1],"datatype":"BYTES","data":[1]}]})", std::nullopt,
       "data element 0 must be a string, got number"},
      {R"({"inputs":[{"name":"a","shape":[1],"datatype":"FP16","data":[1.0]}]})", std::nullopt,
       "cannot be sent as JSON"},
      {R"({"inputs":[{"name":"a","shape":[-1],"datatype":"INT32","data":[1]}]})", std::nullopt,
       "'shape' must hold non-negative integers"},
      {binary_json + std::string(4, '\0'), std::to_string(binary_json.size()),
       "runs past the end of the binary data"},
      {binary_json + std::string(12, '\0'), std::to_string(binary_json.size()),
       "4 bytes of binary data follow the JSON but no input claims them"},
      {binary_json, std::string("9999"), "larger than the request body"},
      {binary_json, std::string("12abc"), "is not a byte count"},
      {binary_json + std::string(8, '\0'), std::to_string(binary_json.size() - 1),
       "malformed JSON"},
  };
  for (const BadBody& bad : cases) {
    std::optional<std::string_view> length;
    if (bad.header_length) length = *bad.header_length;
    auto decoded = DecodeInferRequest(bad.body, length);
    ASSERT_FALSE(decoded.ok()) << bad.body;
    EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument) << bad.body;
    EXPECT_NE(decoded.status().message().find(bad.message), std::string::npos)
        << bad.body << " -> " << decoded.status().message();
  }
}

serve::InferResponse SampleResponse() {
  serve::InferResponse response;
  response.model_name = "m";
  response.model_version = 3;
  response.id = "abc";
  tensor::Tensor out{"y", tensor::DataType::kFp32, {1, 2}, {}};
  const float values[2] = {0.1f, -2.0f};
  out.data.assign(reinterpret_cast<const char*>(values), 8);
  response.outputs.push_back(out);
  tensor::Tensor text{"s", tensor::DataType::kBytes, {1}, {}};
  EXPECT_TRUE(tensor::AppendBytesElement("ok", text.data).ok());
  response.outputs.push_back(text);
  return response;
}

TEST(EncodeInferResponse, WritesJsonData) {
  auto encoded = EncodeInferResponse(SampleResponse(), {});
  ASSERT_TRUE(encoded.ok());
  EXPECT_FALSE(encoded->header_length.has_value());
  EXPECT_EQ(encoded->body, R"({"model_name":"m","model_version":"3","id":"abc","outputs":[)"
                           R"({"name":"y","datatype":"FP32","shape":[1,2],"data":[0.1,-2.0]},)"
                           R"({"name":"s","datatype":"BYTES","shape":[1],"data":["ok"]}]})");
}

TEST(EncodeInferResponse, AppendsBinaryOutputsAfterTheJson) {
  OutputEncoding encoding;
  encoding.per_output.emplace_back("y", true);
  auto encoded = EncodeInferResponse(SampleResponse(), encoding);
  ASSERT_TRUE(encoded.ok());
  ASSERT_TRUE(encoded->header_length.has_value());
  const std::string json = encoded->body.substr(0, *encoded->header_length);
  EXPECT_NE(json.find(R"("parameters":{"binary_data_size":8})"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("data":["ok"])"), std::string::npos) << json;
  EXPECT_EQ(encoded->body.size(), *encoded->header_length + 8);
}

// RapidJSON reserves six bytes per character of a string; an 8 MiB BYTES element as JSON must not
// come back in a 48 MiB buffer.
TEST(EncodeInferResponse, ALargeStringComesBackWithoutItsWorstCaseReserve) {
  serve::InferResponse response;
  tensor::Tensor text{"s", tensor::DataType::kBytes, {1}, {}};
  EXPECT_TRUE(tensor::AppendBytesElement(std::string(8 << 20, 'x'), text.data).ok());
  response.outputs.push_back(std::move(text));
  auto encoded = EncodeInferResponse(response, {});
  ASSERT_TRUE(encoded.ok()) << encoded.status().ToString();
  EXPECT_GT(encoded->body.size(), size_t{8} << 20);
  EXPECT_LT(encoded->body.capacity(), 2 * encoded->body.size());
}

// simdjson keeps ~15 bytes per byte of the largest document it parsed; an I/O thread's parser
// must not keep that for a 4 MiB request once it is decoded.
TEST(DecodeInferRequest, ALargeRequestLeavesNoParseBuffersBehind) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "mallinfo2 sees glibc's heap, which AddressSanitizer replaces";
#endif
  constexpr int64_t kCount = 2 << 20;  // "0," each: 4 MiB of JSON
  std::string body = R"({"inputs":[{"name":"a","shape":[)" + std::to_string(kCount) +
                     R"(],"datatype":"INT8","data":[)";
  for (int64_t i = 0; i < kCount; ++i) body += i == 0 ? "0" : ",0";
  body += "]}]}";
  const auto allocated = [] {
    const struct mallinfo2 info = mallinfo2();
    return info.uordblks + info.hblkhd;
  };
  std::thread([&] {  // a thread of its own, as an I/O thread has its parser
    const size_t before = allocated();
    {
      auto decoded = DecodeInferRequest(body, std::nullopt);
      ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    }
    EXPECT_LT(allocated(), before + (size_t{8} << 20));
  })
      .join();
}

TEST(EncodeInferResponse, Fp16NeedsBinary) {
  serve::InferResponse response;
  response.outputs.push_back({"h", tensor::DataType::kFp16, {1}, std::string(2, '\0')});
  EXPECT_EQ(EncodeInferResponse(response, {}).status().code(), StatusCode::kInvalidArgument);
  OutputEncoding binary;
  binary.all_binary = true;
  EXPECT_TRUE(EncodeInferResponse(response, binary).ok());
}

}  // namespace
}  // namespace rampart::api
