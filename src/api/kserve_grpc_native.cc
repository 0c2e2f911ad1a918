#include "api/kserve_grpc_native.h"

#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include <google/protobuf/arena.h>

#include "api/grpc_service.pb.h"
#include "api/health.pb.h"
#include "api/kserve_grpc_access.h"
#include "api/kserve_grpc_calls.h"
#include "api/kserve_grpc_codec.h"
#include "api/kserve_grpc_health.h"
#include "api/kserve_grpc_infer.h"
#include "api/kserve_grpc_methods.h"
#include "api/kserve_grpc_reflection.h"
#include "core/exceptions.h"
#include "core/logging.h"
#include "net/grpc_server.h"

namespace rampart::api::grpc_native {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;
using inference::ModelStreamInferResponse;
using Call = std::shared_ptr<net::GrpcCall>;
// Runs a unary method on its request message.
using UnaryMethod = std::function<void(Call call, std::string message)>;

constexpr char kService[] = "inference.GRPCInferenceService";
constexpr char kModelInfer[] = "/inference.GRPCInferenceService/ModelInfer";
constexpr char kModelStreamInfer[] = "/inference.GRPCInferenceService/ModelStreamInfer";
constexpr char kHealthCheck[] = "/grpc.health.v1.Health/Check";
constexpr char kHealthWatch[] = "/grpc.health.v1.Health/Watch";

net::GrpcCode CodeOf(const grpc::Status& status) {
  return static_cast<net::GrpcCode>(status.error_code());
}

// `message` serialized into a message to send, with no copy between (the tensors' bytes go
// straight from the response into the buffer that is sent).
net::GrpcOutMessage Serialized(const google::protobuf::Message& message) {
  net::GrpcOutMessage out(message.ByteSizeLong());
  message.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(out.payload()));
  return out;
}

// Ends `call` with `status`: `response` and OK, or the error; `trailers` either way.
void FinishCall(net::GrpcCall& call, const grpc::Status& status,
                const google::protobuf::Message* response, net::GrpcMetadata trailers) {
  if (!status.ok()) {
    call.Finish(CodeOf(status), status.error_message(), std::move(trailers));
    return;
  }
  net::GrpcOutMessage serialized =
      response != nullptr ? Serialized(*response) : net::GrpcOutMessage(0);
  if (trailers.empty()) {
    call.FinishWith(std::move(serialized));
  } else {
    call.Write(std::move(serialized));
    call.Finish(net::GrpcCode::kOk, "", std::move(trailers));
  }
}

// A call with one request message: it runs `method` once the client has sent it and ended its
// side. The method answers the call itself.
class UnaryHandler final : public net::GrpcCallHandler {
 public:
  UnaryHandler(Call call, const UnaryMethod& method) : call_(std::move(call)), method_(method) {}

  void OnMessage(std::string message) override {
    if (message_) {
      call_->Finish(net::GrpcCode::kUnimplemented, "a unary method got more than one request");
      failed_ = true;
      return;
    }
    message_ = std::move(message);
  }
  void OnHalfClose() override {
    if (failed_) return;
    if (!message_) {
      call_->Finish(net::GrpcCode::kUnimplemented, "the call ended without a request message");
      return;
    }
    method_(call_, std::move(*message_));
  }
  void OnCancel() override {}

 private:
  const Call call_;
  const UnaryMethod& method_;
  std::optional<std::string> message_;
  bool failed_ = false;
};

// A unary method of KServeMethods (or the health service): parses `message` as Request, runs
// `invoke(view, request, response, done)`, and answers the call with what `done` gets.
template <typename Request, typename Response, typename Invoke>
void RunUnary(Call call, const std::string& message, Invoke& invoke) {
  struct Held {
    explicit Held(Call call_in) : call(std::move(call_in)), view(*call) {}
    Call call;
    grpc_access::GrpcCallView view;
    Request request;
    Response response;
  };
  auto held = std::make_shared<Held>(std::move(call));
  if (!held->request.ParseFromString(message)) {
    held->call->Finish(net::GrpcCode::kInternal, "the request message does not parse");
    return;
  }
  invoke(held->view, held->request, held->response, [held](grpc::Status status) {
    FinishCall(*held->call, status, &held->response, held->view.TakeTrailers());
  });
}

