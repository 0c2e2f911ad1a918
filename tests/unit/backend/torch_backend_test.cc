#include "backend/torch/torch_backend.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cstring>
#include <fstream>
#include <thread>

namespace rampart::backend {
namespace {

namespace fs = std::filesystem;
using tensor::DataType;

// Lays out <tmp>/<model>/1/model.pt from a fixture and builds an InstanceSpec for it.
class TorchBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("rampart_torch_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(root_ / "1");
  }
  void TearDown() override { fs::remove_all(root_); }

  Result<std::unique_ptr<ModelInstance>> Load(const std::string& fixture,
                                              const std::string& config_text, int threads = 1) {
    fs::copy_file(fs::path(RAMPART_FIXTURE_DIR) / fixture, root_ / "1" / "model.pt",
                  fs::copy_options::overwrite_existing);
    auto parsed = model::ParseConfigText(config_text, "config.pbtxt");
    EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
    config_ = parsed->config;
    Status valid = model::CompleteAndValidate(config_, "m", "config.pbtxt");
    EXPECT_TRUE(valid.ok()) << valid.ToString();
    InstanceSpec spec;
    spec.config = &config_;
    spec.version_directory = root_ / "1";
    spec.version = 1;
    spec.default_threads = threads;
    return backend_->CreateInstance(spec);
  }

