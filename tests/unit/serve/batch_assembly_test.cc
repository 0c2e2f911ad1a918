#include "serve/batch_assembly.h"

#include <gtest/gtest.h>

#include <cstring>

namespace rampart::serve {
namespace {

using tensor::DataType;
using tensor::Shape;
using tensor::Tensor;

model::ModelConfig Config(std::string_view text) {
  auto parsed = model::ParseConfigText(text, "config.pbtxt");
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  model::ModelConfig config = parsed->config;
  const Status valid = model::CompleteAndValidate(config, "m", "config.pbtxt");
  EXPECT_TRUE(valid.ok()) << valid.ToString();
  return config;
}

// Triton's ragged batching example: INPUT [-1] ragged, INDEX its accumulated element count.
constexpr std::string_view kRagged = R"(
  name: "m" backend: "pytorch" max_batch_size: 16
  input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]
  output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
  batch_input [ { kind: BATCH_ACCUMULATED_ELEMENT_COUNT target_name: "INDEX"
                  data_type: TYPE_FP32 source_input: "INPUT" } ]
)";

Tensor Floats(std::string name, Shape shape, std::vector<float> values) {
  Tensor tensor{std::move(name), DataType::kFp32, std::move(shape), {}};
  tensor.data.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  return tensor;
}

template <typename T>
std::vector<T> Values(const Tensor& tensor) {
  std::vector<T> values(tensor.data.size() / sizeof(T));
  std::memcpy(values.data(), tensor.data.data(), tensor.data.size());
  return values;
}

// Each request's inputs, and the pointers Assemble takes.
struct Requests {
  std::vector<std::vector<Tensor>> inputs;
  std::vector<std::vector<Tensor>*> Pointers() {
    std::vector<std::vector<Tensor>*> pointers;
    for (auto& request : inputs) pointers.push_back(&request);
    return pointers;
  }
};

