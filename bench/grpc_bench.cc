// KServe v2 gRPC load generator: a closed loop of `--concurrency` ModelInfer calls in flight on
// one channel (HTTP/2 multiplexes them on one connection, as tritonclient and perf_analyzer do),
// or `--concurrency` ModelStreamInfer streams each with one request in flight (`--stream`).
//
//   grpc_bench --target 127.0.0.1:8001 --model simple [--concurrency 64] [--duration 10]
//              [--warmup 2] [--stream]
//   grpc_bench --target 127.0.0.1:8001 --model simple --http-body FILE [--grpc-frame FILE]
//
// Inputs are made from the model's metadata (batch 1, variable dims 1, deterministic values) and
// sent as raw_input_contents, Triton clients' default. One thread drives every call through one
// completion queue (gRPC's asynchronous API), as wrk drives HTTP from one epoll loop per thread.
// Prints one line:
//   rps=<x> p50_us=<y> p99_us=<z> requests=<n> errors=<e>
// `--http-body FILE` only writes the same request as KServe v2 JSON, for wrk, and `--grpc-frame
// FILE` as one gRPC message on the wire (the 5-byte prefix: uncompressed flag 0, big-endian
// length; then the serialized ModelInferRequest), the body h2load POSTs to ModelInfer
// (bench/grpc_bench.sh); with either the program writes and exits.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>
#include <CLI/CLI.hpp>

#include "api/grpc_service.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;
using inference::GRPCInferenceService;
using inference::ModelInferRequest;
using inference::ModelInferResponse;
using inference::ModelStreamInferResponse;

enum Phase { kWarmup = 0, kMeasure = 1, kStop = 2 };

// What every worker shares: the phase and the measured latencies.
struct Run {
  std::atomic<int> phase{kWarmup};
  std::mutex mutex;
  std::vector<int64_t> latencies_ns;  // measured requests only; guarded by mutex
  std::atomic<int64_t> errors{0};
  std::atomic<int> active{0};
  std::mutex done_mutex;
  std::condition_variable done;

  // Records one completed request that started at `start`; false once the run is over.
  bool Complete(Clock::time_point start, bool ok, int start_phase) {
    if (!ok) errors.fetch_add(1);
    const int now_phase = phase.load();
    if (ok && start_phase == kMeasure && now_phase == kMeasure) {
      const int64_t ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
      std::lock_guard lock(mutex);
      latencies_ns.push_back(ns);
    }
    return now_phase != kStop;
  }
  void WorkerDone() {
    std::lock_guard lock(done_mutex);
    if (--active == 0) done.notify_all();
  }
};

// What the client's completion-queue thread runs for a tag it takes off the queue.
class Tag {
 public:
  virtual void Proceed(bool ok) = 0;

 protected:
  ~Tag() = default;
};

// One unary call in flight at a time, issued again from its own completion (on the queue thread).
class UnaryWorker final : public Tag {
 public:
  UnaryWorker(GRPCInferenceService::Stub& stub, grpc::CompletionQueue& queue,
              const ModelInferRequest& request, Run& run)
      : stub_(stub), queue_(queue), request_(request), run_(run) {}

  void Issue() {
    context_ = std::make_unique<grpc::ClientContext>();
    response_.Clear();
    start_ = Clock::now();
    start_phase_ = run_.phase.load();
    reader_ = stub_.PrepareAsyncModelInfer(context_.get(), request_, &queue_);
    reader_->StartCall();
    reader_->Finish(&response_, &status_, this);
  }

  void Proceed(bool ok) override {
    if (run_.Complete(start_, ok && status_.ok(), start_phase_)) {
      Issue();
    } else {
      run_.WorkerDone();
    }
  }

 private:
  GRPCInferenceService::Stub& stub_;
  grpc::CompletionQueue& queue_;
  const ModelInferRequest& request_;
  Run& run_;
  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<grpc::ClientAsyncResponseReader<ModelInferResponse>> reader_;
  ModelInferResponse response_;
  grpc::Status status_;
  Clock::time_point start_;
  int start_phase_ = kWarmup;
};

// One bidi stream with one request in flight: write, read its response, write the next; at the
// end, half-close and finish. One operation at a time, so one tag serves them all.
class StreamWorker final : public Tag {
 public:
  StreamWorker(GRPCInferenceService::Stub& stub, grpc::CompletionQueue& queue,
               const ModelInferRequest& request, Run& run)
      : request_(request), run_(run) {
    stream_ = stub.PrepareAsyncModelStreamInfer(&context_, &queue);
  }

  void Start() {
    step_ = kStarting;
    stream_->StartCall(this);
  }

