#include "api/kserve_grpc.h"

#include <atomic>
#include <deque>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <utility>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "api/grpc_service.grpc.pb.h"
#include "api/kserve_grpc_codec.h"
#include "core/clock.h"
#include "core/logging.h"

namespace rampart::api {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;
using inference::ModelStreamInferResponse;

constexpr char kServiceName[] = "inference.GRPCInferenceService";

using InferResult = Result<std::unique_ptr<serve::InferResponse>>;

// Runs `body` (returning a grpc::Status) and finishes the call with its result; exceptions become
// INTERNAL here, so none reaches gRPC.
template <typename Body>
grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context, Body&& body) {
  grpc::Status status;
  try {
    status = body();
  } catch (const std::exception& error) {
    status = grpc::Status(grpc::StatusCode::INTERNAL, error.what());
  } catch (...) {
    status = grpc::Status(grpc::StatusCode::INTERNAL, "unexpected exception");
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(std::move(status));
  return reactor;
}

// Decodes, turning exceptions (allocation failures) into Internal.
Result<std::unique_ptr<serve::InferRequest>> SafeDecode(ModelInferRequest& request) {
  try {
    return DecodeInferRequest(request);
  } catch (const std::exception& error) {
    return Internal("decoding the infer request: {}", error.what());
  }
}

// Fills `out` from a completed request; the status the call or stream entry ends with.
Status SafeEncode(InferResult& result, ModelInferResponse& out) {
  if (!result.ok()) return result.status();
  try {
    EncodeInferResponse(**result, out);
    return Status::Ok();
  } catch (const std::exception& error) {
    return Internal("encoding the infer response: {}", error.what());
  }
}

class Service;

// One ModelInfer call. Lives from the handler until gRPC calls OnDone (after Finish).
class InferCall final : public grpc::ServerUnaryReactor {
 public:
  explicit InferCall(std::atomic<uint64_t>& cancelled_calls) : cancelled_calls_(cancelled_calls) {}

  void OnCancel() override {
    cancelled_->store(true, std::memory_order_relaxed);
    cancelled_calls_.fetch_add(1, std::memory_order_relaxed);
  }
  void OnDone() override { delete this; }

  std::shared_ptr<const std::atomic<bool>> cancelled() const { return cancelled_; }

 private:
  std::atomic<uint64_t>& cancelled_calls_;
  const std::shared_ptr<std::atomic<bool>> cancelled_ = std::make_shared<std::atomic<bool>>(false);
};

// One ModelStreamInfer call. Reads requests one after another and hands each to the server
// without waiting for the previous one; responses are queued and written one at a time, in
// completion order. The stream finishes once reading has ended (client half-close, cancellation
// or shutdown) and every request in flight has been answered.
//
// Every gRPC operation (StartRead, StartWrite, Finish) is started under mutex_: gRPC runs the
// reactions of a bidi stream on its own threads, never inline, so this cannot deadlock, and it
// keeps "finished" and "start another operation" from racing.
class StreamCall final
    : public grpc::ServerBidiReactor<ModelInferRequest, ModelStreamInferResponse> {
 public:
  explicit StreamCall(Service& service);

  // The server is draining: end the stream once its requests in flight are answered.
  void Stop();

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  // Decodes request_ and hands it to the server (or answers the error in the stream). The
  // request is already counted in in_flight_; Respond uncounts it.
  void Handle();
  void Respond(ModelStreamInferResponse response);
  // REQUIRES: mutex_ held. Starts the next write, resumes reading or finishes, as the state
  // allows.
  void ProgressLocked();

  Service& service_;
  const std::shared_ptr<std::atomic<bool>> cancelled_ = std::make_shared<std::atomic<bool>>(false);
  ModelInferRequest request_;  // target of the read in progress; used by the read path only

  std::mutex mutex_;
  std::deque<ModelStreamInferResponse> writes_;  // guarded; front() is on the wire if writing_
  bool writing_ = false;                         // guarded
  bool reading_ = false;       // guarded; a read is outstanding or its request is being handled
  bool reads_done_ = false;    // guarded; the client half-closed (or the read side broke)
  bool write_failed_ = false;  // guarded; the write side broke: nobody reads the answers
  bool stopping_ = false;      // guarded; the server is draining
  bool finished_ = false;      // guarded; Finish was called
  int in_flight_ = 0;          // guarded; requests handed to the server, not yet answered
};

class Service final : public inference::GRPCInferenceService::CallbackService {
 public:
  Service(serve::InferenceServer& server, const KServeGrpcOptions& options)
      : server_(server), options_(options) {}

  serve::InferenceServer& server() { return server_; }
  std::atomic<uint64_t>& cancelled_calls() { return cancelled_calls_; }

  // Streams register while open so a drain can end them. Register fails once draining.
  bool Register(StreamCall* stream) {
    std::lock_guard lock(streams_mutex_);
    if (stopping_) return false;
    streams_.insert(stream);
    return true;
  }
  void Unregister(StreamCall* stream) {
    std::lock_guard lock(streams_mutex_);
    streams_.erase(stream);
  }
  void StopStreams() {
    std::lock_guard lock(streams_mutex_);
    stopping_ = true;
    // A stream cannot be deleted meanwhile: its OnDone waits for streams_mutex_ to unregister.
    for (StreamCall* stream : streams_) stream->Stop();
  }

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context,
                                       const inference::ServerLiveRequest*,
                                       inference::ServerLiveResponse* response) override {
    return Answer(context, [&] {
      response->set_live(server_.IsLive());
      return grpc::Status::OK;
    });
  }

  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* context,
                                        const inference::ServerReadyRequest*,
                                        inference::ServerReadyResponse* response) override {
    return Answer(context, [&] {
      response->set_ready(server_.IsReady());
      return grpc::Status::OK;
    });
  }

  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* context,
                                       const inference::ModelReadyRequest* request,
                                       inference::ModelReadyResponse* response) override {
    return Answer(context, [&] {
      Result<int64_t> version = ParseModelVersion(request->version());
      if (!version.ok()) return ToGrpcStatus(version.status());
      // Like HTTP (400, not 404), an unknown model is simply not ready.
      response->set_ready(server_.IsReady() && server_.GetModel(request->name(), *version).ok());
      return grpc::Status::OK;
    });
  }

  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* context,
                                           const inference::ServerMetadataRequest*,
                                           inference::ServerMetadataResponse* response) override {
    return Answer(context, [&] {
      response->set_name(options_.server_name);
      response->set_version(options_.server_version);
      // binary_tensor_data and logging are HTTP-only extensions.
      for (const char* extension : {"model_configuration", "statistics", "model_repository"}) {
        response->add_extensions(extension);
      }
      return grpc::Status::OK;
    });
  }

  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override {
    return Answer(context, [&] {
      Result<int64_t> version = ParseModelVersion(request->version());
      if (!version.ok()) return ToGrpcStatus(version.status());
      auto model = server_.GetModel(request->name(), *version);
      if (!model.ok()) return ToGrpcStatus(model.status());
      auto versions = server_.GetVersions(request->name());
      FillModelMetadata(
          **model, versions.ok() ? *versions : std::vector<std::shared_ptr<serve::ModelVersion>>(),
          *response);
      return grpc::Status::OK;
    });
  }

  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* context,
                                        const inference::ModelConfigRequest* request,
                                        inference::ModelConfigResponse* response) override {
    return Answer(context, [&] {
      Result<int64_t> version = ParseModelVersion(request->version());
      if (!version.ok()) return ToGrpcStatus(version.status());
      auto model = server_.GetModel(request->name(), *version);
      if (!model.ok()) return ToGrpcStatus(model.status());
      *response->mutable_config() = (*model)->config();
      return grpc::Status::OK;
    });
  }

  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* context,
                                            const inference::ModelStatisticsRequest* request,
                                            inference::ModelStatisticsResponse* response) override {
    return Answer(context, [&] {
      std::vector<std::shared_ptr<serve::ModelVersion>> models;
      if (request->name().empty()) {
        models = server_.AllModels();
      } else if (request->version().empty()) {
        auto versions = server_.GetVersions(request->name());
        if (!versions.ok()) return ToGrpcStatus(versions.status());
        models = std::move(versions).value();
      } else {
        Result<int64_t> version = ParseModelVersion(request->version());
        if (!version.ok()) return ToGrpcStatus(version.status());
        auto model = server_.GetModel(request->name(), *version);
        if (!model.ok()) return ToGrpcStatus(model.status());
        models.push_back(std::move(model).value());
      }
      for (const auto& model : models) FillModelStatistics(*model, *response->add_model_stats());
      return grpc::Status::OK;
    });
  }

  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* context,
                                            const inference::RepositoryIndexRequest* request,
                                            inference::RepositoryIndexResponse* response) override {
    return Answer(context, [&] {
      if (!request->repository_name().empty()) {
        return ToGrpcStatus(Unimplemented("'repository_name' specification is not supported"));
      }
      for (const serve::ModelIndexEntry& entry : server_.RepositoryIndex()) {
        if (request->ready() && entry.state != "READY") continue;
        auto& model = *response->add_models();
        model.set_name(entry.name);
        model.set_version(entry.version);
        model.set_state(entry.state);
        model.set_reason(entry.reason);
      }
      return grpc::Status::OK;
    });
  }

  grpc::ServerUnaryReactor* RepositoryModelLoad(grpc::CallbackServerContext* context,
                                                const inference::RepositoryModelLoadRequest*,
                                                inference::RepositoryModelLoadResponse*) override {
    return Answer(context, [] {
      return ToGrpcStatus(
          Unimplemented("explicit model load is not supported yet; models load at start-up"));
    });
  }

  grpc::ServerUnaryReactor* RepositoryModelUnload(
      grpc::CallbackServerContext* context, const inference::RepositoryModelUnloadRequest*,
      inference::RepositoryModelUnloadResponse*) override {
    return Answer(context, [] {
      return ToGrpcStatus(
          Unimplemented("explicit model unload is not supported yet; models load at start-up"));
    });
  }

  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const ModelInferRequest* request,
                                       ModelInferResponse* response) override {
    const SteadyTime arrival = Clock::Real().Now();
    auto* call = new InferCall(cancelled_calls_);
    // The request is ours until the call is done; its allocator state hands it out mutable, so
    // raw tensor bytes move into the InferRequest instead of being copied.
    auto* holder = static_cast<grpc::MessageHolder<ModelInferRequest, ModelInferResponse>*>(
        context->GetRpcAllocatorState());
    ModelInferRequest copy;
    ModelInferRequest* mutable_request = holder != nullptr ? holder->request() : nullptr;
    if (mutable_request != request) {
      copy = *request;
      mutable_request = &copy;
    }
    Result<std::unique_ptr<serve::InferRequest>> decoded = SafeDecode(*mutable_request);
    if (!decoded.ok()) {
      call->Finish(ToGrpcStatus(decoded.status()));
      return call;
    }
    (*decoded)->arrival = arrival;
    (*decoded)->cancelled = call->cancelled();
    server_.Infer(std::move(decoded).value(), [call, response](InferResult result) {
      call->Finish(ToGrpcStatus(SafeEncode(result, *response)));
    });
    return call;
  }

  grpc::ServerBidiReactor<ModelInferRequest, ModelStreamInferResponse>* ModelStreamInfer(
      grpc::CallbackServerContext*) override {
    return new StreamCall(*this);
  }

 private:
  serve::InferenceServer& server_;
  const KServeGrpcOptions& options_;
  std::atomic<uint64_t> cancelled_calls_{0};

  std::mutex streams_mutex_;
  std::set<StreamCall*> streams_;  // guarded by streams_mutex_
  bool stopping_ = false;          // guarded by streams_mutex_
};

