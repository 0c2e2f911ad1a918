#pragma once

// The KServe gRPC methods other than the infer ones (internal to api/kserve_grpc), whichever
// transport carries the call (gRPC core's synchronous service, or Rampart's own HTTP/2 one,
// api/kserve_grpc_h2.cc). Each is decided by access control and recorded by the audit log as its
// HTTP counterpart is, fills the response, and calls `done` once with the call's status: at once
// for the reading methods, from a worker thread for the repository calls (loading builds models,
// the index reads the repository; each behind a bounded queue, RESOURCE_EXHAUSTED when full), or
// once its record is durable with a sync audit sink. The request, the response and the CallView
// must live until `done` has been called. `done` must not block.

#include <string_view>

#include <grpcpp/support/status.h>

#include "api/grpc_service.pb.h"
#include "api/kserve_grpc.h"
#include "api/kserve_grpc_access.h"
#include "api/kserve_grpc_audit.h"
#include "core/serial_worker.h"
#include "core/unique_function.h"
#include "serve/server.h"

namespace rampart::api::grpc_methods {

using Done = UniqueFunction<void(grpc::Status)>;

class KServeMethods {
 public:
  KServeMethods(serve::InferenceServer& server, const KServeGrpcOptions& options)
      : server_(server), options_(options) {}

  // Runs queued repository loads and unloads, then stops their threads. REQUIRES: no more calls
  // can arrive.
  void StopControl() {
    control_.Stop();
    repository_reads_.Stop();
  }

  // Probes: open to all, not recorded.
  void ServerLive(inference::ServerLiveResponse& response, Done done);
  void ServerReady(inference::ServerReadyResponse& response, Done done);

  void ModelReady(grpc_access::CallView& call, const inference::ModelReadyRequest& request,
                  inference::ModelReadyResponse& response, Done done);
  void ServerMetadata(grpc_access::CallView& call, inference::ServerMetadataResponse& response,
                      Done done);
  void ModelMetadata(grpc_access::CallView& call, const inference::ModelMetadataRequest& request,
                     inference::ModelMetadataResponse& response, Done done);
  void ModelConfig(grpc_access::CallView& call, const inference::ModelConfigRequest& request,
                   inference::ModelConfigResponse& response, Done done);
  void ModelStatistics(grpc_access::CallView& call,
                       const inference::ModelStatisticsRequest& request,
                       inference::ModelStatisticsResponse& response, Done done);
  void RepositoryIndex(grpc_access::CallView& call,
                       const inference::RepositoryIndexRequest& request,
                       inference::RepositoryIndexResponse& response, Done done);
  void RepositoryModelLoad(grpc_access::CallView& call,
                           const inference::RepositoryModelLoadRequest& request, Done done);
  void RepositoryModelUnload(grpc_access::CallView& call,
                             const inference::RepositoryModelUnloadRequest& request, Done done);

  // The refusal of a call of `method` (its action and resource type: grpc_access::RpcActions)
  // on the resource `name`, or nullopt when it may go on (open, or granted). A rate's refusal
  // adds `retry-after` to the call's trailing metadata.
  std::optional<grpc::Status> Refused(grpc_access::CallView& call, grpc_audit::GrpcRecord& audit,
                                      std::string_view method, std::string_view name = "");

 private:
  template <typename Request>
  void RepositoryControl(grpc_access::CallView& call, const Request& request, bool load, Done done);

  serve::InferenceServer& server_;
  const KServeGrpcOptions& options_;
  // Repository load/unload, one at a time, and the index apart (it answers while a load runs);
  // last: they stop first.
  SerialWorker repository_reads_{"grpc-index", kMaxQueuedRepositoryCalls};
  SerialWorker control_{"grpc-control", kMaxQueuedRepositoryCalls};
};

}  // namespace rampart::api::grpc_methods
