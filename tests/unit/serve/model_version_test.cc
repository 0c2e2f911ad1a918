// ModelVersion over the fake `add` backend: validation, execution, statistics and warm-up.

#include "serve/model_version.h"

#include <gtest/gtest.h>

#include <future>
#include <mutex>

#include "add_backend.h"

namespace rampart::serve {
namespace {

class ModelVersionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loaded = ModelVersion::Load(AddModel(), 1, backends_, {.default_threads = 1});
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    model_ = *loaded;
  }

  Result<std::unique_ptr<InferResponse>> Run(std::unique_ptr<InferRequest> request) {
    if (Status valid = model_->Validate(*request); !valid.ok()) return valid;
    std::promise<Result<std::unique_ptr<InferResponse>>> promise;
    auto future = promise.get_future();
    model_->Enqueue(std::move(request), [&promise](Result<std::unique_ptr<InferResponse>> result) {
      promise.set_value(std::move(result));
    });
    return future.get();
  }

  backend::BackendRegistry backends_ = AddBackends();
  std::shared_ptr<ModelVersion> model_;
};

TEST_F(ModelVersionTest, RunsAValidRequestAndReordersInputs) {
  auto response = Run(Request(
      {Int32Tensor("INPUT1", {1, 3}, {10, 20, 30}), Int32Tensor("INPUT0", {1, 3}, {1, 2, 3})}));
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  ASSERT_EQ((*response)->outputs.size(), 2u);
  const auto* sum = reinterpret_cast<const int32_t*>((*response)->outputs[0].data.data());
  EXPECT_EQ(sum[0], 11);
  EXPECT_EQ(sum[2], 33);
  EXPECT_EQ((*response)->model_version, 1);
}

TEST_F(ModelVersionTest, ReturnsOnlyRequestedOutputs) {
  auto request = Request({Int32Tensor("INPUT0", {1, 1}, {1}), Int32Tensor("INPUT1", {1, 1}, {2})});
  request->requested_outputs = {"OUTPUT1"};
  auto response = Run(std::move(request));
  ASSERT_TRUE(response.ok());
  ASSERT_EQ((*response)->outputs.size(), 1u);
  EXPECT_EQ((*response)->outputs[0].name, "OUTPUT1");
}

struct BadRequest {
  std::string label;
  std::function<std::unique_ptr<InferRequest>()> make;
  std::string message;
};

TEST_F(ModelVersionTest, ValidationNamesTheProblem) {
  const std::vector<BadRequest> cases = {
      {"missing input",
       [] {
         return Request({Int32Tensor("INPUT0", {1, 1}, {1})});
       },
       // Triton's words (InferenceRequest::ValidateRequestInputs), which clients match on.
       "expected 2 inputs but got 1 inputs for model 'add'. Got input(s) ['INPUT0'], but missing "
       "required input(s) ['INPUT1']. Please provide all required input(s)."},
      {"no input at all", [] { return Request({}); },
       "expected 2 inputs but got 0 inputs for model 'add'. Got input(s) [], but missing "
       "required input(s) ['INPUT0','INPUT1']. Please provide all required input(s)."},
      {"unknown input",
       [] {
         return Request({Int32Tensor("INPUT0", {1, 1}, {1}), Int32Tensor("INPUT1", {1, 1}, {1}),
                         Int32Tensor("EXTRA", {1, 1}, {1})});
       },
       "unexpected inference input 'EXTRA' for model 'add'"},
      {"wrong datatype",
       [] {
         auto r = Request({Int32Tensor("INPUT0", {1, 1}, {1}), Int32Tensor("INPUT1", {1, 1}, {1})});
         r->inputs[1].datatype = tensor::DataType::kFp32;
         return r;
       },
       "inference input 'INPUT1' data-type is 'FP32', but model 'add' expects 'INT32'"},
      {"batch too large",
       [] {
         return Request({Int32Tensor("INPUT0", {5, 1}, {1, 1, 1, 1, 1}),
                         Int32Tensor("INPUT1", {5, 1}, {1, 1, 1, 1, 1})});
       },
       "inference request batch-size must be <= 4 for 'add'"},
      // Triton sizes a batch of 0 without its batch dimension, so it fails on the byte size.
      {"batch of 0",
       [] {
         return Request({Int32Tensor("INPUT0", {0, 2}, {}), Int32Tensor("INPUT1", {0, 2}, {})});
       },
       "input byte size mismatch for input 'INPUT0' for model 'add'. Expected 8, got 0"},
      {"no batch dimension",
       [] {
         return Request({Int32Tensor("INPUT0", {}, {1}), Int32Tensor("INPUT1", {1, 1}, {1})});
       },
       "input 'INPUT0' has no shape but model requires batch dimension for 'add'"},
      {"rank mismatch",
       [] {
         return Request(
             {Int32Tensor("INPUT0", {1, 1, 1}, {1}), Int32Tensor("INPUT1", {1, 1}, {1})});
       },
       "unexpected shape for input 'INPUT0' for model 'add'. Expected [-1,-1], got [1,1,1]"},
      {"byte size",
       [] {
         auto r = Request(
             {Int32Tensor("INPUT0", {1, 2}, {1, 2}), Int32Tensor("INPUT1", {1, 2}, {1, 2})});
         r->inputs[0].data.pop_back();
         return r;
       },
       "input byte size mismatch for input 'INPUT0' for model 'add'. Expected 8, got 7"},
      {"unequal batch",
       [] {
         return Request(
             {Int32Tensor("INPUT0", {1, 1}, {1}), Int32Tensor("INPUT1", {2, 1}, {1, 2})});
       },
       "input 'INPUT1' batch size does not match other inputs for 'add'"},
      {"unknown output",
       [] {
         auto r = Request({Int32Tensor("INPUT0", {1, 1}, {1}), Int32Tensor("INPUT1", {1, 1}, {1})});
         r->requested_outputs = {"NOPE"};
         return r;
       },
       "unexpected inference output 'NOPE' for model 'add'"},
  };
  for (const BadRequest& bad : cases) {
    auto result = Run(bad.make());
    ASSERT_FALSE(result.ok()) << bad.label;
    EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument) << bad.label;
    EXPECT_NE(result.status().message().find(bad.message), std::string::npos)
        << bad.label << ": " << result.status().message();
  }
  EXPECT_EQ(model_->statistics().Snapshot().execution_count, 0u);
}

