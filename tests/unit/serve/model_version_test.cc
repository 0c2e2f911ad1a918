#include "serve/model_version.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>

#include "serve/server.h"

namespace rampart::serve {
namespace {

// A backend whose instances return INPUT0 + INPUT1 as OUTPUT0 and INPUT0 as OUTPUT1 (INT32),
// and fail when the first element is negative.
class AddInstance final : public backend::ModelInstance {
 public:
  Result<backend::ExecutionResult> Execute(std::vector<tensor::Tensor>& inputs) override {
    const auto* a = reinterpret_cast<const int32_t*>(inputs[0].data.data());
    const auto* b = reinterpret_cast<const int32_t*>(inputs[1].data.data());
    if (a[0] < 0) return InvalidArgument("negative input");
    backend::ExecutionResult result;
    tensor::Tensor sum{"OUTPUT0", tensor::DataType::kInt32, inputs[0].shape, inputs[0].data};
    auto* out = reinterpret_cast<int32_t*>(sum.data.data());
    for (size_t i = 0; i < sum.data.size() / 4; ++i) out[i] = a[i] + b[i];
    result.outputs.push_back(std::move(sum));
    result.outputs.push_back(
        {"OUTPUT1", tensor::DataType::kInt32, inputs[0].shape, inputs[0].data});
    result.timing.compute_infer_ns = 1000;
    return result;
  }
};

class AddBackend final : public backend::Backend {
 public:
  std::string_view name() const override { return "fake"; }
  Result<std::unique_ptr<backend::ModelInstance>> CreateInstance(
      const backend::InstanceSpec&) override {
    return std::unique_ptr<backend::ModelInstance>(new AddInstance());
  }
};

// The `add` model's config.pbtxt.
constexpr const char* kAddConfig = R"config(
name: "add"
backend: "fake"
max_batch_size: 4
input [
  { name: "INPUT0" data_type: TYPE_INT32 dims: [ -1 ] },
  { name: "INPUT1" data_type: TYPE_INT32 dims: [ -1 ] }
]
output [
  { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ -1 ] },
  { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ -1 ] }
]
)config";

model::ModelSource AddModel() {
  model::ModelSource source;
  source.name = "add";
  source.directory = "/nonexistent/add";
  auto parsed = model::ParseConfigText(kAddConfig, "add");
  source.config = parsed->config;
  EXPECT_TRUE(model::CompleteAndValidate(source.config, "add", "add").ok());
  source.versions = {1};
  return source;
}

tensor::Tensor Int32Tensor(std::string name, tensor::Shape shape, std::vector<int32_t> values) {
  tensor::Tensor t{std::move(name), tensor::DataType::kInt32, std::move(shape), {}};
  t.data.resize(values.size() * 4);
  std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

std::unique_ptr<InferRequest> Request(std::vector<tensor::Tensor> inputs) {
  auto request = std::make_unique<InferRequest>();
  request->model_name = "add";
  request->inputs = std::move(inputs);
  request->arrival = Clock::Real().Now();
  return request;
}

class ModelVersionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backends_.Register(std::make_unique<AddBackend>());
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

  backend::BackendRegistry backends_;
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
       "missing required input(s) INPUT1"},
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
       "batch-size must be <= 4"},
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
       "has 7 bytes but shape [1,2] of INT32 needs 8"},
      {"unequal batch",
       [] {
         return Request(
             {Int32Tensor("INPUT0", {1, 1}, {1}), Int32Tensor("INPUT1", {2, 1}, {1, 2})});
       },
       "has batch size 2 but other inputs of the request have 1"},
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

TEST(InferenceServer, UnknownModelAndVersionUseTritonWording) {
  backend::BackendRegistry backends;
  InferenceServer server(ServerOptions{}, backends);
  Status unknown = server.GetModel("nope", kLatestVersion).status();
  EXPECT_EQ(unknown.code(), StatusCode::kNotFound);
  EXPECT_EQ(unknown.message(), "Request for unknown model: 'nope' is not found");
  Status done;
  server.Infer(Request({}),
               [&done](Result<std::unique_ptr<InferResponse>> r) { done = r.status(); });
  EXPECT_EQ(done.code(), StatusCode::kNotFound);
}

// A repository on disk: `add` (the fake backend, version 1) and `broken` (a config that does not
// parse).
class RepositoryDir {
 public:
  RepositoryDir() {
    char pattern[] = "/tmp/rampart_server_test.XXXXXX";
    EXPECT_NE(mkdtemp(pattern), nullptr);
    path_ = pattern;
    std::filesystem::create_directories(path_ / "add" / "1");
    std::ofstream(path_ / "add" / "config.pbtxt") << kAddConfig;
    std::filesystem::create_directories(path_ / "broken" / "1");
    std::ofstream(path_ / "broken" / "config.pbtxt") << "name: \"broken\" max_batch_size: eight";
  }
  ~RepositoryDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

ServerOptions ExplicitMode(const std::filesystem::path& repository, bool strict) {
  ServerOptions options;
  options.repository = repository;
  options.control_mode = ModelControlMode::kExplicit;
  options.strict_readiness = strict;
  return options;
}

TEST(InferenceServer, StrictReadinessNeedsEveryModelButUnloadedOnes) {
  RepositoryDir repository;
  backend::BackendRegistry backends;
  backends.Register(std::make_unique<AddBackend>());
  InferenceServer server(ExplicitMode(repository.path(), /*strict=*/true), backends);
  ASSERT_TRUE(server.LoadStartupModels().ok());
  EXPECT_TRUE(server.IsReady());  // explicit mode, nothing asked for yet
  ASSERT_TRUE(server.LoadModel("add").ok());
  EXPECT_TRUE(server.IsReady());
  ASSERT_TRUE(server.UnloadModel("add").ok());
  EXPECT_TRUE(server.IsReady());  // unloaded on request: not counted, as in Triton
  EXPECT_FALSE(server.LoadModel("broken").ok());
  EXPECT_FALSE(server.IsReady());
  ASSERT_TRUE(server.LoadModel("add").ok());
  EXPECT_FALSE(server.IsReady());  // `broken` still failed
  server.Shutdown(std::chrono::milliseconds(0));
  EXPECT_FALSE(server.IsReady());
}

TEST(InferenceServer, WithoutStrictReadinessAFailedModelLeavesTheServerReady) {
  RepositoryDir repository;
  backend::BackendRegistry backends;
  backends.Register(std::make_unique<AddBackend>());
  InferenceServer server(ExplicitMode(repository.path(), /*strict=*/false), backends);
  EXPECT_FALSE(server.LoadModel("broken").ok());
  EXPECT_TRUE(server.IsReady());
  server.Shutdown(std::chrono::milliseconds(0));
  EXPECT_FALSE(server.IsReady());
}

}  // namespace
}  // namespace rampart::serve