template <typename Request, typename Response, typename Invoke>
UnaryMethod Unary(Invoke invoke) {
  return [invoke = std::move(invoke)](Call call, std::string message) mutable {
    RunUnary<Request, Response>(std::move(call), message, invoke);
  };
}

// One ModelInfer call, from its request to its answer (shared by the transport's handler and
// the server's callback).
struct InferCall {
  InferCall(grpc_calls::CallShared& shared_in, Call call_in)
      : shared(shared_in), call(std::move(call_in)), view(*call) {
    shared.CallCreated();
  }
  ~InferCall() { shared.CallDeleted(); }
  InferCall(const InferCall&) = delete;
  InferCall& operator=(const InferCall&) = delete;

  // Once: an answer that comes after a failure was answered is dropped.
  void Answer(const grpc::Status& status) {
    if (answered.exchange(true)) return;
    FinishCall(*call, status, &response, view.TakeTrailers());
  }

  grpc_calls::CallShared& shared;  // counts the call alive: the front end waits for it
  Call call;
  grpc_access::GrpcCallView view;
  // The request and the response live on the call's arena, whose first block is part of this
  // object (no heap allocation of their own for a small request).
  alignas(std::max_align_t) char arena_block[grpc_calls::kArenaBlockBytes];
  google::protobuf::Arena arena{grpc_calls::ArenaOn(arena_block, sizeof(arena_block))};
  ModelInferRequest& request = *google::protobuf::Arena::CreateMessage<ModelInferRequest>(&arena);
  ModelInferResponse& response =
      *google::protobuf::Arena::CreateMessage<ModelInferResponse>(&arena);
  std::atomic<bool> answered{false};
};

}  // namespace

// One ModelStreamInfer call (as api/kserve_grpc_calls.h's StreamCall on gRPC core): requests are
// handed to the server as they arrive, answers written in request order. Every write and the
// finish happen on the connection's I/O thread (Pump), which keeps them in order whichever
// thread answered; the server's callbacks only fill a slot under mutex_ and ask for a Pump.
// Reading pauses while kMaxStreamPending requests are unanswered or unwritten.
class NativeStream : public std::enable_shared_from_this<NativeStream> {
 public:
  NativeStream(grpc_calls::CallShared& shared, Call call)
      : shared_(shared), call_(std::move(call)) {
    shared_.CallCreated();
  }
  ~NativeStream() { shared_.CallDeleted(); }
  NativeStream(const NativeStream&) = delete;
  NativeStream& operator=(const NativeStream&) = delete;

  // The caller is authenticated once, as the stream opens (UNAUTHENTICATED ends it); each
  // request is decided again with the same credentials.
  bool Open() {
    if (shared_.access != nullptr && shared_.access->enforcing()) {
      const grpc_access::GrpcCallView view(*call_);
      caller_.peer = view.PeerOf();
      const identity::Credentials credentials = grpc_access::CredentialsOf(view, caller_.peer);
      Result<identity::Identity> identity = shared_.access->Authenticate(credentials);
      if (!identity.ok()) {
        const grpc::Status refused =
            grpc_access::StatusOf(policy::AccessRefusal::Unauthenticated(identity.status()), "");
        call_->Finish(CodeOf(refused), refused.error_message());
        return false;
      }
      caller_.authorization = std::string(credentials.authorization);
      caller_.api_key = std::string(credentials.api_key);
    } else {
      caller_.peer = call_->peer();
    }
    return true;
  }

