#pragma once

// grpc.health.v1.Health for the gRPC front end (internal to api/kserve_grpc), on gRPC's
// synchronous API. It replaces gRPC's built-in health service, which uses the callback API: any
// callback service makes gRPC start its own polling threads (`nexting_thread`), which then read
// the infer calls' bytes off the connection and wake Rampart's completion-queue thread for each,
// about two extra context switches per request (docs/benchmarks.md, "gRPC vs HTTP infer").
// Synchronous handlers run on gRPC's synchronous-server threads, which do not.
//
// Behaves as gRPC's default service: the server ("") and each named service are SERVING or
// NOT_SERVING; Check on an unknown service is NOT_FOUND; Watch sends the status, then each change,
// SERVICE_UNKNOWN for an unknown service, until the client ends the call or the front end shuts
// down. Thread-safe.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "api/health.grpc.pb.h"

namespace rampart::api::grpc_health {

class HealthService final : public grpc::health::v1::Health::Service {
 public:
  // Known services start SERVING: "" (the server) and `services`.
  explicit HealthService(std::initializer_list<std::string> services);

  // Every known service becomes SERVING (true) or NOT_SERVING (false).
  void SetServingAll(bool serving);
  // Every Watch call ends; later ones end at once. Before the gRPC server's Shutdown, which waits
  // for them.
  void Shutdown();

  // For a Watch served elsewhere (Rampart's own HTTP/2 transport): the status of `service` now
  // (SERVICE_UNKNOWN when unknown), whether the service has shut down, and a callback told of
  // every change (from the thread that made it; it must not block or call back in). Listen
  // answers an id for Unlisten.
  grpc::health::v1::HealthCheckResponse::ServingStatus StatusOf(const std::string& service);
  bool shut_down();
  uint64_t Listen(std::function<void()> changed);
  void Unlisten(uint64_t id);

  grpc::Status Check(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::health::v1::HealthCheckResponse* response) override;
  grpc::Status Watch(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::ServerWriter<grpc::health::v1::HealthCheckResponse>* writer) override;

 private:
  using Status = grpc::health::v1::HealthCheckResponse::ServingStatus;
  // REQUIRES: mutex_ held.
  Status StatusOfLocked(const std::string& service) const;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, bool> serving_;                  // guarded by mutex_
  uint64_t generation_ = 0;                              // guarded; counts changes
  std::map<uint64_t, std::function<void()>> listeners_;  // guarded
  uint64_t next_listener_ = 0;                           // guarded
  bool shut_down_ = false;                               // guarded
};

}  // namespace rampart::api::grpc_health