  std::unique_ptr<Backend> backend_ = MakeTorchBackend();
  model::ModelConfig config_;
  fs::path root_;
};

std::string IdentityConfig(std::string_view type) {
  // Plain string concatenation: clang-format reflows R"pb(...)" literals as protobuf text.
  const std::string t(type);
  return "name: \"m\" backend: \"pytorch\" max_batch_size: 4 "
         "input [ { name: \"x\" data_type: TYPE_" +
         t +
         " dims: [ 3 ] } ] "
         "output [ { name: \"y\" data_type: TYPE_" +
         t + " dims: [ 3 ] } ]";
}

TEST_F(TorchBackendTest, IdentityRoundTripsEveryTorchDataType) {
  const std::vector<std::pair<std::string, DataType>> types = {
      {"BOOL", DataType::kBool},   {"UINT8", DataType::kUint8}, {"INT8", DataType::kInt8},
      {"INT16", DataType::kInt16}, {"INT32", DataType::kInt32}, {"INT64", DataType::kInt64},
      {"FP16", DataType::kFp16},   {"BF16", DataType::kBf16},   {"FP32", DataType::kFp32},
      {"FP64", DataType::kFp64}};
  for (const auto& [name, type] : types) {
    auto instance = Load("identity.pt", IdentityConfig(name));
    ASSERT_TRUE(instance.ok()) << name << ": " << instance.status().ToString();
    (*instance)->PrepareThread();
    const size_t bytes = 2 * 3 * tensor::DataTypeSize(type);
    std::string data(bytes, '\0');
    for (size_t i = 0; i < bytes; ++i)
      data[i] = static_cast<char>(type == DataType::kBool ? (i % 2) : i + 1);
    std::vector<tensor::Tensor> inputs = {{"x", type, {2, 3}, data}};
    auto result = (*instance)->Execute(inputs);
    ASSERT_TRUE(result.ok()) << name << ": " << result.status().ToString();
    ASSERT_EQ(result->outputs.size(), 1u);
    EXPECT_EQ(result->outputs[0].name, "y");
    EXPECT_EQ(result->outputs[0].datatype, type);
    EXPECT_EQ(result->outputs[0].shape, (tensor::Shape{2, 3}));
    EXPECT_EQ(result->outputs[0].data, data) << name;
  }
}

TEST_F(TorchBackendTest, MatchesInputsByArgumentNameAndOutputsByPosition) {
  // Config order (b, a) differs from forward(a, b); outputs follow the returned tuple.
  auto instance = Load("add_sub.pt", R"pb(name: "m"
                                          backend: "pytorch"
                                          max_batch_size: 0 input
                                          [ {
                                            name: "b"
                                            data_type: TYPE_INT32
                                            dims: [ 2 ]
                                          }
                                            , {
                                              name: "a"
                                              data_type: TYPE_INT32
                                              dims: [ 2 ]
                                            }] output
                                          [ {
                                            name: "SUM"
                                            data_type: TYPE_INT32
                                            dims: [ 2 ]
                                          }
                                            , {
                                              name: "DIFF"
                                              data_type: TYPE_INT32
                                              dims: [ 2 ]
                                            }])pb");
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  const int32_t a[2] = {10, 20};
  const int32_t b[2] = {1, 2};
  std::vector<tensor::Tensor> inputs = {
      {"b", DataType::kInt32, {2}, std::string(reinterpret_cast<const char*>(b), 8)},
      {"a", DataType::kInt32, {2}, std::string(reinterpret_cast<const char*>(a), 8)}};
  auto result = (*instance)->Execute(inputs);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  int32_t sum[2];
  int32_t diff[2];
  std::memcpy(sum, result->outputs[0].data.data(), 8);
  std::memcpy(diff, result->outputs[1].data.data(), 8);
  EXPECT_EQ(sum[1], 22);
  EXPECT_EQ(diff[0], 9);
}

TEST_F(TorchBackendTest, MatchesByTritonIndexConvention) {
  auto instance = Load("add_sub.pt", R"pb(name: "m"
                                          backend: "pytorch" input
                                          [ {
                                            name: "INPUT__1"
                                            data_type: TYPE_FP32
                                            dims: [ 1 ]
                                          }
                                            , {
                                              name: "INPUT__0"
                                              data_type: TYPE_FP32
                                              dims: [ 1 ]
                                            }] output
                                          [ {
                                            name: "OUTPUT__1"
                                            data_type: TYPE_FP32
                                            dims: [ 1 ]
                                          }])pb");
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  const float zero = 5.0f;
  const float one = 2.0f;
  std::vector<tensor::Tensor> inputs = {
      {"INPUT__1", DataType::kFp32, {1}, std::string(reinterpret_cast<const char*>(&one), 4)},
      {"INPUT__0", DataType::kFp32, {1}, std::string(reinterpret_cast<const char*>(&zero), 4)}};
  auto result = (*instance)->Execute(inputs);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  float difference = 0;
  std::memcpy(&difference, result->outputs[0].data.data(), 4);
  EXPECT_FLOAT_EQ(difference, 3.0f);  // OUTPUT__1 = INPUT__0 - INPUT__1
}

TEST_F(TorchBackendTest, OpenBlasPoolFollowsTheIntraOpBudget) {
  using GetThreads = int (*)();
  const auto get = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  if (get == nullptr) GTEST_SKIP() << "LibTorch's BLAS is not OpenBLAS here";
  // Every instance these tests load has a budget of one thread: the pool shrinks to it.
  auto instance = Load("scale.pt", IdentityConfig("FP32"));
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  EXPECT_EQ(get(), 1);
  // So an execution computes on the calling thread alone (what optimization.priority needs).
  EXPECT_EQ((*instance)->ComputeThreads(), 1);
}

TEST_F(TorchBackendTest, ModelExceptionsBecomeStatus) {
  auto instance = Load("raises.pt", IdentityConfig("FP32"));
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  const float negative[3] = {-1, -2, -3};
  std::vector<tensor::Tensor> inputs = {
      {"x", DataType::kFp32, {1, 3}, std::string(reinterpret_cast<const char*>(negative), 12)}};
  auto result = (*instance)->Execute(inputs);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInternal);
  EXPECT_NE(result.status().message().find("input sum is negative"), std::string::npos)
      << result.status().message();
}

