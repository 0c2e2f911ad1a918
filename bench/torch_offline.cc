// Offline throughput of a TorchScript model through Rampart's own backend, with no server in
// between: the baseline that served throughput is compared with (bench/batching_bench.sh).
//
//   torch_offline --model-dir examples/models/mlp_classifier --batch 32 --seconds 5 [--threads N]
//
// Prints `offline_samples_per_s=<x>`, `offline_batch_ms=<y>`, and `offline_cpu_seconds=<z>` with
// `offline_samples_per_core_s=<w>`: the process's CPU time over the measured runs (every thread,
// OpenBLAS's pool included), and samples per second of it, which a busy machine does not skew.

#include <time.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <thread>

#include <CLI/CLI.hpp>

#include "backend/torch/torch_backend.h"
#include "model/repository.h"

// CPU time of the whole process so far (all threads), in seconds.
double ProcessCpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
}

int main(int argc, char** argv) {
  CLI::App app{"Offline TorchScript throughput through Rampart's backend"};
  std::string model_dir;
  int batch = 32;
  double seconds = 5;
  int threads = 0;
  app.add_option("--model-dir", model_dir, "Model folder (config.pbtxt + 1/model.pt)")->required();
  app.add_option("--batch", batch, "Rows per execution")->capture_default_str();
  app.add_option("--seconds", seconds, "Measuring time")->capture_default_str();
  app.add_option("--threads", threads, "Intra-op threads (0 = all cores)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  auto source = rampart::model::ReadModel(model_dir);
  if (!source.ok()) {
    std::fprintf(stderr, "%s\n", source.status().ToString().c_str());
    return 1;
  }
  const auto& config = source->config;
  auto backend = rampart::backend::MakeTorchBackend();
  rampart::backend::InstanceSpec spec;
  spec.config = &config;
  spec.version_directory = source->directory / std::to_string(source->versions.back());
  spec.version = source->versions.back();
  spec.default_threads =
      threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto instance = backend->CreateInstance(spec);
  if (!instance.ok()) {
    std::fprintf(stderr, "%s\n", instance.status().ToString().c_str());
    return 1;
  }
  (*instance)->PrepareThread();

  // Random inputs of the configured shapes, with `batch` rows.
  std::mt19937 random(0);
  std::uniform_real_distribution<float> uniform(-1, 1);
  std::vector<rampart::tensor::Tensor> inputs;
  for (const auto& input : config.input()) {
    rampart::tensor::Tensor tensor;
    tensor.name = input.name();
    tensor.datatype = rampart::model::ToTensorType(input.data_type());
    tensor.shape.push_back(batch);
    for (int64_t dim : input.dims()) tensor.shape.push_back(dim < 0 ? 1 : dim);
    const int64_t count = *rampart::tensor::ElementCount(tensor.shape);
    tensor.data.resize(static_cast<size_t>(count) * rampart::tensor::DataTypeSize(tensor.datatype));
    if (tensor.datatype == rampart::tensor::DataType::kFp32) {
      auto* values = reinterpret_cast<float*>(tensor.data.data());
      for (int64_t i = 0; i < count; ++i) values[i] = uniform(random);
    }
    inputs.push_back(std::move(tensor));
  }

  const auto run_once = [&] {
    std::vector<rampart::tensor::Tensor> copy = inputs;
    auto result = (*instance)->Execute(copy);
    if (!result.ok()) {
      std::fprintf(stderr, "%s\n", result.status().ToString().c_str());
      std::exit(1);
    }
  };
  for (int i = 0; i < 10; ++i) run_once();  // warm-up (TorchScript profiles the first runs)
  const double cpu_start = ProcessCpuSeconds();
  const auto start = std::chrono::steady_clock::now();
  int64_t executions = 0;
  double elapsed = 0;
  while (elapsed < seconds) {
    run_once();
    ++executions;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  const double cpu = ProcessCpuSeconds() - cpu_start;
  const auto samples = static_cast<double>(executions * batch);
  std::printf("offline_samples_per_s=%.1f\n", samples / elapsed);
  std::printf("offline_batch_ms=%.3f\n", 1000.0 * elapsed / static_cast<double>(executions));
  std::printf("offline_cpu_seconds=%.3f\n", cpu);
  std::printf("offline_samples_per_core_s=%.1f\n", cpu > 0 ? samples / cpu : 0.0);
  return 0;
}
