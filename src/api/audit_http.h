#pragma once

// Audit records for the HTTP front ends (KServe /v2, the guard API, the admin API; the gateway's
// calls are recorded by its own audit stage): the record's start from the request, access
// control that notes who called and what was decided (refusals included), and the answer sent
// only as the sink allows (docs/audit.md, "What each API records").
//
// Thread-safe; never blocks.

#include <memory>
#include <string>
#include <string_view>

#include "audit/record.h"
#include "audit/sink.h"
#include "net/http.h"
#include "net/http_server.h"
#include "policy/access.h"

namespace rampart::api {

// The record of `request` on `api` ("kserve_http", "guard", "admin"): its arrival (unix ns),
// trace and request ids, the peer's address, and the action and resource it asks for.
audit::AuditRecord StartRecord(const net::HttpRequest& request, std::string_view api,
                               std::string_view trace_id, std::string request_id,
                               std::string_view action, std::string_view resource_type,
                               std::string_view resource);

// Who called and what policy decided, into `record`.
void NoteIdentity(const identity::Identity& identity, audit::AuditRecord& record);
void NoteDecision(const policy::Decision& decision, audit::AuditRecord& record);

// As AccessControl::Check on `request`'s credentials, noting the identity (when one was
// established) and the decision (when one was made) in `record`; a refusal marks it not allowed.
// The same on credentials already read (the gRPC front end's, from its metadata).
policy::AccessOutcome CheckRecorded(const policy::AccessControl& access,
                                    const identity::Credentials& credentials,
                                    std::string_view action, const policy::Resource& resource,
                                    int64_t tokens, audit::AuditRecord& record);
policy::AccessOutcome CheckRecorded(const policy::AccessControl& access,
                                    const net::HttpRequest& request, std::string_view action,
                                    const policy::Resource& resource, int64_t tokens,
                                    audit::AuditRecord& record);

// "ok" for a 1xx-3xx status, else the kind of error it answers ("invalid_argument",
// "unauthenticated", "forbidden", "not_found", "rate_limited", "unavailable", "internal", ...).
std::string_view OutcomeOf(int status);

// Completes `record` with `response`'s status and outcome and the latency since `received`,
// hands it to `sink` with the request's and the answer's content, and answers: at once when the
// sink is batched (or null: nothing recorded), or once the record is durable when it is sync; a
// sync sink that refuses the record answers 503 instead (never an answer without its record).
void SendRecorded(audit::AuditSink* sink, audit::AuditRecord&& record, SteadyTime received,
                  std::string_view request_content, bool full, net::Responder responder,
                  net::HttpResponse response);

// A Responder that records the request as it answers (SendRecorded), or, made from a plain
// Responder, one that only answers. Move-only. Dropped without an answer it answers 500, and
// records that.
class RecordedResponder {
 public:
  // Answers without recording.
  RecordedResponder(net::Responder responder)  // NOLINT(google-explicit-constructor)
      : responder_(std::move(responder)) {}
  // Records into `sink` (not null) as it answers.
  RecordedResponder(net::Responder responder, audit::AuditSink* sink, audit::AuditRecord record,
                    SteadyTime received);
  // A moved-from one neither answers nor records.
  RecordedResponder(RecordedResponder&& other) noexcept;
  RecordedResponder& operator=(RecordedResponder&&) = delete;
  ~RecordedResponder();

  // What the request carried, for the record's digest (kept only while recording).
  void SetRequestContent(std::string content) {
    if (sink_ != nullptr) request_content_ = std::move(content);
  }
  // Whether the record's content is sealed too (the decision's audit:full obligation).
  void SetFull(bool full) { full_ = full; }

  // Answers `response`, recording it first with the request's content.
  void Send(net::HttpResponse response);
  // As Send with the answer `make_response` builds: on the connection's I/O thread when the
  // answer may go at once (not recording, or a batched sink), here when it waits for its record
  // (a sync sink).
  void SendWith(UniqueFunction<net::HttpResponse()> make_response);
  // Answers with a stream (net::Responder::StartStream), recording the request first with the
  // head's status and no answer content. With a sync sink this waits until the record is
  // durable (call it off the I/O threads), and a refused record answers 503 instead: the writer
  // returned is then closed.
  net::StreamWriter StartStream(net::HttpResponseHead head);
  // The record being filled; null when not recording.
  audit::AuditRecord* record() { return sink_ != nullptr ? record_.get() : nullptr; }
  audit::AuditSink* sink() const { return sink_; }

 private:
  net::Responder responder_;
  audit::AuditSink* sink_ = nullptr;
  // On the heap (made only when recording): the responder is moved from callback to callback
  // as the request goes, and a record (about 1 KiB) moved with it each time cost more than this
  // one allocation.
  std::unique_ptr<audit::AuditRecord> record_;
  std::string request_content_;
  SteadyTime received_{};
  bool full_ = false;
  bool sent_ = false;
};

// The 503 answered when a sync audit log refuses a record, in the KServe error shape.
net::HttpResponse AuditUnavailableResponse(const Status& why);

}  // namespace rampart::api
