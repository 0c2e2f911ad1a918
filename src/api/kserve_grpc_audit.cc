#include "api/kserve_grpc_audit.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "api/audit_http.h"
#include "api/kserve_grpc_access.h"
#include "core/trace.h"

namespace rampart::api::grpc_audit {

int HttpStatusOf(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return 200;
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::OUT_OF_RANGE: return 400;
    case grpc::StatusCode::UNAUTHENTICATED: return 401;
    case grpc::StatusCode::PERMISSION_DENIED: return 403;
    case grpc::StatusCode::NOT_FOUND: return 404;
    case grpc::StatusCode::ALREADY_EXISTS: return 409;
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return 429;
    case grpc::StatusCode::CANCELLED: return 499;
    case grpc::StatusCode::UNIMPLEMENTED: return 501;
    case grpc::StatusCode::UNAVAILABLE: return 503;
    case grpc::StatusCode::DEADLINE_EXCEEDED: return 504;
    default: return 500;
  }
}

GrpcRecord::GrpcRecord(audit::AuditSink* sink, const grpc_access::CallView& call,
                       std::string_view method, std::string_view resource,
                       std::string_view request_id) {
  if (sink == nullptr) return;
  Start(sink, method, resource);
  recording_->record.request_id = grpc_access::RequestIdOf(call, request_id);
  recording_->record.source_address = call.PeerAddress();
}

GrpcRecord::GrpcRecord(audit::AuditSink* sink, std::string_view source_address,
                       std::string_view method, std::string_view resource,
                       std::string_view request_id) {
  if (sink == nullptr) return;
  Start(sink, method, resource);
  audit::AuditRecord& record = recording_->record;
  record.request_id = request_id.empty() ? "req_" + record.trace_id : std::string(request_id);
  record.source_address = std::string(source_address);
}

void GrpcRecord::Start(audit::AuditSink* sink, std::string_view method, std::string_view resource) {
  recording_ = std::make_unique<Recording>();
  recording_->sink = sink;
  recording_->received = Clock::Real().Now();
  const grpc_access::RpcAction& decided = grpc_access::RpcActionOf(method);
  audit::AuditRecord& record = recording_->record;
  record.time_unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  record.trace_id = TraceContext::Start().TraceId();
  record.api = "kserve_grpc";
  record.action = std::string(decided.action);
  record.resource_type = std::string(decided.resource_type);
  record.resource = std::string(resource);
  record.route = std::string(method);
}

void GrpcRecord::Note(const identity::Identity& identity, const policy::Decision& decision) {
  if (recording_ == nullptr) return;
  NoteIdentity(identity, recording_->record);
  NoteDecision(decision, recording_->record);
  recording_->full =
      decision.allowed && std::find(decision.obligations.begin(), decision.obligations.end(),
                                    policy::kObligationAuditFull) != decision.obligations.end();
}

void GrpcRecord::Finish(grpc::Status status, std::string_view response_content,
                        UniqueFunction<void(grpc::Status)> finish) {
  if (recording_ == nullptr) {
    finish(std::move(status));
    return;
  }
  // Finishing ends the recording: held here until the sink has read the content.
  const std::unique_ptr<Recording> recording = std::move(recording_);
  audit::AuditSink* sink = recording->sink;
  audit::AuditRecord& record = recording->record;
  record.status = HttpStatusOf(status.error_code());
  record.outcome = std::string(OutcomeOf(record.status));
  record.latency_ns = NanosBetween(recording->received, Clock::Real().Now());
  const audit::AuditContent content{
      .request = recording->request_content, .response = response_content, .full = recording->full};
  if (!sink->sync()) {
    sink->Record(std::move(record), content, {});
    finish(std::move(status));
    return;
  }
  sink->Record(
      std::move(record), content,
      [finish = std::move(finish), status = std::move(status)](Status recorded) mutable {
        if (recorded.ok()) {
          finish(std::move(status));
        } else {
          finish(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                              "the audit log cannot record the request: " + recorded.message()));
        }
      });
}

policy::AccessOutcome Check(const policy::AccessControl& access,
                            const identity::Credentials& credentials, std::string_view action,
                            const policy::Resource& resource, audit::AuditRecord* record) {
  if (record == nullptr) return access.Check(credentials, action, resource, 0);
  return CheckRecorded(access, credentials, action, resource, 0, *record);
}

}  // namespace rampart::api::grpc_audit
