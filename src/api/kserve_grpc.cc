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
#include "api/kserve_grpc_methods.h"
#include "api/kserve_grpc_native.h"
#include "core/exceptions.h"
#include "core/serial_worker.h"

namespace rampart::api {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;
using inference::ModelStreamInferResponse;

constexpr char kServiceName[] = "inference.GRPCInferenceService";

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

// ModelInfer and ModelStreamInfer are asynchronous (grpc_calls, on Rampart's queue threads); the
// other methods are synchronous, on gRPC's synchronous-server threads, which wait for the
// methods' answers (grpc_methods).
class Service final : public grpc_calls::InferService {
 public:
  Service(serve::InferenceServer& server, const KServeGrpcOptions& options)
      : methods_(server, options),
        shared_(server, options.access, options.audit, options.max_inflight_bytes) {
    shared_.service = this;
  }

  grpc_calls::CallShared& shared() { return shared_; }
  void StopControl() { methods_.StopControl(); }

  grpc::Status ServerLive(grpc::ServerContext*, const inference::ServerLiveRequest*,
                          inference::ServerLiveResponse* response) override {
    return AwaitAnswer(
        [&](grpc_methods::Done done) { methods_.ServerLive(*response, std::move(done)); });
  }

  grpc::Status ServerReady(grpc::ServerContext*, const inference::ServerReadyRequest*,
                           inference::ServerReadyResponse* response) override {
    return AwaitAnswer(
        [&](grpc_methods::Done done) { methods_.ServerReady(*response, std::move(done)); });
  }

  grpc::Status ModelReady(grpc::ServerContext* context, const inference::ModelReadyRequest* request,
                          inference::ModelReadyResponse* response) override {
    grpc_access::ServerContextView call(*context);
    return AwaitAnswer([&](grpc_methods::Done done) {
      methods_.ModelReady(call, *request, *response, std::move(done));
    });
  }

  grpc::Status ServerMetadata(grpc::ServerContext* context, const inference::ServerMetadataRequest*,
                              inference::ServerMetadataResponse* response) override {
    grpc_access::ServerContextView call(*context);
    return AwaitAnswer([&](grpc_methods::Done done) {
      methods_.ServerMetadata(call, *response, std::move(done));
    });
  }

  grpc::Status ModelMetadata(grpc::ServerContext* context,
                             const inference::ModelMetadataRequest* request,
                             inference::ModelMetadataResponse* response) override {
    grpc_access::ServerContextView call(*context);
    return AwaitAnswer([&](grpc_methods::Done done) {
      methods_.ModelMetadata(call, *request, *response, std::move(done));
    });
  }

  grpc::Status ModelConfig(grpc::ServerContext* context,
                           const inference::ModelConfigRequest* request,
                           inference::ModelConfigResponse* response) override {
    grpc_access::ServerContextView call(*context);
    return AwaitAnswer([&](grpc_methods::Done done) {
      methods_.ModelConfig(call, *request, *response, std::move(done));
    });
  }

  grpc::Status ModelStatistics(grpc::ServerContext* context,
                               const inference::ModelStatisticsRequest* request,
                               inference::ModelStatisticsResponse* response) override {
    grpc_access::ServerContextView call(*context);
    return AwaitAnswer([&](grpc_methods::Done done) {
      methods_.ModelStatistics(call, *request, *response, std::move(done));
    });
  }

  grpc::Status RepositoryIndex(grpc::ServerContext* context,
                               const inference::RepositoryIndexRequest* request,
                               inference::RepositoryIndexResponse* response) override {
    grpc_access::ServerContextView call(*context);
    return AwaitAnswer([&](grpc_methods::Done done) {
      methods_.RepositoryIndex(call, *request, *response, std::move(done));
    });
  }

  grpc::Status RepositoryModelLoad(grpc::ServerContext* context,
                                   const inference::RepositoryModelLoadRequest* request,
                                   inference::RepositoryModelLoadResponse*) override {
    grpc_access::ServerContextView call(*context);
    return AwaitAnswer([&](grpc_methods::Done done) {
      methods_.RepositoryModelLoad(call, *request, std::move(done));
    });
  }

  grpc::Status RepositoryModelUnload(grpc::ServerContext* context,
                                     const inference::RepositoryModelUnloadRequest* request,
                                     inference::RepositoryModelUnloadResponse*) override {
    grpc_access::ServerContextView call(*context);
    return AwaitAnswer([&](grpc_methods::Done done) {
      methods_.RepositoryModelUnload(call, *request, std::move(done));
    });
  }