  void Proceed(bool ok) override {
    switch (step_) {
      case kStarting:
      case kReading:
        if (step_ == kReading) {
          const bool again =
              ok && run_.Complete(start_, response_.error_message().empty(), start_phase_);
          if (!ok) run_.errors.fetch_add(1);
          if (!again) {
            step_ = kClosing;
            stream_->WritesDone(this);
            return;
          }
        } else if (!ok) {
          run_.errors.fetch_add(1);
          step_ = kFinishing;
          stream_->Finish(&status_, this);
          return;
        }
        step_ = kWriting;
        start_ = Clock::now();
        start_phase_ = run_.phase.load();
        stream_->Write(request_, this);
        return;
      case kWriting:
        step_ = kReading;
        stream_->Read(&response_, this);
        return;
      case kClosing:
        step_ = kFinishing;
        stream_->Finish(&status_, this);
        return;
      case kFinishing: run_.WorkerDone(); return;
    }
  }

 private:
  enum Step { kStarting, kWriting, kReading, kClosing, kFinishing };

  grpc::ClientContext context_;
  const ModelInferRequest& request_;
  Run& run_;
  std::unique_ptr<grpc::ClientAsyncReaderWriter<ModelInferRequest, ModelStreamInferResponse>>
      stream_;
  ModelStreamInferResponse response_;
  grpc::Status status_;
  Step step_ = kStarting;
  Clock::time_point start_;
  int start_phase_ = kWarmup;
};

size_t ElementSize(const std::string& datatype) {
  if (datatype == "BOOL" || datatype == "INT8" || datatype == "UINT8") return 1;
  if (datatype == "INT16" || datatype == "UINT16" || datatype == "FP16" || datatype == "BF16") {
    return 2;
  }
  if (datatype == "INT64" || datatype == "UINT64" || datatype == "FP64") return 8;
  return 4;
}

// The request for batch 1 of `metadata`'s inputs; `json` receives the same as KServe v2 JSON.
bool MakeRequest(const inference::ModelMetadataResponse& metadata, ModelInferRequest& request,
                 std::string& json) {
  request.set_model_name(metadata.name());
  json = R"({"inputs":[)";
  for (int i = 0; i < metadata.inputs_size(); ++i) {
    const auto& tensor = metadata.inputs(i);
    if (tensor.datatype() != "INT32" && tensor.datatype() != "FP32") {
      std::fprintf(stderr, "grpc_bench: input %s is %s; only INT32 and FP32 are generated\n",
                   tensor.name().c_str(), tensor.datatype().c_str());
      return false;
    }
    auto* input = request.add_inputs();
    input->set_name(tensor.name());
    input->set_datatype(tensor.datatype());
    int64_t count = 1;
    std::string shape;
    for (int64_t dim : tensor.shape()) {
      const int64_t size = dim < 0 ? 1 : dim;
      input->add_shape(size);
      count *= size;
      if (!shape.empty()) shape += ',';
      shape += std::to_string(size);
    }
    std::string raw(static_cast<size_t>(count) * ElementSize(tensor.datatype()), '\0');
    std::string data;
    for (int64_t e = 0; e < count; ++e) {
      std::string text;
      if (tensor.datatype() == "INT32") {
        const int32_t value = static_cast<int32_t>((e + i) % 100);
        std::memcpy(raw.data() + e * 4, &value, 4);
        text = std::to_string(value);
      } else {
        const float value = static_cast<float>((e + i) % 100) / 100.0f;
        std::memcpy(raw.data() + e * 4, &value, 4);
        char buffer[32];
        std::snprintf(buffer, sizeof(buffer), "%g", static_cast<double>(value));
        text = buffer;
      }
      if (e > 0) data += ',';
      data += text;
    }
    request.add_raw_input_contents(std::move(raw));
    if (i > 0) json += ',';
    json += R"({"name":")";
    json += tensor.name();
    json += R"(","shape":[)";
    json += shape;
    json += R"(],"datatype":")";
    json += tensor.datatype();
    json += R"(","data":[)";
    json += data;
    json += "]}";
  }
  json += "]}";
  return true;
}

// `message` as one gRPC length-prefixed message: a zero byte (not compressed), the length as 4
// big-endian bytes, the serialized message.
std::string GrpcFrame(const google::protobuf::Message& message) {
  const std::string serialized = message.SerializeAsString();
  const uint32_t length = static_cast<uint32_t>(serialized.size());
  std::string frame(5, '\0');
  for (int i = 0; i < 4; ++i)
    frame[static_cast<size_t>(1 + i)] = static_cast<char>(length >> (24 - 8 * i));
  return frame + serialized;
}

