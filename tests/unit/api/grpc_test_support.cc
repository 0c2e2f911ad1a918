#include "grpc_test_support.h"

#include <cstring>
#include <fstream>
#include <thread>

namespace rampart::testing {
namespace {

using namespace std::chrono_literals;

class FakeInstance final : public backend::ModelInstance {
 public:
  FakeInstance(std::string model, Gate& gate) : model_(std::move(model)), gate_(gate) {}

  Result<backend::ExecutionResult> Execute(std::vector<tensor::Tensor>& inputs) override {
    backend::ExecutionResult result;
    if (model_ == "add") {
      tensor::Tensor sum = inputs[0];
      tensor::Tensor difference = inputs[0];
      sum.name = "OUTPUT0";
      difference.name = "OUTPUT1";
      const std::vector<int32_t> a = FromBytes<int32_t>(inputs[0].data);
      const std::vector<int32_t> b = FromBytes<int32_t>(inputs[1].data);
      std::vector<int32_t> sums(a.size());
      std::vector<int32_t> differences(a.size());
      for (size_t i = 0; i < a.size(); ++i) {
        sums[i] = a[i] + b[i];
        differences[i] = a[i] - b[i];
      }
      sum.data = ToBytes(sums);
      difference.data = ToBytes(differences);
      result.outputs.push_back(std::move(sum));
      result.outputs.push_back(std::move(difference));
      return result;
    }
    if (model_.starts_with("gate")) {
      int32_t key = 0;
      std::memcpy(&key, inputs[0].data.data(), sizeof(key));
      gate_.Enter(key);
    }
    tensor::Tensor output = std::move(inputs[0]);
    output.name = "OUTPUT0";
    result.outputs.push_back(std::move(output));
    return result;
  }

 private:
  const std::string model_;
  Gate& gate_;
};

class FakeBackend final : public backend::Backend {
 public:
  explicit FakeBackend(Gate& gate) : gate_(gate) {}
  std::string_view name() const override { return "fake"; }
  Result<std::unique_ptr<backend::ModelInstance>> CreateInstance(
      const backend::InstanceSpec& spec) override {
    return std::unique_ptr<backend::ModelInstance>(new FakeInstance(spec.config->name(), gate_));
  }

 private:
  Gate& gate_;
};

std::string EchoConfig(const std::string& name, const std::string& type) {
  return "name: \"" + name + "\"\nbackend: \"fake\"\nmax_batch_size: 0\n" +
         "input [{ name: \"INPUT0\" data_type: " + type + " dims: [ -1 ] }]\n" +
         "output [{ name: \"OUTPUT0\" data_type: " + type + " dims: [ -1 ] }]\n";
}

std::string GateConfig(const std::string& name, int instances) {
  return "name: \"" + name + "\"\nbackend: \"fake\"\nmax_batch_size: 0\n" +
         "input [{ name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 1 ] }]\n" +
         "output [{ name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 1 ] }]\n" +
         "instance_group [{ count: " + std::to_string(instances) + " kind: KIND_CPU }]\n";
}

// A gate model whose queue lets requests shorten their timeout (Triton's `timeout` parameter).
constexpr char kQueueConfig[] = R"pb(
  name: "gate_queue"
  backend: "fake"
  max_batch_size: 1 input
  [ {
    name: "INPUT0"
    data_type: TYPE_INT32
    dims: [ 1 ]
  }] output
  [ {
    name: "OUTPUT0"
    data_type: TYPE_INT32
    dims: [ 1 ]
  }]
  dynamic_batching {
    default_queue_policy {
      timeout_action: REJECT
      default_timeout_microseconds: 3600000000
      allow_timeout_override: true
    }
  } instance_group
  [ { count: 1 kind: KIND_CPU }]
)pb";

constexpr char kAddConfig[] = R"pb(
  name: "add"
  backend: "fake"
  max_batch_size: 8 input
  [ {
    name: "INPUT0"
    data_type: TYPE_INT32
    dims: [ -1 ]
  }
    , {
      name: "INPUT1"
      data_type: TYPE_INT32
      dims: [ -1 ]
    }] output
  [ {
    name: "OUTPUT0"
    data_type: TYPE_INT32
    dims: [ -1 ]
  }
    , {
      name: "OUTPUT1"
      data_type: TYPE_INT32
      dims: [ -1 ]
    }]
)pb";

}  // namespace

void Gate::Enter(int32_t key) {
  std::unique_lock lock(mutex_);
  entered_.push_back(key);
  changed_.notify_all();
  changed_.wait(lock, [&] { return open_ || released_.count(key) > 0; });
  if (!open_) released_.erase(released_.find(key));
}

bool Gate::WaitEntered(size_t count) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, 10s, [&] { return entered_.size() >= count; });
}

void Gate::Release(int32_t key) {
  std::lock_guard lock(mutex_);
  released_.insert(key);
  changed_.notify_all();
}

void Gate::Open() {
  std::lock_guard lock(mutex_);
  open_ = true;
  changed_.notify_all();
}

std::vector<int32_t> Gate::entered() const {
  std::lock_guard lock(mutex_);
  return entered_;
}

std::unique_ptr<backend::Backend> MakeFakeBackend(Gate& gate) {
  return std::make_unique<FakeBackend>(gate);
}

void WriteFakeRepository(const std::filesystem::path& directory) {
  const std::vector<std::pair<std::string, std::string>> models = {
      {"add", kAddConfig},
      {"echo_bytes", EchoConfig("echo_bytes", "TYPE_STRING")},
      {"echo_fp16", EchoConfig("echo_fp16", "TYPE_FP16")},
      {"gate", GateConfig("gate", 3)},
      {"gate1", GateConfig("gate1", 1)},
      {"gate_queue", kQueueConfig},
  };
  for (const auto& [name, config] : models) {
    std::filesystem::create_directories(directory / name / "1");
    std::ofstream(directory / name / "config.pbtxt") << config;
  }
}

}  // namespace rampart::testing