TEST_F(TorchBackendTest, OutputTypeMismatchIsReported) {
  // scale.pt returns float; the config claims INT32 in and out.
  auto instance = Load("scale.pt", IdentityConfig("INT32"));
  ASSERT_TRUE(instance.ok());
  std::vector<tensor::Tensor> inputs = {{"x", DataType::kInt32, {1, 3}, std::string(12, '\0')}};
  auto result = (*instance)->Execute(inputs);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("but the config declares INT32"), std::string::npos)
      << result.status().message();
}

TEST_F(TorchBackendTest, LoadErrorsAreClear) {
  // One input for forward(a, b): in config order it feeds `a`, and nothing feeds `b`.
  auto unmatched = Load("add_sub.pt", R"pb(name: "m"
                                           backend: "pytorch" input
                                           [ {
                                             name: "left"
                                             data_type: TYPE_FP32
                                             dims: [ 1 ]
                                           }] output
                                           [ {
                                             name: "y"
                                             data_type: TYPE_FP32
                                             dims: [ 1 ]
                                           }])pb");
  ASSERT_FALSE(unmatched.ok());
  EXPECT_NE(
      unmatched.status().message().find("forward() argument 'b' has no matching config input"),
      std::string::npos)
      << unmatched.status().message();

  auto unsupported = Load("identity.pt", IdentityConfig("UINT32"));
  ASSERT_FALSE(unsupported.ok());
  EXPECT_NE(unsupported.status().message().find("LibTorch has no UINT32 type"), std::string::npos);

  auto threads = Load("identity.pt", IdentityConfig("FP32") +
                                         R"pb(parameters {
                                                key: "INTRA_OP_THREAD_COUNT"
                                                value: { string_value: "many" }
                                              })pb");
  ASSERT_FALSE(threads.ok());
  EXPECT_NE(threads.status().message().find("INTRA_OP_THREAD_COUNT"), std::string::npos);

  ASSERT_TRUE(Load("identity.pt", IdentityConfig("FP32")).ok());
  std::ofstream(root_ / "1" / "model.pt", std::ios::trunc) << "not a torchscript zip";
  InstanceSpec spec;
  spec.config = &config_;
  spec.version_directory = root_ / "1";
  auto corrupt = backend_->CreateInstance(spec);
  ASSERT_FALSE(corrupt.ok());
  EXPECT_NE(corrupt.status().message().find("cannot load"), std::string::npos)
      << corrupt.status().message();

  spec.version_directory = root_ / "2";
  EXPECT_EQ(backend_->CreateInstance(spec).status().code(), StatusCode::kNotFound);
}

// LibTorch's OpenMP build keeps the last thread count set on any thread and applies it to each
// thread on its first parallel op: an instance's budget must survive another instance setting
// its own before that.
TEST_F(TorchBackendTest, EachInstanceThreadKeepsItsOwnIntraOpBudget) {
  using GetMaxThreads = int (*)();
  const auto get = reinterpret_cast<GetMaxThreads>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  if (get == nullptr) GTEST_SKIP() << "LibTorch does not use OpenMP here";
  const std::string config =
      "name: \"m\" backend: \"pytorch\" max_batch_size: 4 "
      "input [ { name: \"x\" data_type: TYPE_FP32 dims: [ -1 ] } ] "
      "output [ { name: \"y\" data_type: TYPE_FP32 dims: [ -1 ] } ]";
  auto wide = Load("scale.pt", config, /*threads=*/3);
  ASSERT_TRUE(wide.ok()) << wide.status().ToString();
  auto narrow = Load("scale.pt", config, /*threads=*/1);
  ASSERT_TRUE(narrow.ok()) << narrow.status().ToString();
  int seen = 0;
  std::thread([&] {
    (*wide)->PrepareThread();
    std::thread([&] { (*narrow)->PrepareThread(); }).join();
    // Past LibTorch's grain size (32768 elements), so that the product runs as a parallel op.
    tensor::Tensor x{"x", DataType::kFp32, {1, 1 << 16}, std::string(4 << 16, '\0')};
    std::vector<tensor::Tensor> inputs = {x};
    EXPECT_TRUE((*wide)->Execute(inputs).ok());  // the thread's first parallel op
    seen = get();
  }).join();
  EXPECT_EQ(seen, 3);
}