TEST(BatchAssembly, ConcatenatesAlongTheBatchDimension) {
  const BatchAssembly assembly;
  EXPECT_TRUE(assembly.PassThrough());
  Requests requests{{{Floats("x", {1, 2}, {1, 2})}, {Floats("x", {2, 2}, {3, 4, 5, 6})}}};
  const std::vector<Tensor> inputs = assembly.Assemble(requests.Pointers(), {1, 2});
  ASSERT_EQ(inputs.size(), 1u);
  EXPECT_EQ(inputs[0].shape, (Shape{3, 2}));
  EXPECT_EQ(Values<float>(inputs[0]), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST(BatchAssembly, FlattensRaggedInputsAndAddsTheirAccumulatedCount) {
  const BatchAssembly assembly = BatchAssembly::FromConfig(Config(kRagged));
  EXPECT_FALSE(assembly.PassThrough());
  EXPECT_TRUE(assembly.IsRagged("INPUT"));
  Requests requests{{{Floats("INPUT", {1, 3}, {1, 1, 1})},
                     {Floats("INPUT", {1, 4}, {2, 2, 2, 2})},
                     {Floats("INPUT", {1, 5}, {3, 3, 3, 3, 3})}}};
  const std::vector<Tensor> inputs = assembly.Assemble(requests.Pointers(), {1, 1, 1});
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_EQ(inputs[0].name, "INPUT");
  EXPECT_EQ(inputs[0].shape, (Shape{12}));
  EXPECT_EQ(Values<float>(inputs[0]), (std::vector<float>{1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 3}));
  EXPECT_EQ(inputs[1].name, "INDEX");
  EXPECT_EQ(inputs[1].datatype, DataType::kFp32);
  EXPECT_EQ(inputs[1].shape, (Shape{3}));
  EXPECT_EQ(Values<float>(inputs[1]), (std::vector<float>{3, 7, 12}));
}

TEST(BatchAssembly, ALoneRequestIsAssembledToo) {
  const BatchAssembly assembly = BatchAssembly::FromConfig(Config(kRagged));
  Requests requests{{{Floats("INPUT", {1, 3}, {1, 2, 3})}}};
  const std::vector<Tensor> inputs = assembly.Assemble(requests.Pointers(), {1});
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_EQ(inputs[0].shape, (Shape{3}));
  EXPECT_EQ(Values<float>(inputs[0]), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(Values<float>(inputs[1]), (std::vector<float>{3}));
}

// Every kind, as INT32, on Triton's BATCH_ITEM_SHAPE example: a batch-2 request whose items are
// [3, 1] and a batch-1 request whose item is [2, 2].
TEST(BatchAssembly, MakesEveryKindOfBatchInput) {
  const BatchAssembly assembly = BatchAssembly::FromConfig(Config(R"(
    name: "m" backend: "pytorch" max_batch_size: 8
    input [ { name: "x" data_type: TYPE_FP32 dims: [ -1, -1 ] allow_ragged_batch: true } ]
    output [ { name: "y" data_type: TYPE_FP32 dims: [ 1 ] } ]
    batch_input [
      { kind: BATCH_ELEMENT_COUNT target_name: "count" data_type: TYPE_INT32 source_input: "x" },
      { kind: BATCH_ACCUMULATED_ELEMENT_COUNT target_name: "ends" data_type: TYPE_INT32
        source_input: "x" },
      { kind: BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO target_name: "bounds"
        data_type: TYPE_INT32 source_input: "x" },
      { kind: BATCH_MAX_ELEMENT_COUNT_AS_SHAPE target_name: "most" data_type: TYPE_INT32
        source_input: "x" },
      { kind: BATCH_ITEM_SHAPE target_name: "shapes" data_type: TYPE_INT32 source_input: "x" },
      { kind: BATCH_ITEM_SHAPE_FLATTEN target_name: "flat_shapes" target_name: "again"
        data_type: TYPE_INT32 source_input: "x" }
    ]
  )"));
  Requests requests{
      {{Floats("x", {2, 3, 1}, {1, 2, 3, 4, 5, 6})}, {Floats("x", {1, 2, 2}, {7, 8, 9, 10})}}};
  const std::vector<Tensor> inputs = assembly.Assemble(requests.Pointers(), {2, 1});
  ASSERT_EQ(inputs.size(), 8u);
  EXPECT_EQ(inputs[0].shape, (Shape{10}));
  const auto expect = [&](size_t i, std::string_view name, Shape shape,
                          std::vector<int32_t> values) {
    SCOPED_TRACE(name);
    EXPECT_EQ(inputs[i].name, name);
    EXPECT_EQ(inputs[i].datatype, DataType::kInt32);
    EXPECT_EQ(inputs[i].shape, shape);
    EXPECT_EQ(Values<int32_t>(inputs[i]), values);
  };
  expect(1, "count", {2}, {6, 4});
  expect(2, "ends", {2}, {6, 10});
  expect(3, "bounds", {3}, {0, 6, 10});
  expect(4, "most", {6}, {0, 0, 0, 0, 0, 0});
  expect(5, "shapes", {3, 2}, {3, 1, 3, 1, 2, 2});
  expect(6, "flat_shapes", {6}, {3, 1, 3, 1, 2, 2});
  expect(7, "again", {6}, {3, 1, 3, 1, 2, 2});
}

// A per-element output of a ragged input, scattered back by each request's shape, beside a
// per-request output split by batch items.
TEST(BatchAssembly, ScattersBatchOutputsByTheSourceInputsShape) {
  const BatchAssembly assembly = BatchAssembly::FromConfig(Config(R"(
    name: "m" backend: "pytorch" max_batch_size: 8
    input [ { name: "x" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]
    output [ { name: "doubled" data_type: TYPE_FP32 dims: [ -1 ] },
             { name: "total" data_type: TYPE_FP32 dims: [ 1 ] } ]
    batch_input [ { kind: BATCH_ACCUMULATED_ELEMENT_COUNT target_name: "ends"
                    data_type: TYPE_INT32 source_input: "x" } ]
    batch_output [ { kind: BATCH_SCATTER_WITH_INPUT_SHAPE target_name: "doubled"
                     source_input: "x" } ]
  )"));
  EXPECT_FALSE(assembly.PassThrough());
  Requests requests{{{Floats("x", {1, 2}, {1, 2})}, {Floats("x", {1, 3}, {3, 4, 5})}}};
  const std::vector<Tensor> inputs = assembly.Assemble(requests.Pointers(), {1, 1});
  ASSERT_EQ(inputs.size(), 2u);
  // What the model returns: every element doubled (flat), and one total per request.
  std::vector<Tensor> outputs{Floats("doubled", {5}, {2, 4, 6, 8, 10}),
                              Floats("total", {2, 1}, {3, 12})};
  auto parts = assembly.Scatter(outputs, requests.Pointers(), {1, 1});
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ((*parts)[0][0].shape, (Shape{1, 2}));
  EXPECT_EQ(Values<float>((*parts)[0][0]), (std::vector<float>{2, 4}));
  EXPECT_EQ((*parts)[1][0].shape, (Shape{1, 3}));
  EXPECT_EQ(Values<float>((*parts)[1][0]), (std::vector<float>{6, 8, 10}));
  EXPECT_EQ((*parts)[0][1].shape, (Shape{1, 1}));
  EXPECT_EQ(Values<float>((*parts)[1][1]), (std::vector<float>{12}));

  std::vector<Tensor> short_output{Floats("doubled", {4}, {2, 4, 6, 8}),
                                   Floats("total", {2, 1}, {3, 12})};
  auto refused = assembly.Scatter(short_output, requests.Pointers(), {1, 1});
  EXPECT_EQ(refused.status().code(), StatusCode::kInternal);
  EXPECT_NE(refused.status().message().find("output 'doubled' holds 16 bytes"), std::string::npos)
      << refused.status().ToString();
}

// A part whose size overflows (4 bytes times 2^62 elements wrapped round to 0) was cut as an
// empty part, silently.
TEST(BatchAssembly, ABatchOutputPartTooLargeToSizeIsAnError) {
  const BatchAssembly assembly = BatchAssembly::FromConfig(Config(R"(
    name: "m" backend: "pytorch" max_batch_size: 8
    input [ { name: "x" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]
    output [ { name: "doubled" data_type: TYPE_FP32 dims: [ -1 ] } ]
    batch_output [ { kind: BATCH_SCATTER_WITH_INPUT_SHAPE target_name: "doubled"
                     source_input: "x" } ]
  )"));
  Requests requests{{{Floats("x", {1, int64_t{1} << 62}, {1})}}};
  std::vector<Tensor> outputs{Floats("doubled", {1}, {2})};
  auto refused = assembly.Scatter(outputs, requests.Pointers(), {1});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInternal);
  EXPECT_EQ(refused.status().message(),
            "output 'doubled': the part for request 1 of 1, shape [1,4611686018427387904], is too "
            "large");
}

TEST(BatchAssembly, SplitsOutputsByTheRequestsItems) {
  const Tensor output = Floats("y", {3, 2}, {1, 2, 3, 4, 5, 6});
  auto parts = SplitOutput(output, {1, 2}, 3);
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ((*parts)[0].shape, (Shape{1, 2}));
  EXPECT_EQ(Values<float>((*parts)[0]), (std::vector<float>{1, 2}));
  EXPECT_EQ((*parts)[1].shape, (Shape{2, 2}));
  EXPECT_EQ(Values<float>((*parts)[1]), (std::vector<float>{3, 4, 5, 6}));
  EXPECT_EQ(SplitOutput(output, {1, 1}, 2).status().code(), StatusCode::kInternal);
}

// Triton's InferenceResponse::Output::Reshape: an output with a reshape is answered in its dims.
TEST(BatchAssembly, AnswersReshapedOutputsInTheirConfigDims) {
  const BatchAssembly batched = BatchAssembly::FromConfig(Config(R"(
    name: "m" backend: "pytorch" max_batch_size: 8
    input [ { name: "x" data_type: TYPE_FP32 dims: [ 1 ] } ]
    output [ { name: "score" data_type: TYPE_FP32 dims: [ 1 ] reshape { shape: [ ] } },
             { name: "grid" data_type: TYPE_FP32 dims: [ 4, -1 ] reshape { shape: [ 2, 2, -1 ] } },
             { name: "plain" data_type: TYPE_FP32 dims: [ 2 ] } ]
  )"));
  std::vector<Tensor> outputs = {Floats("score", {3}, {1, 2, 3}),
                                 Floats("grid", {3, 2, 2, 5}, std::vector<float>(60)),
                                 Floats("plain", {3, 2}, std::vector<float>(6))};
  ASSERT_TRUE(batched.Finish(outputs, 3, /*passed_through=*/false).ok());
  EXPECT_EQ(outputs[0].shape, (Shape{3, 1}));
  EXPECT_EQ(outputs[1].shape, (Shape{3, 4, 5}));
  EXPECT_EQ(outputs[2].shape, (Shape{3, 2}));

  const BatchAssembly unbatched = BatchAssembly::FromConfig(Config(R"(
    name: "m" backend: "pytorch"
    input [ { name: "x" data_type: TYPE_FP32 dims: [ 6 ] } ]
    output [ { name: "y" data_type: TYPE_FP32 dims: [ 2, 3 ] reshape { shape: [ 6 ] } } ]
  )"));
  std::vector<Tensor> flat = {Floats("y", {6}, std::vector<float>(6))};
  ASSERT_TRUE(unbatched.Finish(flat, 1, /*passed_through=*/true).ok());
  EXPECT_EQ(flat[0].shape, (Shape{2, 3}));

  // A model output that does not match its reshape is the model's fault.
  std::vector<Tensor> wrong = {Floats("y", {5}, std::vector<float>(5))};
  const Status mismatch = unbatched.Finish(wrong, 1, /*passed_through=*/true);
  EXPECT_EQ(mismatch.code(), StatusCode::kInternal);
  EXPECT_EQ(mismatch.message(),
            "output 'y': the model produced shape [5], which does not match its reshape [6]");
}

// A lone request passed through as it is must get what a batch would: its batch items as each
// output's dim 0 (a scalar or a reduced batch used to reach the client when the request was
// alone, and fail when it was batched).
TEST(BatchAssembly, ALonePassedThroughRequestsOutputsKeepItsBatch) {
  const BatchAssembly assembly = BatchAssembly::FromConfig(Config(R"(
    name: "m" backend: "pytorch" max_batch_size: 8
    input [ { name: "x" data_type: TYPE_FP32 dims: [ 2 ] } ]
    output [ { name: "y" data_type: TYPE_FP32 dims: [ 2 ] } ]
  )"));
  std::vector<Tensor> scalar = {Floats("y", {}, {1})};
  const Status refused = assembly.Finish(scalar, 2, /*passed_through=*/true);
  EXPECT_EQ(refused.code(), StatusCode::kInternal);
  EXPECT_EQ(refused.message(), "output 'y' has shape [] but the batch holds 2 items");
  std::vector<Tensor> reduced = {Floats("y", {1, 2}, {1, 2})};
  EXPECT_EQ(assembly.Finish(reduced, 2, /*passed_through=*/true).code(), StatusCode::kInternal);
  std::vector<Tensor> whole = {Floats("y", {2, 2}, {1, 2, 3, 4})};
  EXPECT_TRUE(assembly.Finish(whole, 2, /*passed_through=*/true).ok());
}

// Triton: "output tensor shape does not match size of output", an internal error (the model's
// answer is wrong, not the request). Checked for every protocol (the HTTP encoder used to write
// a truncated output with 200, gRPC sent it as it was).
TEST(BatchAssembly, AnOutputWhoseBytesDoNotFitItsShapeIsAnInternalError) {
  const BatchAssembly assembly = BatchAssembly::FromConfig(Config(R"(
    name: "m" backend: "pytorch"
    input [ { name: "x" data_type: TYPE_INT32 dims: [ 2 ] } ]
    output [ { name: "y" data_type: TYPE_INT32 dims: [ 2 ] },
             { name: "s" data_type: TYPE_STRING dims: [ 1 ] } ]
  )"));
  std::vector<Tensor> short_int = {Tensor{"y", DataType::kInt32, {2}, std::string(6, '\0')}};
  const Status truncated = assembly.Finish(short_int, 1, /*passed_through=*/true);
  EXPECT_EQ(truncated.code(), StatusCode::kInternal);
  EXPECT_NE(truncated.message().find("output 'y'"), std::string::npos) << truncated.message();
  std::vector<Tensor> bad_bytes = {
      Tensor{"s", DataType::kBytes, {1}, std::string("\x09\0\0\0ab", 6)}};
  EXPECT_EQ(assembly.Finish(bad_bytes, 1, /*passed_through=*/true).code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace rampart::serve