  // On the I/O thread.
  void OnMessage(std::string message) {
    uint64_t slot = 0;
    {
      std::lock_guard lock(mutex_);
      if (finished_) return;
      ++in_flight_;
      slot = first_slot_ + answers_.size();
      answers_.emplace_back();
    }
    // Read only until the request is handed over (its tensors move out).
    ModelInferRequest request;
    auto respond = [self = shared_from_this(), slot](ModelStreamInferResponse response) {
      self->Respond(slot, std::move(response));
    };
    if (!request.ParseFromString(message)) {
      respond(grpc_calls::StreamError(Internal("the request message does not parse"), "", "", ""));
    } else if (!RunLoggingExceptions("a gRPC stream", [&] {
                 grpc_calls::StartStreamRequest(shared_, caller_, request, call_->cancelled_flag(),
                                                respond);
               })) {
      respond(grpc_calls::StreamError(Internal("the request failed (see the server's log)"),
                                      request.model_name(), request.model_version(), request.id()));
    }
    Pump();
  }

  void OnHalfClose() {
    {
      std::lock_guard lock(mutex_);
      reads_done_ = true;
    }
    Pump();
  }

  // From any thread: the server is draining; end once the requests in flight are answered.
  void Stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    call_->Post([self = shared_from_this()] { self->Pump(); });
  }

 private:
  // From any thread: the answer of `slot`.
  void Respond(uint64_t slot, ModelStreamInferResponse response) {
    net::GrpcOutMessage serialized = Serialized(response);  // outside the lock
    {
      std::lock_guard lock(mutex_);
      --in_flight_;
      if (!call_->cancelled() && slot >= first_slot_ && slot - first_slot_ < answers_.size()) {
        answers_[slot - first_slot_] = std::move(serialized);
      }
    }
    call_->Post([self = shared_from_this()] { self->Pump(); });
  }

  // On the I/O thread: writes the answers whose turn has come, pauses or resumes reading, and
  // finishes once nothing is left.
  void Pump() {
    std::vector<net::GrpcOutMessage> ready;
    std::optional<grpc::Status> finish;
    std::optional<bool> pause;
    {
      std::lock_guard lock(mutex_);
      if (finished_) return;
      const bool cancelled = call_->cancelled();
      if (cancelled) {
        // Nobody reads the answers; later ones are not kept (Respond sees the cancellation).
        first_slot_ += answers_.size();
        answers_.clear();
      }
      while (!answers_.empty() && answers_.front().has_value()) {
        ready.push_back(std::move(*answers_.front()));
        answers_.pop_front();
        ++first_slot_;
      }
      const bool full = answers_.size() >= static_cast<size_t>(kMaxStreamPending);
      if (full != paused_) pause = paused_ = full;
      const bool ending = reads_done_ || stopping_ || cancelled;
      if (ending && in_flight_ == 0 && answers_.empty()) {
        finished_ = true;
        if (cancelled) {
          finish = grpc::Status(grpc::StatusCode::CANCELLED, "the stream was cancelled");
        } else if (stopping_ && !reads_done_) {
          finish = ToGrpcStatus(Unavailable("the server is shutting down"));
        } else {
          finish = grpc::Status::OK;
        }
      }
    }
    for (net::GrpcOutMessage& answer : ready) call_->Write(std::move(answer));
    if (pause) {
      if (*pause) {
        call_->PauseReading();
      } else {
        call_->ResumeReading();
      }
    }
    if (finish) call_->Finish(CodeOf(*finish), finish->error_message());
  }

  grpc_calls::CallShared& shared_;
  const Call call_;
  grpc_calls::StreamCaller caller_;
  std::mutex mutex_;
  // Guarded. One slot per request read and not yet written, in request order, filled by its
  // serialized answer; first_slot_ numbers the front slot.
  std::deque<std::optional<net::GrpcOutMessage>> answers_;
  uint64_t first_slot_ = 0;  // guarded
  int in_flight_ = 0;        // guarded; requests handed over and not yet answered
  bool reads_done_ = false;  // guarded; the client half-closed
  bool stopping_ = false;    // guarded; the server is draining
  bool paused_ = false;      // guarded; reading is paused
  bool finished_ = false;    // guarded; Finish was called
};

struct NativeFront::Impl {
  Impl(serve::InferenceServer& server, const KServeGrpcOptions& options_in)
      : options(options_in),
        methods(server, options),
        shared(server, options.access, options.audit, options.max_inflight_bytes) {
    RegisterMethods();
  }

