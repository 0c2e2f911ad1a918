#include "api/kserve_grpc.h"

#include <algorithm>
#include <fstream>
#include <future>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include <absl/synchronization/mutex.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include "api/grpc_service.grpc.pb.h"
#include "api/kserve_grpc_access.h"
#include "api/kserve_grpc_audit.h"
#include "api/kserve_grpc_calls.h"
#include "api/kserve_grpc_codec.h"
#include "api/kserve_grpc_health.h"
#include "core/exceptions.h"
#include "core/serial_worker.h"

namespace rampart::api {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;
using inference::ModelStreamInferResponse;

constexpr char kServiceName[] = "inference.GRPCInferenceService";

// Runs `body` (returning a grpc::Status) and answers with its result; exceptions become INTERNAL
// here, so none reaches gRPC.
template <typename Body>
grpc::Status Answer(Body&& body) {
  try {
    return body();
  } catch (const std::exception& error) {
    return grpc::Status(grpc::StatusCode::INTERNAL, error.what());
  } catch (...) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "unexpected exception");
  }
}

// Runs `start`, which arranges for the function it is given to be called once, from any thread,
// with the call's answer; returns that answer once it comes (a synchronous handler's thread
// waits for it).
template <typename Start>
grpc::Status AwaitAnswer(Start&& start) {
  auto answered = std::make_shared<std::promise<grpc::Status>>();
  std::future<grpc::Status> answer = answered->get_future();
  start([answered](grpc::Status status) { answered->set_value(std::move(status)); });
  return answer.get();
}

// Records the call as answered `status` (with `response`), then answers: at once, or once the
// record is durable (sync sink).
grpc::Status Recorded(grpc_audit::GrpcRecord& audit, grpc::Status status,
                      const google::protobuf::Message* response) {
  if (!audit.recording()) return status;
  const std::string answered = response != nullptr ? response->SerializeAsString() : "";
  return AwaitAnswer([&](UniqueFunction<void(grpc::Status)> finish) {
    audit.Finish(std::move(status), answered, std::move(finish));
  });
}

// As Answer, recording the call (with `response`, the message `body` fills) before it answers.
template <typename Body>
grpc::Status AnswerRecorded(grpc_audit::GrpcRecord& audit,
                            const google::protobuf::Message& response, Body&& body) {
  grpc::Status status = Answer(std::forward<Body>(body));
  return Recorded(audit, std::move(status), &response);
}

// Triton's repository load/unload parameters: `config` (load only: the model's config as JSON,
// replacing config.pbtxt) and `unload_dependents` (unloading an ensemble also unloads the step
// models its load brought in).
struct Control {
  std::optional<std::string> config;
  bool unload_dependents = false;
};

template <typename Request>
Result<Control> ControlParameters(const Request& request, bool load) {
  if (!request.repository_name().empty()) {
    return Unimplemented("'repository_name' specification is not supported");
  }
  Control control;
  for (const auto& [key, value] : request.parameters()) {
    if (key == "config" && load) {
      if (value.parameter_choice_case() != inference::ModelRepositoryParameter::kStringParam) {
        return InvalidArgument("parameter 'config' must be a string_param holding JSON");
      }
      control.config = value.string_param();
    } else if (key.starts_with("file:")) {
      return Unimplemented("parameter '{}': loading model files from the request is not supported",
                           key);
    } else if (key == "unload_dependents") {
      if (value.parameter_choice_case() != inference::ModelRepositoryParameter::kBoolParam) {
        return InvalidArgument("parameter 'unload_dependents' must be a bool_param");
      }
      control.unload_dependents = value.bool_param();
    } else {
      return InvalidArgument("unknown parameter '{}'", key);
    }
  }
  return control;
}

// ModelInfer and ModelStreamInfer are asynchronous (grpc_calls, on Rampart's queue threads); the
// other methods are synchronous.
class Service final : public grpc_calls::InferService {
 public:
  Service(serve::InferenceServer& server, const KServeGrpcOptions& options)
      : server_(server),
        options_(options),
        shared_(server, options.access, options.audit, options.max_inflight_bytes) {
    shared_.service = this;
  }

  grpc_calls::CallShared& shared() { return shared_; }
  // Runs queued repository loads and unloads, then stops their thread. REQUIRES: no more calls
  // can arrive (the gRPC server is shut down).
  void StopControl() {
    control_.Stop();
    repository_reads_.Stop();
  }

