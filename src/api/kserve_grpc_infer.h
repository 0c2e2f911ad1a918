#pragma once

// ModelInfer and each request of ModelStreamInfer, whichever transport carries the call (gRPC
// core's asynchronous API, api/kserve_grpc_calls.h; Rampart's own HTTP/2,
// api/kserve_grpc_native.h): the budget of request bytes, the access decision, the audit record,
// decoding, and the hand-off to the server. Internal to api/kserve_grpc.

#include <atomic>
#include <memory>
#include <string>
#include <string_view>

#include <google/protobuf/arena.h>
#include <grpcpp/support/status.h>

#include "api/grpc_service.pb.h"
#include "api/kserve_grpc_access.h"
#include "api/kserve_grpc_calls.h"
#include "core/peer.h"
#include "core/unique_function.h"

namespace rampart::api::grpc_calls {

// The first block of an infer call's protobuf arena, part of the call object: room for a request
// and response of a few small tensors (their message objects, names, shapes; ~40 heap
// allocations fewer per call for `simple`); larger ones take more blocks from the heap. Tensor
// bytes stay in std::strings, moved in and out, never copied.
inline constexpr size_t kArenaBlockBytes = 4096;
// Arena options whose first block is `block`.
inline google::protobuf::ArenaOptions ArenaOn(char* block, size_t size) {
  google::protobuf::ArenaOptions options;
  options.initial_block = block;
  options.initial_block_size = size;
  return options;
}

// Decides, charges, decodes and runs one ModelInfer `request` (its raw input bytes are moved
// out); fills `response` and calls `answer` exactly once with the call's status, from any thread
// (inline for a refusal or a model run directly), once the request's bytes are back in the
// budget and, with a sync audit sink, its record is durable. A refusal's trailing metadata goes
// to `call`. `request`, `response` and `call` must live until `answer` runs.
void StartInfer(CallShared& shared, grpc_access::CallView& call,
                inference::ModelInferRequest& request, inference::ModelInferResponse& response,
                std::shared_ptr<std::atomic<bool>> cancelled,
                UniqueFunction<void(grpc::Status)> answer);

// What a stream's requests are decided with: its caller, as the stream opened.
struct StreamCaller {
  Peer peer;
  std::string authorization;
  std::string api_key;
};

// One request of a ModelStreamInfer stream, as StartInfer: `respond` gets its answer (an error
// answered in the stream, with `error_message`, and the gRPC code it stands for) exactly once.
void StartStreamRequest(CallShared& shared, const StreamCaller& caller,
                        inference::ModelInferRequest& request,
                        std::shared_ptr<std::atomic<bool>> cancelled,
                        UniqueFunction<void(inference::ModelStreamInferResponse)> respond);

// A failed stream request's answer; it names the request, so clients can match it.
inference::ModelStreamInferResponse StreamError(const Status& status, const std::string& model,
                                                const std::string& version, const std::string& id);

}  // namespace rampart::api::grpc_calls