// add_sub.pt with INT32 [2] inputs and outputs of these names.
std::string AddSubConfig(std::string_view first, std::string_view second,
                         std::string_view first_output, std::string_view second_output) {
  const auto tensor = [](std::string_view name) {
    return "{ name: \"" + std::string(name) + "\" data_type: TYPE_INT32 dims: [ 2 ] }";
  };
  return "name: \"m\" backend: \"pytorch\" input [ " + tensor(first) + ", " + tensor(second) +
         " ] output [ " + tensor(first_output) + ", " + tensor(second_output) + " ]";
}

// add_sub.pt on a = {10, 20}, b = {1, 2}, sent as the config's first and second input: the
// first two elements of each output, in config order.
std::vector<int32_t> RunAddSub(ModelInstance& instance, const model::ModelConfig& config) {
  const int32_t a[2] = {10, 20};
  const int32_t b[2] = {1, 2};
  std::vector<tensor::Tensor> inputs = {{config.input(0).name(),
                                         DataType::kInt32,
                                         {2},
                                         std::string(reinterpret_cast<const char*>(a), 8)},
                                        {config.input(1).name(),
                                         DataType::kInt32,
                                         {2},
                                         std::string(reinterpret_cast<const char*>(b), 8)}};
  auto result = instance.Execute(inputs);
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  if (!result.ok()) return {};
  std::vector<int32_t> values;
  for (const tensor::Tensor& output : result->outputs) {
    int32_t pair[2];
    std::memcpy(pair, output.data.data(), 8);
    values.insert(values.end(), pair, pair + 2);
  }
  return values;
}

// Triton's PyTorch backend picks one naming convention per model: outputs that are not all
// <name>__<index> follow config order (a lone "diff__0" used to take element 0, the sum, too).
TEST_F(TorchBackendTest, OutputsNotAllIndexedFollowConfigOrder) {
  auto instance = Load("add_sub.pt", AddSubConfig("a", "b", "sum", "diff__0"));
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  EXPECT_EQ(RunAddSub(**instance, config_), (std::vector<int32_t>{11, 22, 9, 18}));
}

// Inputs that are neither all forward() argument names nor all <name>__<index> feed the
// arguments in config order, as in Triton (they used to fail to load).
TEST_F(TorchBackendTest, InputsNamedNeitherWayFollowConfigOrder) {
  auto instance = Load("add_sub.pt", AddSubConfig("p", "q", "OUTPUT__0", "OUTPUT__1"));
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  EXPECT_EQ(RunAddSub(**instance, config_), (std::vector<int32_t>{11, 22, 9, 18}));
}

TEST_F(TorchBackendTest, TwoOutputsForOneResultElementAreRefused) {
  auto instance = Load("add_sub.pt", AddSubConfig("a", "b", "x__0", "y__0"));
  ASSERT_FALSE(instance.ok());
  EXPECT_NE(instance.status().message().find("outputs 'x__0' and 'y__0' both name element 0"),
            std::string::npos)
      << instance.status().message();
}

// add_sub.pt with INT32 [2] inputs a and b and these outputs.
std::string AddSubOutputs(std::initializer_list<std::string_view> outputs) {
  std::string config =
      "name: \"m\" backend: \"pytorch\" input [ { name: \"a\" data_type: TYPE_INT32 dims: [ 2 ] "
      "}, { name: \"b\" data_type: TYPE_INT32 dims: [ 2 ] } ] output [ ";
  std::string_view separator;
  for (std::string_view output : outputs) {
    config += std::string(separator) + "{ name: \"" + std::string(output) +
              "\" data_type: TYPE_INT32 dims: [ 2 ] } ";
    separator = ", ";
  }
  return config + "]";
}