  grpc::Status ServerLive(grpc::ServerContext*, const inference::ServerLiveRequest*,
                          inference::ServerLiveResponse* response) override {
    return Answer([&] {
      response->set_live(server_.IsLive());
      return grpc::Status::OK;
    });
  }

  grpc::Status ServerReady(grpc::ServerContext*, const inference::ServerReadyRequest*,
                           inference::ServerReadyResponse* response) override {
    return Answer([&] {
      response->set_ready(server_.IsReady());
      return grpc::Status::OK;
    });
  }

  grpc::Status ModelReady(grpc::ServerContext* context, const inference::ModelReadyRequest* request,
                          inference::ModelReadyResponse* response) override {
    grpc_audit::GrpcRecord audit(options_.audit, *context, "ModelReady", request->name(), "");
    if (auto refused = Refused(context, audit, "ModelReady", request->name())) {
      return Recorded(audit, *refused, nullptr);
    }
    return AnswerRecorded(audit, *response, [&] {
      Result<int64_t> version = ParseModelVersion(request->version());
      if (!version.ok()) return ToGrpcStatus(version.status());
      // As Triton: an unknown model is NOT_FOUND, not merely "not ready".
      const Status ready = server_.ModelReady(request->name(), *version);
      response->set_ready(ready.ok());
      return ToGrpcStatus(ready);
    });
  }

  grpc::Status ServerMetadata(grpc::ServerContext* context, const inference::ServerMetadataRequest*,
                              inference::ServerMetadataResponse* response) override {
    grpc_audit::GrpcRecord audit(options_.audit, *context, "ServerMetadata", "*", "");
    if (auto refused = Refused(context, audit, "ServerMetadata")) {
      return Recorded(audit, *refused, nullptr);
    }
    return AnswerRecorded(audit, *response, [&] {
      response->set_name(options_.server_name);
      response->set_version(options_.server_version);
      // binary_tensor_data and logging are HTTP-only extensions.
      for (const char* extension : {"model_configuration", "statistics", "model_repository"}) {
        response->add_extensions(extension);
      }
      return grpc::Status::OK;
    });
  }

  grpc::Status ModelMetadata(grpc::ServerContext* context,
                             const inference::ModelMetadataRequest* request,
                             inference::ModelMetadataResponse* response) override {
    grpc_audit::GrpcRecord audit(options_.audit, *context, "ModelMetadata", request->name(), "");
    if (auto refused = Refused(context, audit, "ModelMetadata", request->name())) {
      return Recorded(audit, *refused, nullptr);
    }
    return AnswerRecorded(audit, *response, [&] {
      Result<int64_t> version = ParseModelVersion(request->version());
      if (!version.ok()) return ToGrpcStatus(version.status());
      Result<serve::ModelMetadata> metadata = server_.Metadata(request->name(), *version);
      if (!metadata.ok()) return ToGrpcStatus(metadata.status());
      FillModelMetadata(*metadata, *response);
      return grpc::Status::OK;
    });
  }

  grpc::Status ModelConfig(grpc::ServerContext* context,
                           const inference::ModelConfigRequest* request,
                           inference::ModelConfigResponse* response) override {
    grpc_audit::GrpcRecord audit(options_.audit, *context, "ModelConfig", request->name(), "");
    if (auto refused = Refused(context, audit, "ModelConfig", request->name())) {
      return Recorded(audit, *refused, nullptr);
    }
    return AnswerRecorded(audit, *response, [&] {
      Result<int64_t> version = ParseModelVersion(request->version());
      if (!version.ok()) return ToGrpcStatus(version.status());
      auto model = server_.GetModel(request->name(), *version);
      if (!model.ok()) return ToGrpcStatus(model.status());
      *response->mutable_config() = (*model)->config();
      return grpc::Status::OK;
    });
  }