  void RegisterMethods();
  std::unique_ptr<net::GrpcCallHandler> Open(Call call);
  void Infer(Call call, std::string message);
  std::unique_ptr<net::GrpcCallHandler> OpenStream(Call call);
  std::unique_ptr<net::GrpcCallHandler> OpenWatch(Call call);

  const KServeGrpcOptions options;
  grpc_methods::KServeMethods methods;
  grpc_calls::CallShared shared;
  grpc_health::HealthService health{kService};
  std::unordered_map<std::string, UnaryMethod> unary;
  UnaryMethod infer;
  // Open streams, for a drain (weak: a stream ends on its own).
  std::mutex streams_mutex;
  std::set<std::shared_ptr<NativeStream>> streams;  // guarded by streams_mutex
  bool streams_stopped = false;                     // guarded by streams_mutex
  std::unique_ptr<net::GrpcServer> transport;
  bool stopped = false;
  bool shut_down = false;
};

namespace {

// The transport's handler of one stream call: hands its messages to the stream.
class StreamHandler final : public net::GrpcCallHandler {
 public:
  StreamHandler(std::shared_ptr<NativeStream> stream, UniqueFunction<void()> on_end)
      : stream_(std::move(stream)), on_end_(std::move(on_end)) {}
  ~StreamHandler() override { on_end_(); }
  void OnMessage(std::string message) override { stream_->OnMessage(std::move(message)); }
  void OnHalfClose() override { stream_->OnHalfClose(); }
  void OnCancel() override {}  // the stream sees call->cancelled()

 private:
  const std::shared_ptr<NativeStream> stream_;
  UniqueFunction<void()> on_end_;
};

// grpc.health.v1.Health/Watch: the status now, then each change, until the call ends.
class WatchHandler final : public net::GrpcCallHandler {
 public:
  WatchHandler(grpc_health::HealthService& health, Call call)
      : health_(health), call_(std::move(call)) {}
  ~WatchHandler() override {
    if (listener_ != 0) health_.Unlisten(listener_);
  }
  void OnMessage(std::string message) override {
    if (listener_ != 0) return;
    grpc::health::v1::HealthCheckRequest request;
    if (!request.ParseFromString(message)) {
      call_->Finish(net::GrpcCode::kInternal, "the request message does not parse");
      return;
    }
    auto state = std::make_shared<State>(health_, call_, request.service());
    listener_ = health_.Listen([state] { state->call->Post([state] { state->Send(); }); });
    state->Send();
  }
  void OnHalfClose() override {}
  void OnCancel() override {}

 private:
  struct State {
    State(grpc_health::HealthService& health_in, Call call_in, std::string service_in)
        : health(health_in), call(std::move(call_in)), service(std::move(service_in)) {}
    // On the I/O thread.
    void Send() {
      if (health.shut_down()) {
        call->Finish(net::GrpcCode::kUnavailable, "the server is shutting down");
        return;
      }
      const auto status = health.StatusOf(service);
      if (sent && *sent == status) return;
      sent = status;
      grpc::health::v1::HealthCheckResponse response;
      response.set_status(status);
      call->Write(Serialized(response));
    }
    grpc_health::HealthService& health;
    const Call call;
    const std::string service;
    std::optional<grpc::health::v1::HealthCheckResponse::ServingStatus> sent;
  };

  grpc_health::HealthService& health_;
  const Call call_;
  uint64_t listener_ = 0;
};

// grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo: each request answered in turn
// (on the I/O thread, so in order), until the client ends its side.
class ReflectionHandler final : public net::GrpcCallHandler {
 public:
  explicit ReflectionHandler(Call call) : call_(std::move(call)) {}
  void OnMessage(std::string message) override {
    static const std::vector<std::string> kServices = {kService, "grpc.health.v1.Health",
                                                       std::string(grpc_reflection::kServiceName)};
    call_->Write(std::string_view(grpc_reflection::Answer(message, kServices)));
  }
  void OnHalfClose() override { call_->Finish(net::GrpcCode::kOk); }
  void OnCancel() override {}

 private:
  const Call call_;
};

}  // namespace