StreamCall::StreamCall(Service& service) : service_(service) {
  const bool registered = service_.Register(this);
  std::lock_guard lock(mutex_);
  stopping_ = !registered;
  ProgressLocked();
}

void StreamCall::Stop() {
  std::lock_guard lock(mutex_);
  stopping_ = true;
  ProgressLocked();
}

void StreamCall::OnReadDone(bool ok) {
  if (!ok) {
    std::lock_guard lock(mutex_);
    reading_ = false;
    reads_done_ = true;
    ProgressLocked();
    return;
  }
  {
    // Counted from here, so the stream cannot finish (and be deleted) while Handle runs or
    // before the server's callback for this request has run.
    std::lock_guard lock(mutex_);
    ++in_flight_;
  }
  Handle();
  std::lock_guard lock(mutex_);
  reading_ = false;
  ProgressLocked();
}

void StreamCall::Handle() {
  const SteadyTime arrival = Clock::Real().Now();
  Result<std::unique_ptr<serve::InferRequest>> decoded = SafeDecode(request_);
  if (!decoded.ok()) {
    ModelStreamInferResponse response;
    response.set_error_message(decoded.status().message());
    // Name the request the error belongs to, so clients can match it.
    response.mutable_infer_response()->set_model_name(request_.model_name());
    response.mutable_infer_response()->set_model_version(request_.model_version());
    response.mutable_infer_response()->set_id(request_.id());
    Respond(std::move(response));
    return;
  }
  (*decoded)->arrival = arrival;
  (*decoded)->cancelled = cancelled_;
  service_.server().Infer(std::move(decoded).value(), [this, model = request_.model_name(),
                                                       version = request_.model_version(),
                                                       id = request_.id()](InferResult result) {
    ModelStreamInferResponse response;
    if (Status encoded = SafeEncode(result, *response.mutable_infer_response()); !encoded.ok()) {
      response.Clear();
      response.set_error_message(encoded.message());
      response.mutable_infer_response()->set_model_name(model);
      response.mutable_infer_response()->set_model_version(version);
      response.mutable_infer_response()->set_id(id);
    }
    Respond(std::move(response));
  });
}