  grpc::Status ModelStatistics(grpc::ServerContext* context,
                               const inference::ModelStatisticsRequest* request,
                               inference::ModelStatisticsResponse* response) override {
    grpc_audit::GrpcRecord audit(options_.audit, *context, "ModelStatistics",
                                 request->name().empty() ? "*" : request->name(), "");
    // Every model's statistics (no name) is the resource "*".
    if (auto refused = Refused(context, audit, "ModelStatistics",
                               request->name().empty() ? "*" : request->name())) {
      return Recorded(audit, *refused, nullptr);
    }
    return AnswerRecorded(audit, *response, [&] {
      Result<int64_t> version = request->version().empty() ? Result<int64_t>(serve::kLatestVersion)
                                                           : ParseModelVersion(request->version());
      if (!version.ok()) return ToGrpcStatus(version.status());
      Result<std::vector<std::shared_ptr<serve::ModelVersion>>> models =
          server_.StatisticsTargets(request->name(), *version);
      if (!models.ok()) return ToGrpcStatus(models.status());
      for (const auto& model : *models) FillModelStatistics(*model, *response->add_model_stats());
      return grpc::Status::OK;
    });
  }

  // Reads the repository's directory: on the repository thread.
  grpc::Status RepositoryIndex(grpc::ServerContext* context,
                               const inference::RepositoryIndexRequest* request,
                               inference::RepositoryIndexResponse* response) override {
    grpc_audit::GrpcRecord audit(options_.audit, *context, "RepositoryIndex", "*", "");
    if (auto refused = Refused(context, audit, "RepositoryIndex")) {
      return Recorded(audit, *refused, nullptr);
    }
    return OnWorker(repository_reads_, std::move(audit), "reading the repository index", [=, this] {
      if (!request->repository_name().empty()) {
        return Unimplemented("'repository_name' specification is not supported");
      }
      for (const serve::ModelIndexEntry& entry : server_.RepositoryIndex()) {
        if (request->ready() && entry.state != "READY") continue;
        auto& model = *response->add_models();
        model.set_name(entry.name);
        model.set_version(entry.version);
        model.set_state(entry.state);
        model.set_reason(entry.reason);
      }
      return Status::Ok();
    });
  }

  grpc::Status RepositoryModelLoad(grpc::ServerContext* context,
                                   const inference::RepositoryModelLoadRequest* request,
                                   inference::RepositoryModelLoadResponse*) override {
    return RepositoryControl(context, *request, /*load=*/true);
  }

  grpc::Status RepositoryModelUnload(grpc::ServerContext* context,
                                     const inference::RepositoryModelUnloadRequest* request,
                                     inference::RepositoryModelUnloadResponse*) override {
    return RepositoryControl(context, *request, /*load=*/false);
  }

 private:
  // The refusal of a call of `method` (its action and resource type: grpc_access::RpcActions)
  // on the resource `name`, or nullopt when it may go on (open, or granted). A rate's refusal
  // carries `retry-after` in the trailing metadata.
  std::optional<grpc::Status> Refused(grpc::ServerContextBase* context,
                                      grpc_audit::GrpcRecord& audit, std::string_view method,
                                      std::string_view name = "") {
    const policy::AccessControl* access = options_.access;
    if (access == nullptr || !access->enforcing()) return std::nullopt;
    const grpc_access::RpcAction& decided = grpc_access::RpcActionOf(method);
    const Peer peer = grpc_access::PeerOf(*context);
    policy::AccessOutcome outcome = grpc_audit::Check(
        *access, grpc_access::CredentialsOf(*context, peer), decided.action,
        policy::Resource{.type = decided.resource_type, .name = name}, audit.record());
    const auto* refusal = std::get_if<policy::AccessRefusal>(&outcome);
    if (refusal == nullptr) {
      audit.SetFull(
          std::get<policy::AccessGrant>(outcome).HasObligation(policy::kObligationAuditFull));
      return std::nullopt;
    }
    if (refusal->retry_after_seconds > 0) {
      context->AddTrailingMetadata("retry-after", std::to_string(refusal->retry_after_seconds));
    }
    return grpc_access::StatusOf(*refusal, grpc_access::RequestIdOf(*context));
  }

  // Loading reads files and builds models: it runs on the control thread, one at a time, and
  // finishes the call from there (as HTTP does).
  template <typename Request>
  grpc::Status RepositoryControl(grpc::ServerContext* context, const Request& request, bool load) {
    const std::string_view method = load ? "RepositoryModelLoad" : "RepositoryModelUnload";
    grpc_audit::GrpcRecord audit(options_.audit, *context, method, request.model_name(), "");
    if (audit.recording()) audit.SetRequestContent(request.SerializeAsString());
    if (auto refused = Refused(context, audit, method, request.model_name())) {
      return Recorded(audit, *refused, nullptr);
    }
    Result<Control> control = ControlParameters(request, load);
    if (!control.ok()) return Recorded(audit, ToGrpcStatus(control.status()), nullptr);
    return OnWorker(
        control_, std::move(audit), load ? "loading a model" : "unloading a model",
        [this, load, model = request.model_name(), control = std::move(control).value()]() mutable {
          return load ? server_.LoadModel(model, std::move(control.config))
                      : server_.UnloadModel(model, control.unload_dependents);
        });
  }

