#pragma once

// KServe v2 / Triton gRPC front end (docs/triton-compatibility.md):
// `inference.GRPCInferenceService` on its own port, over the same InferenceServer as the HTTP front
// end, plus the standard `grpc.health.v1.Health` service and server reflection.
//
// ModelInfer and ModelStreamInfer use gRPC's asynchronous API on Rampart's own completion-queue
// thread (api/kserve_grpc_calls.h): the thread that reads a request hands it to the server (and
// runs a fast model directly); the completion callback finishes the call from the thread that
// answered it. No thread waits while a model runs. The other RPCs are synchronous, on gRPC's
// synchronous-server threads (repository calls wait there for their worker); the health service
// is the front end's own (api/kserve_grpc_health.h).
// ModelStreamInfer keeps any number of requests in flight per stream (reading pauses at
// kMaxStreamPending unanswered or unwritten ones) and writes the responses in request order, as
// Triton does for models that are not decoupled (an answer that completes early waits for those
// before it); a failed request is answered in the stream with `error_message`, and the stream stays
// open. Each answer the server gave carries Triton's `triton_final_response` parameter (true: every
// request has one response). Methods of Triton's service that Rampart does not implement answer
// UNIMPLEMENTED, with a message. A cancelled call (client gone, deadline passed) marks its requests
// cancelled, so the batcher drops those still queued. RepositoryModelLoad/Unload run on a control
// thread of their own (loading builds models) and RepositoryIndex on another (it reads the
// repository), each behind a bounded queue (RESOURCE_EXHAUSTED when full), as HTTP's do.
//
// gRPC's headers stay inside this module: this header only declares the front end's surface.
//
// Thread safety: Start, StopServing and Shutdown are called by one owner thread; port() and
// cancelled_calls() from any thread. Errors never escape as exceptions.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "audit/sink.h"
#include "core/status.h"
#include "policy/access.h"
#include "serve/server.h"

namespace rampart::api {

// PEM files for TLS (Triton's --grpc-server-cert, --grpc-server-key, --grpc-root-cert).
struct GrpcTlsOptions {
  std::string server_cert;  // path, required
  std::string server_key;   // path, required
  std::string root_cert;    // path; required for mutual TLS
  // Require and verify a client certificate signed by root_cert (--grpc-use-ssl-mutual).
  bool mutual = false;
};

// Which implementation of gRPC's transport serves the front end (docs/grpc-transport.md). Both
// serve the same methods, TLS and mutual TLS, health, reflection and compressed requests.
enum class GrpcEngine {
  // Rampart's own HTTP/2 (net/grpc_server.h, nghttp2) on its own I/O threads: a fraction of
  // gRPC core's CPU per call. The default.
  kNative,
  // gRPC's own C++ library (its completion queues polled by Rampart's threads).
  kCore,
};
// "core", "native".
std::string_view GrpcEngineName(GrpcEngine engine);
// Errors: InvalidArgument naming the accepted values.
Result<GrpcEngine> ParseGrpcEngine(std::string_view name);

struct KServeGrpcOptions {
  GrpcEngine engine = GrpcEngine::kNative;
  std::string address = "0.0.0.0";
  int port = 8001;  // 0 picks a free port; see KServeGrpc::port()
  std::string server_name = "rampart";
  std::string server_version;
  // Largest request message accepted; larger ones fail with RESOURCE_EXHAUSTED. Triton's (and
  // its clients' send limit): INT32_MAX.
  int max_receive_bytes = std::numeric_limits<int>::max();
  // Bytes of infer requests (their message size) the front end holds at once, over all calls and
  // streams; a request that does not fit is refused RESOURCE_EXHAUSTED (a stream's in the
  // stream, with `error_message`).
  size_t max_inflight_bytes = size_t{4} << 30;
  // gRPC's own memory (grpc::ResourceQuota): transport buffers and call state. gRPC 1.51 treats
  // it as memory pressure (it reads less, shrinking flow-control windows) more than as a hard
  // limit, so it is set above what the byte budget lets calls hold: a request of the largest size
  // must still be read.
  size_t transport_memory_bytes = size_t{8} << 30;
  // Rampart's completion-queue threads for the infer methods (`grpc-cq-<i>`), each with its own
  // queue; 0 = one. gRPC 1.51 has every polling thread poll every connection, so a second thread
  // hands requests back and forth with the first (docs/benchmarks.md, "gRPC vs HTTP infer").
  int completion_queue_threads = 0;
  // The native engine's I/O threads (`grpc-io-<i>`); 0 = one per core.
  int native_io_threads = 0;
  // Cork the connections while a queue thread answers several calls in a row, so that their
  // answers leave in fewer TCP segments (api/kserve_grpc_cork.h): less CPU per call for the
  // server and the client at high concurrency. An answer waits at most about a millisecond for
  // its flush, whatever the scheduling (docs/benchmarks.md, "Bounded corking under contention").
  bool cork_writes = true;
  // Tests only: runs on a queue thread right after it corks the connections.
  std::function<void()> after_cork;
  std::optional<GrpcTlsOptions> tls;  // plaintext when empty
  // Authentication, policy and quotas (docs/access.md), as HTTP's: every RPC but ServerLive and
  // ServerReady is decided (model:infer, model:read, model:load, model:unload, repository:read,
  // server:read). Null = open. Must outlive the front end.
  const policy::AccessControl* access = nullptr;
  // The audit log (docs/audit.md): ModelInfer, each request of ModelStreamInfer and every control
  // method yield one record (ServerLive and ServerReady do not); with a sync sink the answer
  // waits for its record. Null = nothing recorded. Must outlive the front end.
  audit::AuditSink* audit = nullptr;
};

// Reading pauses on a stream with this many requests in flight or responses not yet written.
inline constexpr int kMaxStreamPending = 256;

// Repository calls (index, load, unload) that may wait for their thread; more are refused
// RESOURCE_EXHAUSTED.
inline constexpr size_t kMaxQueuedRepositoryCalls = 64;

class KServeGrpc {
 public:
  // Binds and starts serving. `server` must outlive the front end. Errors: InvalidArgument for
  // unreadable TLS files, Unavailable when the address cannot be bound.
  static Result<std::unique_ptr<KServeGrpc>> Start(serve::InferenceServer& server,
                                                   KServeGrpcOptions options);
  // Shuts down at once if Shutdown was not called.
  ~KServeGrpc();
  KServeGrpc(const KServeGrpc&) = delete;
  KServeGrpc& operator=(const KServeGrpc&) = delete;

  // The bound port (the chosen one when options.port was 0).
  int port() const;

  // First step of a drain: health checks answer NOT_SERVING, and every open stream is finished
  // (UNAVAILABLE) as soon as its requests in flight have been answered. Unary calls are still
  // accepted (the server answers them UNAVAILABLE once it shuts down). Idempotent.
  void StopServing();

  // Stops accepting calls, waits up to `timeout` for calls in flight, then cancels the rest and
  // waits until their handlers are done. Calls StopServing first. Idempotent.
  void Shutdown(std::chrono::milliseconds timeout);

  // Calls (unary or stream) the client cancelled or whose deadline passed, since start.
  uint64_t cancelled_calls() const;

 private:
  struct Impl;
  explicit KServeGrpc(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rampart::api