void StreamCall::Respond(ModelStreamInferResponse response) {
  std::lock_guard lock(mutex_);
  --in_flight_;
  if (!write_failed_ && !cancelled_->load(std::memory_order_relaxed)) {
    writes_.push_back(std::move(response));
  }
  ProgressLocked();
}

void StreamCall::OnWriteDone(bool ok) {
  std::lock_guard lock(mutex_);
  writing_ = false;
  writes_.pop_front();
  if (!ok) write_failed_ = true;
  ProgressLocked();
}

void StreamCall::OnCancel() {
  cancelled_->store(true, std::memory_order_relaxed);
  service_.cancelled_calls().fetch_add(1, std::memory_order_relaxed);
  std::lock_guard lock(mutex_);
  ProgressLocked();
}

void StreamCall::OnDone() {
  service_.Unregister(this);
  delete this;
}

void StreamCall::ProgressLocked() {
  if (finished_) return;
  const bool cancelled = cancelled_->load(std::memory_order_relaxed);
  if (cancelled || write_failed_) {
    // Nobody will read what is still queued (the one on the wire completes by itself).
    while (writes_.size() > (writing_ ? 1u : 0u)) writes_.pop_back();
  } else if (!writing_ && !writes_.empty()) {
    writing_ = true;
    StartWrite(&writes_.front());
  }
  const bool ending = reads_done_ || stopping_ || cancelled || write_failed_;
  if (!ending && !reading_ && in_flight_ + static_cast<int>(writes_.size()) < kMaxStreamPending) {
    reading_ = true;
    StartRead(&request_);
  }
  if (!ending || in_flight_ > 0 || writing_ || (!writes_.empty() && !cancelled)) return;
  finished_ = true;
  if (cancelled || write_failed_) {
    Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the stream was cancelled"));
  } else if (stopping_ && !reads_done_) {
    Finish(ToGrpcStatus(Unavailable("the server is shutting down")));
  } else {
    Finish(grpc::Status::OK);
  }
}

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