void NativeFront::Impl::RegisterMethods() {
  using namespace inference;
  using grpc_methods::Done;
  using View = grpc_access::CallView;
  const std::string prefix = fmt::format("/{}/", kService);
  unary[prefix + "ServerLive"] = Unary<ServerLiveRequest, ServerLiveResponse>(
      [this](View&, const ServerLiveRequest&, ServerLiveResponse& response, Done done) {
        methods.ServerLive(response, std::move(done));
      });
  unary[prefix + "ServerReady"] = Unary<ServerReadyRequest, ServerReadyResponse>(
      [this](View&, const ServerReadyRequest&, ServerReadyResponse& response, Done done) {
        methods.ServerReady(response, std::move(done));
      });
  unary[prefix + "ModelReady"] = Unary<ModelReadyRequest, ModelReadyResponse>(
      [this](View& call, const ModelReadyRequest& request, ModelReadyResponse& response,
             Done done) { methods.ModelReady(call, request, response, std::move(done)); });
  unary[prefix + "ServerMetadata"] = Unary<ServerMetadataRequest, ServerMetadataResponse>(
      [this](View& call, const ServerMetadataRequest&, ServerMetadataResponse& response,
             Done done) { methods.ServerMetadata(call, response, std::move(done)); });
  unary[prefix + "ModelMetadata"] = Unary<ModelMetadataRequest, ModelMetadataResponse>(
      [this](View& call, const ModelMetadataRequest& request, ModelMetadataResponse& response,
             Done done) { methods.ModelMetadata(call, request, response, std::move(done)); });
  unary[prefix + "ModelConfig"] = Unary<ModelConfigRequest, ModelConfigResponse>(
      [this](View& call, const ModelConfigRequest& request, ModelConfigResponse& response,
             Done done) { methods.ModelConfig(call, request, response, std::move(done)); });
  unary[prefix + "ModelStatistics"] = Unary<ModelStatisticsRequest, ModelStatisticsResponse>(
      [this](View& call, const ModelStatisticsRequest& request, ModelStatisticsResponse& response,
             Done done) { methods.ModelStatistics(call, request, response, std::move(done)); });
  unary[prefix + "RepositoryIndex"] = Unary<RepositoryIndexRequest, RepositoryIndexResponse>(
      [this](View& call, const RepositoryIndexRequest& request, RepositoryIndexResponse& response,
             Done done) { methods.RepositoryIndex(call, request, response, std::move(done)); });
  unary[prefix + "RepositoryModelLoad"] =
      Unary<RepositoryModelLoadRequest, RepositoryModelLoadResponse>(
          [this](View& call, const RepositoryModelLoadRequest& request,
                 RepositoryModelLoadResponse&,
                 Done done) { methods.RepositoryModelLoad(call, request, std::move(done)); });
  unary[prefix + "RepositoryModelUnload"] =
      Unary<RepositoryModelUnloadRequest, RepositoryModelUnloadResponse>(
          [this](View& call, const RepositoryModelUnloadRequest& request,
                 RepositoryModelUnloadResponse&,
                 Done done) { methods.RepositoryModelUnload(call, request, std::move(done)); });
  unary[kHealthCheck] =
      Unary<grpc::health::v1::HealthCheckRequest, grpc::health::v1::HealthCheckResponse>(
          [this](View&, const grpc::health::v1::HealthCheckRequest& request,
                 grpc::health::v1::HealthCheckResponse& response,
                 Done done) { done(health.Check(nullptr, &request, &response)); });
  infer = [this](Call call, std::string message) { Infer(std::move(call), std::move(message)); };
}

std::unique_ptr<net::GrpcCallHandler> NativeFront::Impl::Open(Call call) {
  const std::string& method = call->method();
  if (method == kModelInfer) return std::make_unique<UnaryHandler>(std::move(call), infer);
  if (auto found = unary.find(method); found != unary.end()) {
    return std::make_unique<UnaryHandler>(std::move(call), found->second);
  }
  if (method == kModelStreamInfer) return OpenStream(std::move(call));
  if (method == kHealthWatch) return std::make_unique<WatchHandler>(health, std::move(call));
  if (method == grpc_reflection::kMethod) {
    return std::make_unique<ReflectionHandler>(std::move(call));
  }
  // Triton's shared-memory, trace and log settings RPCs, a typo.
  call->Finish(net::GrpcCode::kUnimplemented,
               fmt::format("method '{}' is not implemented by this server", method));
  return nullptr;
}