  // Runs `work` (returning a Status; it may fill the call's response) on `worker` and answers
  // with its result once it ran. A full queue answers RESOURCE_EXHAUSTED at once, a stopping
  // worker UNAVAILABLE; an exception from `work` becomes its Status. The call is recorded by
  // `audit` as it finishes.
  template <typename Work>
  static grpc::Status OnWorker(SerialWorker& worker, grpc_audit::GrpcRecord audit,
                               std::string_view what, Work work) {
    return AwaitAnswer([&](UniqueFunction<void(grpc::Status)> finish) {
      // Shared, so that a refused Post still has them to record the refusal.
      auto held = std::make_shared<grpc_audit::GrpcRecord>(std::move(audit));
      auto finish_held = std::make_shared<UniqueFunction<void(grpc::Status)>>(std::move(finish));
      const Status queued = CatchAsStatus("queuing a repository call", [&] {
        return worker.Post([held, finish_held, what, work = std::move(work)]() mutable {
          held->Finish(ToGrpcStatus(CatchAsStatus(what, [&] { return work(); })), "",
                       std::move(*finish_held));
        });
      });
      if (queued.code() == StatusCode::kResourceExhausted) {
        held->Finish(
            ToGrpcStatus(ResourceExhausted(
                "too many repository requests are waiting ({}); retry later", queued.message())),
            "", std::move(*finish_held));
      } else if (!queued.ok()) {
        held->Finish(ToGrpcStatus(queued), "", std::move(*finish_held));
      }
    });
  }

  serve::InferenceServer& server_;
  const KServeGrpcOptions& options_;
  grpc_calls::CallShared shared_;
  // Repository load/unload, one at a time, and the index apart (it answers while a load runs);
  // last: they stop first.
  SerialWorker repository_reads_{"grpc-index", kMaxQueuedRepositoryCalls};
  SerialWorker control_{"grpc-control", kMaxQueuedRepositoryCalls};
};

Result<std::string> ReadPem(const std::string& path, std::string_view flag) {
  if (path.empty()) return InvalidArgument("{} is required with TLS", flag);
  std::ifstream file(path, std::ios::binary);
  if (!file) return InvalidArgument("{}: cannot read '{}'", flag, path);
  std::ostringstream contents;
  contents << file.rdbuf();
  if (contents.str().empty()) return InvalidArgument("{}: '{}' is empty", flag, path);
  return contents.str();
}

Result<std::shared_ptr<grpc::ServerCredentials>> Credentials(const KServeGrpcOptions& options) {
  if (!options.tls) return grpc::InsecureServerCredentials();
  const GrpcTlsOptions& tls = *options.tls;
  grpc::SslServerCredentialsOptions ssl;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  ASSIGN_OR_RETURN(pair.private_key, ReadPem(tls.server_key, "--grpc-server-key"));
  ASSIGN_OR_RETURN(pair.cert_chain, ReadPem(tls.server_cert, "--grpc-server-cert"));
  ssl.pem_key_cert_pairs.push_back(std::move(pair));
  if (tls.mutual || !tls.root_cert.empty()) {
    ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadPem(tls.root_cert, "--grpc-root-cert"));
  }
  ssl.client_certificate_request = tls.mutual
                                       ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                       : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
  return grpc::SslServerCredentials(ssl);
}

// Debian builds Abseil without NDEBUG, so every absl::Mutex (all of gRPC's locks, several per call)
// records its lock order in a global graph to detect deadlocks: 6-7 % of the server's instructions
// per unary call. Process-wide; Rampart's own code takes no absl::Mutex.
void NoMutexDeadlockDetection() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

std::string HostPort(const std::string& address, int port) {
  const bool ipv6 = address.find(':') != std::string::npos && address.front() != '[';
  return ipv6 ? fmt::format("[{}]:{}", address, port) : fmt::format("{}:{}", address, port);
}

}  // namespace

struct KServeGrpc::Impl {
  Impl(serve::InferenceServer& server, KServeGrpcOptions options_in)
      : options(std::move(options_in)), service(server, options) {}