TEST_F(ModelVersionTest, StatisticsCountSuccessesFailuresAndBatchItems) {
  ASSERT_TRUE(
      Run(Request({Int32Tensor("INPUT0", {2, 1}, {1, 2}), Int32Tensor("INPUT1", {2, 1}, {1, 2})}))
          .ok());
  ASSERT_TRUE(
      Run(Request({Int32Tensor("INPUT0", {1, 1}, {1}), Int32Tensor("INPUT1", {1, 1}, {1})})).ok());
  auto failed =
      Run(Request({Int32Tensor("INPUT0", {1, 1}, {-1}), Int32Tensor("INPUT1", {1, 1}, {1})}));
  EXPECT_EQ(failed.status().message(), "negative input");
  const StatisticsSnapshot stats = model_->statistics().Snapshot();
  EXPECT_EQ(stats.success.count, 2u);
  EXPECT_EQ(stats.fail.count, 1u);
  EXPECT_EQ(stats.inference_count, 3u);
  EXPECT_EQ(stats.execution_count, 2u);
  EXPECT_EQ(stats.compute_infer.ns, 2000u);
  ASSERT_EQ(stats.batch_stats.size(), 2u);
  EXPECT_EQ(stats.batch_stats.at(2).compute_infer.count, 1u);
  EXPECT_GT(stats.last_inference_ms, 0u);
}

TEST_F(ModelVersionTest, StopRefusesNewWork) {
  model_->Stop();
  auto request = Request({Int32Tensor("INPUT0", {1, 1}, {1}), Int32Tensor("INPUT1", {1, 1}, {1})});
  ASSERT_TRUE(model_->Validate(*request).ok());
  Status status;
  model_->Enqueue(std::move(request), [&status](Result<std::unique_ptr<InferResponse>> result) {
    status = result.status();
  });
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
}

TEST(ModelVersionLoad, UnknownBackendIsAClearError) {
  backend::BackendRegistry empty;
  auto loaded = ModelVersion::Load(AddModel(), 1, empty, {.default_threads = 1});
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("unknown backend 'fake'"), std::string::npos);
}

// `add` with both inputs [4] reshaped to [2, 2], warmed up with a sample of `warmup_dims`.
model::ModelSource ReshapingAddModel(std::string_view warmup_dims) {
  model::ModelSource source = AddModel();
  auto parsed = model::ParseConfigText(fmt::format(R"config(
name: "add"
backend: "fake"
max_batch_size: 4
input [
  {{ name: "INPUT0" data_type: TYPE_INT32 dims: [ 4 ] reshape: {{ shape: [ 2, 2 ] }} }},
  {{ name: "INPUT1" data_type: TYPE_INT32 dims: [ 4 ] reshape: {{ shape: [ 2, 2 ] }} }}
]
output [
  {{ name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 2, 2 ] }},
  {{ name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 2, 2 ] }}
]
model_warmup [ {{ name: "zeros" batch_size: 1 inputs [
  {{ key: "INPUT0" value: {{ data_type: TYPE_INT32 dims: [ {0} ] zero_data: true }} }},
  {{ key: "INPUT1" value: {{ data_type: TYPE_INT32 dims: [ {0} ] zero_data: true }} }} ] }} ]
)config",
                                                   warmup_dims),
                                       "add");
  if (!parsed.ok()) {
    ADD_FAILURE() << parsed.status().ToString();
    return source;
  }
  source.config = parsed->config;
  EXPECT_TRUE(model::CompleteAndValidate(source.config, "add", "add").ok());
  return source;
}

TEST(ModelVersionLoad, WarmUpSamplesReachTheModelReshaped) {
  const model::ModelSource source = ReshapingAddModel("4");
  backend::BackendRegistry backends = AddBackends();
  {
    std::lock_guard lock(SeenShapesMutex());
    SeenShapes().clear();
  }
  auto loaded = ModelVersion::Load(source, 1, backends, {.default_threads = 1});
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  std::lock_guard lock(SeenShapesMutex());
  ASSERT_FALSE(SeenShapes().empty());
  EXPECT_EQ(SeenShapes().front(), (tensor::Shape{1, 2, 2}));  // as a request's would be
  (*loaded)->Stop();
}

// A sample is checked against the input's dims as a request is: reshaped to [2, 2], one element
// would have been read as four.
TEST(ModelVersionLoad, AWarmUpSampleWithOtherDimsIsRefused) {
  backend::BackendRegistry backends = AddBackends();
  auto loaded = ModelVersion::Load(ReshapingAddModel("1"), 1, backends, {.default_threads = 1});
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find(
                "model_warmup 'zeros': input 'INPUT0' has dims [1] but the model takes [4]"),
            std::string::npos)
      << loaded.status().ToString();
}

}  // namespace
}  // namespace rampart::serve
