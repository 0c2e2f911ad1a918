#pragma once

// A fake backend for the serve tests: the `add` model, whose instances add their two INT32
// inputs, and a gate that holds executions until a test lets them go.

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/config.h"
#include "model/repository.h"
#include "serve/request.h"

// In rampart::serve itself (not a namespace of its own), as the tests that use it are.
namespace rampart::serve {

// Holds executions until opened; counts those waiting.
class ExecutionGate {
 public:
  void Pass() {
    std::unique_lock lock(mutex_);
    ++waiting_;
    changed_.notify_all();
    changed_.wait(lock, [this] { return open_; });
  }
  void WaitForWaiting(int count) {
    std::unique_lock lock(mutex_);
    ASSERT_TRUE(
        changed_.wait_for(lock, std::chrono::seconds(10), [&] { return waiting_ >= count; }));
  }
  void Open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }
  void Close() {
    std::lock_guard lock(mutex_);
    open_ = false;
    waiting_ = 0;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int waiting_ = 0;
  bool open_ = false;
};
inline ExecutionGate& Gate() {
  static ExecutionGate gate;
  return gate;
}
inline constexpr int32_t kHold = 99;  // a first INPUT0 element that waits at the gate

// INPUT0's shape in every execution, in order.
inline std::vector<tensor::Shape>& SeenShapes() {
  static std::vector<tensor::Shape> shapes;
  return shapes;
}
inline std::mutex& SeenShapesMutex() {
  static std::mutex mutex;
  return mutex;
}

// A backend whose instances return INPUT0 + INPUT1 as OUTPUT0 and INPUT0 as OUTPUT1 (INT32),
// fail when the first element is negative, and wait at the gate when it is kHold.
class AddInstance final : public backend::ModelInstance {
 public:
  Result<backend::ExecutionResult> Execute(std::vector<tensor::Tensor>& inputs) override {
    const auto* a = reinterpret_cast<const int32_t*>(inputs[0].data.data());
    const auto* b = reinterpret_cast<const int32_t*>(inputs[1].data.data());
    if (a[0] < 0) return InvalidArgument("negative input");
    if (a[0] == kHold) Gate().Pass();
    {
      std::lock_guard lock(SeenShapesMutex());
      SeenShapes().push_back(inputs[0].shape);
    }
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

// The intra-op thread budget the server gave each instance created, by model name, in order.
inline std::map<std::string, std::vector<int>>& InstanceThreadBudgets() {
  static std::map<std::string, std::vector<int>> budgets;
  return budgets;
}

class AddBackend final : public backend::Backend {
 public:
  std::string_view name() const override { return "fake"; }
  Result<std::unique_ptr<backend::ModelInstance>> CreateInstance(
      const backend::InstanceSpec& spec) override {
    InstanceThreadBudgets()[spec.config->name()].push_back(spec.default_threads);
    return std::unique_ptr<backend::ModelInstance>(new AddInstance());
  }
};

// A registry holding the fake backend (as "fake").
inline backend::BackendRegistry AddBackends() {
  backend::BackendRegistry backends;
  backends.Register(std::make_unique<AddBackend>());
  return backends;
}

// The `add` model's config.pbtxt.
inline constexpr const char* kAddConfig = R"config(
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

inline model::ModelSource AddModel() {
  model::ModelSource source;
  source.name = "add";
  source.directory = "/nonexistent/add";
  auto parsed = model::ParseConfigText(kAddConfig, "add");
  source.config = parsed->config;
  EXPECT_TRUE(model::CompleteAndValidate(source.config, "add", "add").ok());
  source.versions = {1};
  return source;
}

inline tensor::Tensor Int32Tensor(std::string name, tensor::Shape shape,
                                  std::vector<int32_t> values) {
  tensor::Tensor t{std::move(name), tensor::DataType::kInt32, std::move(shape), {}};
  t.data.resize(values.size() * 4);
  std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

inline std::unique_ptr<InferRequest> Request(std::vector<tensor::Tensor> inputs) {
  auto request = std::make_unique<InferRequest>();
  request->model_name = "add";
  request->inputs = std::move(inputs);
  request->arrival = Clock::Real().Now();
  return request;
}

}  // namespace rampart::serve