  const KServeGrpcOptions options;
  Service service;                                   // outlives grpc_server (declared before it)
  grpc::AsyncGenericService unknown_methods;         // likewise
  grpc_health::HealthService health{kServiceName};   // likewise
  std::unique_ptr<grpc::Server> grpc_server;         // null until started
  std::unique_ptr<grpc_calls::CallPollers> pollers;  // null until started
  int port = 0;
  bool stopped = false;
  bool shut_down = false;
};

KServeGrpc::KServeGrpc(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

KServeGrpc::~KServeGrpc() { Shutdown(std::chrono::milliseconds(0)); }

Result<std::unique_ptr<KServeGrpc>> KServeGrpc::Start(serve::InferenceServer& server,
                                                      KServeGrpcOptions options) {
  try {
    ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials, Credentials(options));
    auto impl = std::make_unique<Impl>(server, std::move(options));
    const std::string target = HostPort(impl->options.address, impl->options.port);
    // Ours instead (api/kserve_grpc_health.h says why).
    grpc::EnableDefaultHealthCheckService(false);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    grpc::ServerBuilder builder;
    builder.AddListeningPort(target, credentials, &impl->port);
    builder.RegisterService(&impl->service);
    builder.RegisterService(&impl->health);
    builder.RegisterAsyncGenericService(&impl->unknown_methods);
    impl->service.shared().unknown_methods = &impl->unknown_methods;
    builder.SetMaxReceiveMessageSize(impl->options.max_receive_bytes);
    // gRPC's own buffers (transport reads and writes, call state) draw on a quota of their own;
    // the requests held in flight are bounded by the front end's byte budget.
    grpc::ResourceQuota quota("rampart-grpc");
    quota.Resize(impl->options.transport_memory_bytes);
    builder.SetResourceQuota(quota);
    const size_t queue_count = impl->options.completion_queue_threads > 0
                                   ? static_cast<size_t>(impl->options.completion_queue_threads)
                                   : 1;
    std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues;
    for (size_t i = 0; i < queue_count; ++i) queues.push_back(builder.AddCompletionQueue());
    // Without this, Linux lets a second server bind the same port and steal half the calls.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    // channelz keeps per-channel and per-call counters and traces for gRPC's admin service, which
    // Rampart does not serve; every call paid for them (docs/benchmarks.md, "gRPC per-call cost").
    builder.AddChannelArgument(GRPC_ARG_ENABLE_CHANNELZ, 0);
    NoMutexDeadlockDetection();
    impl->grpc_server = builder.BuildAndStart();
    if (impl->grpc_server == nullptr || impl->port == 0) {
      impl->grpc_server.reset();
      for (auto& queue : queues) {  // drained before they go
        queue->Shutdown();
        void* tag = nullptr;
        bool ok = false;
        while (queue->Next(&tag, &ok)) {
        }
      }
      return Unavailable("gRPC cannot listen on {}{}", target,
                         impl->options.tls ? " (is the address free, and are the TLS certificate "
                                             "and key valid PEM that belong together?)"
                                           : " (is the address free?)");
    }
    impl->pollers = std::make_unique<grpc_calls::CallPollers>(
        impl->service.shared(), std::move(queues), impl->options.cork_writes ? impl->port : 0,
        impl->options.after_cork);
    return std::unique_ptr<KServeGrpc>(new KServeGrpc(std::move(impl)));
  } catch (const std::exception& error) {
    return Internal("starting the gRPC server: {}", error.what());
  }
}

int KServeGrpc::port() const { return impl_->port; }

uint64_t KServeGrpc::cancelled_calls() const {
  return impl_->service.shared().cancelled_calls.load(std::memory_order_relaxed);
}

void KServeGrpc::StopServing() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->health.SetServingAll(false);
  impl_->service.shared().streams.StopAll();
}

void KServeGrpc::Shutdown(std::chrono::milliseconds timeout) {
  if (impl_->shut_down) return;
  StopServing();
  impl_->shut_down = true;
  impl_->health.Shutdown();  // its Watch calls end: the server's Shutdown waits for them
  // Returns once every call's handler is done (cancelled at the deadline if still running).
  impl_->grpc_server->Shutdown(std::chrono::system_clock::now() + timeout);
  impl_->pollers->Stop();  // once the calls the server still held are answered
  impl_->service.StopControl();
}

}  // namespace rampart::api