// More config outputs than forward() returns used to load and then fail every request: where
// forward()'s schema fixes how many values it returns, the load is refused and says what to fix.
TEST_F(TorchBackendTest, MoreOutputsThanForwardReturnsAreRefusedAtLoad) {
  auto tuple = Load("add_sub.pt", AddSubOutputs({"sum", "diff", "product"}));
  ASSERT_FALSE(tuple.ok());
  EXPECT_EQ(tuple.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(tuple.status().message().find(
                "model 'm' version 1: forward() returns Tuple[Tensor, Tensor] (2 value(s)), but "
                "the config lists 3 output(s) (sum, diff, product) and output 'product' is "
                "value 2"),
            std::string::npos)
      << tuple.status().message();
  EXPECT_NE(tuple.status().message().find("list in config.pbtxt's `output` only the values"),
            std::string::npos);

  auto by_index = Load("add_sub.pt", AddSubOutputs({"OUTPUT__0", "OUTPUT__2"}));
  ASSERT_FALSE(by_index.ok());
  EXPECT_NE(by_index.status().message().find("output 'OUTPUT__2' is value 2"), std::string::npos)
      << by_index.status().message();

  auto tensor = Load("identity.pt",
                     "name: \"m\" backend: \"pytorch\" input [ { name: \"x\" data_type: "
                     "TYPE_FP32 dims: [ 3 ] } ] output [ { name: \"y\" data_type: TYPE_FP32 "
                     "dims: [ 3 ] }, { name: \"z\" data_type: TYPE_FP32 dims: [ 3 ] } ]");
  ASSERT_FALSE(tensor.ok());
  EXPECT_NE(tensor.status().message().find("forward() returns Tensor (1 value(s))"),
            std::string::npos)
      << tensor.status().message();
}

// A List[Tensor]'s length shows only when it runs: the request's error names the model, the
// config's outputs and what forward() returned.
TEST_F(TorchBackendTest, MoreOutputsThanAReturnedListHasAreExplainedPerRequest) {
  auto instance =
      Load("halves.pt",
           "name: \"m\" backend: \"pytorch\" input [ { name: \"x\" data_type: TYPE_FP32 dims: "
           "[ 1 ] } ] output [ { name: \"whole\" data_type: TYPE_FP32 dims: [ 1 ] }, { name: "
           "\"half\" data_type: TYPE_FP32 dims: [ 1 ] }, { name: \"third\" data_type: TYPE_FP32 "
           "dims: [ 1 ] } ]");
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  const float x = 1.0f;
  std::vector<tensor::Tensor> inputs = {
      {"x", DataType::kFp32, {1}, std::string(reinterpret_cast<const char*>(&x), 4)}};
  auto result = (*instance)->Execute(inputs);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find(
                "model 'm': forward() returned a list of 2 value(s) (List[Tensor]), but the "
                "config lists 3 output(s) (whole, half, third) and output 'third' is value 2"),
            std::string::npos)
      << result.status().message();
}

// Triton's PyTorch backend: BYTES is one List[str], so its dims (a reshape's when there is one)
// and the batch dimension may make one dimension at most.
TEST_F(TorchBackendTest, BatchedStringsNeedTheirDimsReshapedAway) {
  const auto config = [](std::string_view input) {
    return "name: \"m\" backend: \"pytorch\" max_batch_size: 4 input [ { name: \"x\" "
           "data_type: TYPE_STRING " +
           std::string(input) +
           " } ] output [ { name: \"y\" data_type: TYPE_STRING dims: [ 1 ] reshape { shape: [ ] "
           "} } ]";
  };
  auto refused = Load("identity.pt", config("dims: [ 1 ]"));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find(
                "input 'x' is BYTES, one List[str] of one dimension for the model, but its dims "
                "[1] and the batch dimension make 2"),
            std::string::npos)
      << refused.status().message();
  EXPECT_TRUE(Load("identity.pt", config("dims: [ 1 ] reshape { shape: [ ] }")).ok());
}

}  // namespace
}  // namespace rampart::backend
