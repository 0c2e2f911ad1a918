#pragma once

// The infer calls of the gRPC front end (internal to api/kserve_grpc): ModelInfer as a unary
// reactor and ModelStreamInfer as a bidi reactor, both on gRPC's callback API. Each call object
// belongs to gRPC from its creation until gRPC calls OnDone, where it deletes itself.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>

#include <grpcpp/grpcpp.h>

#include "api/grpc_service.pb.h"
#include "audit/sink.h"
#include "policy/access.h"
#include "serve/server.h"

namespace rampart::api::grpc_calls {

class StreamCall;

// The open streams, so that a drain can end them. Thread-safe.
class StreamRegistry {
 public:
  // False once StopAll has run: the stream should end at once.
  bool Register(StreamCall* stream);
  void Unregister(StreamCall* stream);
  // Asks every open stream to finish once its requests in flight are answered; later streams
  // are refused. Idempotent.
  void StopAll();

 private:
  std::mutex mutex_;
  std::set<StreamCall*> streams_;  // guarded by mutex_
  bool stopped_ = false;           // guarded by mutex_
};

// What the calls share with the service; outlives every call.
struct CallShared {
  CallShared(serve::InferenceServer& server_in, const policy::AccessControl* access_in,
             audit::AuditSink* audit_in = nullptr)
      : server(server_in), access(access_in), audit(audit_in) {}
  serve::InferenceServer& server;
  const policy::AccessControl* access;       // null: open
  audit::AuditSink* audit;                   // null: nothing recorded
  std::atomic<uint64_t> cancelled_calls{0};  // calls whose client cancelled or timed out
  StreamRegistry streams;
};

// ModelInfer: decides model:infer on the request's model (access control), decodes `request`
// (moving its raw bytes out; the request is gRPC's but ours until the call is done), hands it to
// the server with the caller's tenant and finishes from the completion callback, which also
// gives back the quota's concurrency slot. A cancelled call marks the request cancelled.
grpc::ServerUnaryReactor* StartInfer(CallShared& shared, grpc::CallbackServerContext* context,
                                     const inference::ModelInferRequest* request,
                                     inference::ModelInferResponse* response);

// ModelStreamInfer: see KServeGrpc's header comment for the behaviour. The caller is
// authenticated once, when the stream opens (UNAUTHENTICATED ends it at once); each request is
// then decided (model:infer on its model) and counted, a refusal answered in the stream with
// `error_message`, as any failed request.
grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
StartStream(CallShared& shared, grpc::CallbackServerContext* context);

}  // namespace rampart::api::grpc_calls
