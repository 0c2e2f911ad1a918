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
  explicit CallShared(serve::InferenceServer& server_in) : server(server_in) {}
  serve::InferenceServer& server;
  std::atomic<uint64_t> cancelled_calls{0};  // calls whose client cancelled or timed out
  StreamRegistry streams;
};

// ModelInfer: decodes `request` (moving its raw bytes out; the request is gRPC's but ours until
// the call is done), hands it to the server and finishes from the completion callback. A
// cancelled call marks the request cancelled.
grpc::ServerUnaryReactor* StartInfer(CallShared& shared, grpc::CallbackServerContext* context,
                                     const inference::ModelInferRequest* request,
                                     inference::ModelInferResponse* response);

// ModelStreamInfer: see KServeGrpc's header comment for the behaviour.
grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
StartStream(CallShared& shared);

}  // namespace rampart::api::grpc_calls