bool WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream file(path, std::ios::binary);
  file << contents;
  if (!file.flush()) {
    std::fprintf(stderr, "grpc_bench: cannot write %s\n", path.c_str());
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"KServe v2 gRPC infer load generator"};
  std::string target = "127.0.0.1:8001";
  std::string model = "simple";
  int concurrency = 1;
  double duration = 10;
  double warmup = 2;
  bool stream = false;
  std::string http_body;
  std::string grpc_frame;
  app.add_option("--target", target, "host:port of the gRPC server")->capture_default_str();
  app.add_option("--model", model, "Model to infer on")->capture_default_str();
  app.add_option("--concurrency", concurrency, "Requests (or streams) in flight")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app.add_option("--duration", duration, "Measured seconds")->capture_default_str();
  app.add_option("--warmup", warmup, "Unmeasured seconds first")->capture_default_str();
  app.add_flag("--stream", stream, "Use ModelStreamInfer streams instead of unary calls");
  app.add_option("--http-body", http_body,
                 "Only write the request as KServe v2 JSON to this file, and exit");
  app.add_option("--grpc-frame", grpc_frame,
                 "Only write the request as a length-prefixed gRPC message to this file, and exit");
  CLI11_PARSE(app, argc, argv);
  // As the server does (api/kserve_grpc.cc): Debian's Abseil checks every gRPC lock for deadlocks.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(-1);
  auto channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), arguments);
  auto stub = GRPCInferenceService::NewStub(channel);

  inference::ModelMetadataRequest metadata_request;
  metadata_request.set_name(model);
  inference::ModelMetadataResponse metadata;
  grpc::ClientContext metadata_context;
  metadata_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::Status status = stub->ModelMetadata(&metadata_context, metadata_request, &metadata);
  if (!status.ok()) {
    std::fprintf(stderr, "grpc_bench: ModelMetadata(%s) failed: %s\n", model.c_str(),
                 status.error_message().c_str());
    return 1;
  }
  ModelInferRequest request;
  std::string json;
  if (!MakeRequest(metadata, request, json)) return 1;
  if (!http_body.empty() || !grpc_frame.empty()) {
    if (!http_body.empty() && !WriteFile(http_body, json)) return 1;
    if (!grpc_frame.empty() && !WriteFile(grpc_frame, GrpcFrame(request))) return 1;
    return 0;
  }
  {
    // One checked call first, so a broken setup fails loudly instead of counting errors.
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    ModelInferResponse response;
    status = stub->ModelInfer(&context, request, &response);
    if (!status.ok()) {
      std::fprintf(stderr, "grpc_bench: ModelInfer(%s) failed: %s\n", model.c_str(),
                   status.error_message().c_str());
      return 1;
    }
  }

  Run run;
  run.active = concurrency;
  // The client's own thread polls one completion queue: gRPC's callback API would run each
  // completion on its own threads, a hand-off or two per request that costs this machine's
  // shared cores more than the server's work (wrk, the HTTP side's client, is one epoll loop).
  grpc::CompletionQueue queue;
  std::vector<std::unique_ptr<UnaryWorker>> unary;
  std::vector<std::unique_ptr<StreamWorker>> streams;
  for (int i = 0; i < concurrency; ++i) {
    if (stream) {
      streams.push_back(std::make_unique<StreamWorker>(*stub, queue, request, run));
      streams.back()->Start();
    } else {
      unary.push_back(std::make_unique<UnaryWorker>(*stub, queue, request, run));
      unary.back()->Issue();
    }
  }
  std::thread poller([&queue] {
    void* tag = nullptr;
    bool ok = false;
    while (queue.Next(&tag, &ok)) static_cast<Tag*>(tag)->Proceed(ok);
  });
  std::this_thread::sleep_for(std::chrono::duration<double>(warmup));
  run.phase = kMeasure;
  const auto measure_start = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(duration));
  run.phase = kStop;
  const double measured_s = std::chrono::duration<double>(Clock::now() - measure_start).count();
  {
    std::unique_lock lock(run.done_mutex);
    run.done.wait(lock, [&] { return run.active == 0; });
  }
  queue.Shutdown();
  poller.join();

  std::vector<int64_t> latencies;
  {
    std::lock_guard lock(run.mutex);
    latencies = run.latencies_ns;
  }
  std::sort(latencies.begin(), latencies.end());
  const auto percentile_us = [&](double p) {
    if (latencies.empty()) return 0.0;
    const size_t index = std::min(latencies.size() - 1,
                                  static_cast<size_t>(p * static_cast<double>(latencies.size())));
    return static_cast<double>(latencies[index]) / 1000.0;
  };
  std::printf("rps=%.1f p50_us=%.1f p99_us=%.1f requests=%zu errors=%lld\n",
              static_cast<double>(latencies.size()) / measured_s, percentile_us(0.50),
              percentile_us(0.99), latencies.size(), static_cast<long long>(run.errors.load()));
  return 0;
}