 private:
  grpc_methods::KServeMethods methods_;
  grpc_calls::CallShared shared_;
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

// The native engine's TLS: the same files, read as Credentials reads them.
Result<std::optional<net::GrpcTls>> NativeTls(const KServeGrpcOptions& options) {
  if (!options.tls) return std::optional<net::GrpcTls>();
  const GrpcTlsOptions& tls = *options.tls;
  net::GrpcTls native;
  ASSIGN_OR_RETURN(native.private_key_pem, ReadPem(tls.server_key, "--grpc-server-key"));
  ASSIGN_OR_RETURN(native.cert_chain_pem, ReadPem(tls.server_cert, "--grpc-server-cert"));
  if (tls.mutual || !tls.root_cert.empty()) {
    ASSIGN_OR_RETURN(native.root_certs_pem, ReadPem(tls.root_cert, "--grpc-root-cert"));
  }
  native.mutual = tls.mutual;
  return std::optional<net::GrpcTls>(std::move(native));
}

}  // namespace

std::string_view GrpcEngineName(GrpcEngine engine) {
  return engine == GrpcEngine::kNative ? "native" : "core";
}

Result<GrpcEngine> ParseGrpcEngine(std::string_view name) {
  if (name == "core") return GrpcEngine::kCore;
  if (name == "native") return GrpcEngine::kNative;
  return InvalidArgument("unknown gRPC engine '{}' (expected 'core' or 'native')", name);
}

struct KServeGrpc::Impl {
  Impl(serve::InferenceServer& server, KServeGrpcOptions options_in)
      : options(std::move(options_in)) {
    // The core engine's service (with its repository workers) only when it serves.
    if (options.engine == GrpcEngine::kCore) service.emplace(server, options);
  }

  const KServeGrpcOptions options;
  std::optional<Service> service;                    // outlives grpc_server (declared before it)
  grpc::AsyncGenericService unknown_methods;         // likewise
  grpc_health::HealthService health{kServiceName};   // likewise
  std::unique_ptr<grpc::Server> grpc_server;         // null until started
  std::unique_ptr<grpc_calls::CallPollers> pollers;  // null until started
  // The native engine instead (then nothing above is started).
  std::unique_ptr<grpc_native::NativeFront> native;
  int port = 0;
  bool stopped = false;
  bool shut_down = false;
};

KServeGrpc::KServeGrpc(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

KServeGrpc::~KServeGrpc() { Shutdown(std::chrono::milliseconds(0)); }

Result<std::unique_ptr<KServeGrpc>> KServeGrpc::Start(serve::InferenceServer& server,
                                                      KServeGrpcOptions options) {
  try {
    if (options.engine == GrpcEngine::kNative) {
      ASSIGN_OR_RETURN(std::optional<net::GrpcTls> tls, NativeTls(options));
      auto impl = std::make_unique<Impl>(server, std::move(options));
      ASSIGN_OR_RETURN(impl->native,
                       grpc_native::NativeFront::Start(server, impl->options, std::move(tls)));
      impl->port = impl->native->port();
      return std::unique_ptr<KServeGrpc>(new KServeGrpc(std::move(impl)));
    }
    ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials, Credentials(options));
    auto impl = std::make_unique<Impl>(server, std::move(options));
    const std::string target = HostPort(impl->options.address, impl->options.port);
    // Ours instead (api/kserve_grpc_health.h says why).
    grpc::EnableDefaultHealthCheckService(false);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    grpc::ServerBuilder builder;
    builder.AddListeningPort(target, credentials, &impl->port);
    builder.RegisterService(&*impl->service);
    builder.RegisterService(&impl->health);
    builder.RegisterAsyncGenericService(&impl->unknown_methods);
    impl->service->shared().unknown_methods = &impl->unknown_methods;
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
        impl->service->shared(), std::move(queues), impl->options.cork_writes ? impl->port : 0,
        impl->options.after_cork);
    return std::unique_ptr<KServeGrpc>(new KServeGrpc(std::move(impl)));
  } catch (const std::exception& error) {
    return Internal("starting the gRPC server: {}", error.what());
  }
}

int KServeGrpc::port() const { return impl_->port; }

uint64_t KServeGrpc::cancelled_calls() const {
  if (impl_->native != nullptr) return impl_->native->cancelled_calls();
  return impl_->service->shared().cancelled_calls.load(std::memory_order_relaxed);
}

void KServeGrpc::StopServing() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  if (impl_->native != nullptr) {
    impl_->native->StopServing();
    return;
  }
  impl_->health.SetServingAll(false);
  impl_->service->shared().streams.StopAll();
}

void KServeGrpc::Shutdown(std::chrono::milliseconds timeout) {
  if (impl_->shut_down) return;
  StopServing();
  impl_->shut_down = true;
  if (impl_->native != nullptr) {
    impl_->native->Shutdown(timeout);
    return;
  }
  impl_->health.Shutdown();  // its Watch calls end: the server's Shutdown waits for them
  // Returns once every call's handler is done (cancelled at the deadline if still running).
  impl_->grpc_server->Shutdown(std::chrono::system_clock::now() + timeout);
  impl_->pollers->Stop();  // once the calls the server still held are answered
  impl_->service->StopControl();
}

}  // namespace rampart::api