void NativeFront::Impl::Infer(Call call, std::string message) {
  auto held = std::make_shared<InferCall>(shared, std::move(call));
  if (!held->request.ParseFromString(message)) {
    held->Answer(grpc::Status(grpc::StatusCode::INTERNAL, "the request message does not parse"));
    return;
  }
  message = std::string();  // the tensors are in the request now
  try {
    grpc_calls::StartInfer(shared, held->view, held->request, held->response,
                           held->call->cancelled_flag(),
                           [held](grpc::Status status) { held->Answer(status); });
  } catch (...) {
    held->Answer(
        ToGrpcStatus(StatusFromException("starting an infer call", std::current_exception())));
  }
}

std::unique_ptr<net::GrpcCallHandler> NativeFront::Impl::OpenStream(Call call) {
  auto stream = std::make_shared<NativeStream>(shared, call);
  {
    std::lock_guard lock(streams_mutex);
    if (streams_stopped) {
      call->Finish(net::GrpcCode::kUnavailable, "the server is shutting down");
      return nullptr;
    }
  }
  if (!stream->Open()) return nullptr;
  {
    std::lock_guard lock(streams_mutex);
    streams.insert(stream);
  }
  return std::make_unique<StreamHandler>(stream, [this, stream] {
    std::lock_guard lock(streams_mutex);
    streams.erase(stream);
  });
}

Result<std::unique_ptr<NativeFront>> NativeFront::Start(serve::InferenceServer& server,
                                                        const KServeGrpcOptions& options,
                                                        std::optional<net::GrpcTls> tls) {
  Result<net::Listener> listener =
      net::Listener::Open(options.address, static_cast<uint16_t>(options.port));
  if (!listener.ok()) {
    return Unavailable("gRPC cannot listen on {}:{}: {}", options.address, options.port,
                       listener.status().message());
  }
  auto impl = std::make_unique<Impl>(server, options);
  net::GrpcServerOptions transport;
  transport.threads = options.native_io_threads;
  transport.name = "grpc";
  transport.tls = std::move(tls);
  transport.max_message_bytes = static_cast<uint64_t>(options.max_receive_bytes);
  // Messages being read count against the same budget as requests held (at least one message
  // of the largest size fits).
  transport.max_reading_bytes = options.max_inflight_bytes;
  Impl* raw = impl.get();
  net::GrpcService service = [raw](Call call) { return raw->Open(std::move(call)); };
  ASSIGN_OR_RETURN(impl->transport, net::GrpcServer::Start(transport, std::move(service),
                                                           std::move(listener).value()));
  return std::unique_ptr<NativeFront>(new NativeFront(std::move(impl)));
}

NativeFront::NativeFront(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

NativeFront::~NativeFront() { Shutdown(std::chrono::milliseconds(0)); }

int NativeFront::port() const { return impl_->transport->port(); }

uint64_t NativeFront::cancelled_calls() const { return impl_->transport->stats().cancelled_calls; }

void NativeFront::StopServing() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->health.SetServingAll(false);
  std::set<std::shared_ptr<NativeStream>> open;
  {
    std::lock_guard lock(impl_->streams_mutex);
    impl_->streams_stopped = true;
    open = impl_->streams;
  }
  for (const auto& stream : open) stream->Stop();
}

void NativeFront::Shutdown(std::chrono::milliseconds timeout) {
  if (impl_->shut_down) return;
  StopServing();
  impl_->shut_down = true;
  impl_->health.Shutdown();
  impl_->transport->Shutdown(timeout);
  // The server still holds the requests of calls cancelled just now; their callbacks use the
  // front end's state.
  impl_->shared.WaitNoCalls();
  impl_->methods.StopControl();
}

}  // namespace rampart::api::grpc_native
