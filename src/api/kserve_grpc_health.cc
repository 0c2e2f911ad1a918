#include "api/kserve_grpc_health.h"

#include <chrono>

namespace rampart::api::grpc_health {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

HealthService::HealthService(std::initializer_list<std::string> services) {
  serving_[""] = true;
  for (const std::string& service : services) serving_[service] = true;
}

void HealthService::SetServingAll(bool serving) {
  std::lock_guard lock(mutex_);
  for (auto& [service, state] : serving_) state = serving;
  ++generation_;
  changed_.notify_all();
  for (const auto& [id, listener] : listeners_) listener();
}

void HealthService::Shutdown() {
  std::lock_guard lock(mutex_);
  shut_down_ = true;
  for (auto& [service, state] : serving_) state = false;
  ++generation_;
  changed_.notify_all();
  for (const auto& [id, listener] : listeners_) listener();
}

HealthService::Status HealthService::StatusOf(const std::string& service) {
  std::lock_guard lock(mutex_);
  return StatusOfLocked(service);
}

bool HealthService::shut_down() {
  std::lock_guard lock(mutex_);
  return shut_down_;
}

uint64_t HealthService::Listen(std::function<void()> changed) {
  std::lock_guard lock(mutex_);
  listeners_.emplace(++next_listener_, std::move(changed));
  return next_listener_;
}

void HealthService::Unlisten(uint64_t id) {
  std::lock_guard lock(mutex_);
  listeners_.erase(id);
}

HealthService::Status HealthService::StatusOfLocked(const std::string& service) const {
  const auto found = serving_.find(service);
  if (found == serving_.end()) return HealthCheckResponse::SERVICE_UNKNOWN;
  return found->second ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
}

grpc::Status HealthService::Check(grpc::ServerContext*, const HealthCheckRequest* request,
                                  HealthCheckResponse* response) {
  std::lock_guard lock(mutex_);
  const Status status = StatusOfLocked(request->service());
  if (status == HealthCheckResponse::SERVICE_UNKNOWN) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "service unknown");
  }
  response->set_status(status);
  return grpc::Status::OK;
}

grpc::Status HealthService::Watch(grpc::ServerContext* context, const HealthCheckRequest* request,
                                  grpc::ServerWriter<HealthCheckResponse>* writer) {
  std::unique_lock lock(mutex_);
  bool first = true;
  Status sent = HealthCheckResponse::UNKNOWN;
  while (true) {
    const Status status = StatusOfLocked(request->service());
    if (first || status != sent) {
      HealthCheckResponse response;
      response.set_status(status);
      lock.unlock();
      if (!writer->Write(response)) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
      lock.lock();
      sent = status;
      first = false;
    }
    if (shut_down_)
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down");
    // A synchronous handler learns of a cancelled call only by asking: once a second.
    const uint64_t seen = generation_;
    changed_.wait_for(lock, std::chrono::seconds(1),
                      [&] { return generation_ != seen || shut_down_; });
    if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
  }
}

}  // namespace rampart::api::grpc_health