std::string HostPort(const std::string& address, int port) {
  const bool ipv6 = address.find(':') != std::string::npos && address.front() != '[';
  return ipv6 ? fmt::format("[{}]:{}", address, port) : fmt::format("{}:{}", address, port);
}

}  // namespace

struct KServeGrpc::Impl {
  Impl(serve::InferenceServer& server, KServeGrpcOptions options_in)
      : options(std::move(options_in)), service(server, options) {}

  const KServeGrpcOptions options;
  Service service;                            // outlives grpc_server (declared before it)
  std::unique_ptr<grpc::Server> grpc_server;  // null until started
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
    grpc::EnableDefaultHealthCheckService(true);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    grpc::ServerBuilder builder;
    builder.AddListeningPort(target, credentials, &impl->port);
    builder.RegisterService(&impl->service);
    builder.SetMaxReceiveMessageSize(impl->options.max_receive_bytes);
    // Without this, Linux lets a second server bind the same port and steal half the calls.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    impl->grpc_server = builder.BuildAndStart();
    if (impl->grpc_server == nullptr || impl->port == 0) {
      impl->grpc_server.reset();
      return Unavailable("gRPC cannot listen on {}{}", target,
                         impl->options.tls ? " (is the address free, and are the TLS certificate "
                                             "and key valid PEM that belong together?)"
                                           : " (is the address free?)");
    }
    if (grpc::HealthCheckServiceInterface* health = impl->grpc_server->GetHealthCheckService()) {
      health->SetServingStatus(kServiceName, true);
    }
    return std::unique_ptr<KServeGrpc>(new KServeGrpc(std::move(impl)));
  } catch (const std::exception& error) {
    return Internal("starting the gRPC server: {}", error.what());
  }
}

int KServeGrpc::port() const { return impl_->port; }

uint64_t KServeGrpc::cancelled_calls() const {
  return impl_->service.cancelled_calls().load(std::memory_order_relaxed);
}

void KServeGrpc::StopServing() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  if (grpc::HealthCheckServiceInterface* health = impl_->grpc_server->GetHealthCheckService()) {
    health->SetServingStatus(false);
  }
  impl_->service.StopStreams();
}

void KServeGrpc::Shutdown(std::chrono::milliseconds timeout) {
  if (impl_->shut_down) return;
  StopServing();
  impl_->shut_down = true;
  // Returns once every call's handler is done (cancelled at the deadline if still running).
  impl_->grpc_server->Shutdown(std::chrono::system_clock::now() + timeout);
}

}  // namespace rampart::api
