#pragma once

// Audit records for the gRPC front end (internal to api/kserve_grpc; docs/audit.md, "What each
// API records"): one record per call (per request on a stream), api "kserve_grpc", with the
// caller and the decision noted by the access check, the request and answer digested (their
// serialized messages), and the status as its HTTP equivalent. With a sync sink the call is
// finished (the stream's answer released) only once the record is durable; a refused record
// finishes it UNAVAILABLE instead. ServerLive and ServerReady are probes: not recorded.
//
// Thread-safe as used: one GrpcRecord belongs to one call (or one stream request).

#include <memory>
#include <string>
#include <string_view>

#include <grpcpp/grpcpp.h>

#include "api/kserve_grpc_access.h"
#include "audit/record.h"
#include "audit/sink.h"
#include "core/clock.h"
#include "core/unique_function.h"
#include "identity/identity.h"
#include "policy/access.h"

namespace rampart::api::grpc_audit {

// The HTTP status a gRPC status code stands for in a record (OK 200, INVALID_ARGUMENT 400,
// UNAUTHENTICATED 401, PERMISSION_DENIED 403, NOT_FOUND 404, RESOURCE_EXHAUSTED 429,
// UNIMPLEMENTED 501, UNAVAILABLE 503, DEADLINE_EXCEEDED 504, CANCELLED 499, others 500).
int HttpStatusOf(grpc::StatusCode code);

class GrpcRecord {
 public:
  // Not recording (`sink` null): every method is a no-op and Finish finishes at once.
  // `method` is the RPC ("ModelInfer"; its action from grpc_access::RpcActionOf), `resource` the
  // model (or "*"), `request_id` the id the request carries (may be empty).
  GrpcRecord(audit::AuditSink* sink, const grpc_access::CallView& call, std::string_view method,
             std::string_view resource, std::string_view request_id);
  // One request of a stream: its caller's address and the id it carries (else a generated one).
  GrpcRecord(audit::AuditSink* sink, std::string_view source_address, std::string_view method,
             std::string_view resource, std::string_view request_id);
  GrpcRecord(GrpcRecord&&) = default;
  GrpcRecord& operator=(GrpcRecord&&) = default;

  bool recording() const { return recording_ != nullptr; }
  // The record, for the access check to note the caller and the decision; null when not
  // recording.
  audit::AuditRecord* record() { return recording_ != nullptr ? &recording_->record : nullptr; }
  // The request's serialized message (for its digest); kept only while recording.
  void SetRequestContent(std::string content) {
    if (recording_ != nullptr) recording_->request_content = std::move(content);
  }
  void SetFull(bool full) {
    if (recording_ != nullptr) recording_->full = full;
  }
  // Notes the caller and the decision (a stream's requests, decided one by one).
  void Note(const identity::Identity& identity, const policy::Decision& decision);

  // Records the call as answered `status` with `response_content` (its serialized answer), then
  // runs `finish` with the status to answer: `status` at once (not recording, or batched), or
  // from the sink's callback once the record is durable (sync; UNAVAILABLE when it was refused).
  // `finish` must not block. Call once.
  void Finish(grpc::Status status, std::string_view response_content,
              UniqueFunction<void(grpc::Status)> finish);

 private:
  struct Recording {
    audit::AuditSink* sink = nullptr;
    audit::AuditRecord record;
    std::string request_content;
    SteadyTime received{};
    bool full = false;
  };

  void Start(audit::AuditSink* sink, std::string_view method, std::string_view resource);

  // Null when not recording (the usual case), so that moving a GrpcRecord into a call's
  // completion moves one pointer rather than the record's two dozen strings (60 string moves per
  // unary call, 2.6 % of its instructions, before).
  std::unique_ptr<Recording> recording_;
};

// As AccessControl::Check, noting the caller and the decision in `record` when it is not null
// (the HTTP front end's CheckRecorded on the call's credentials).
policy::AccessOutcome Check(const policy::AccessControl& access,
                            const identity::Credentials& credentials, std::string_view action,
                            const policy::Resource& resource, audit::AuditRecord* record);

}  // namespace rampart::api::grpc_audit
