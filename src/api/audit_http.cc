#include "api/audit_http.h"

#include <chrono>
#include <future>
#include <utility>

#include "api/http_status.h"
#include "gateway/access_stages.h"

namespace rampart::api {
namespace {

int64_t UnixNanosAt(SteadyTime received) {
  const int64_t unix_now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  if (received == SteadyTime{}) return unix_now;
  return unix_now - NanosBetween(received, Clock::Real().Now());
}

}  // namespace

audit::AuditRecord StartRecord(const net::HttpRequest& request, std::string_view api,
                               std::string_view trace_id, std::string request_id,
                               std::string_view action, std::string_view resource_type,
                               std::string_view resource) {
  audit::AuditRecord record;
  record.time_unix_ns = UnixNanosAt(request.received);
  record.trace_id = std::string(trace_id);
  record.request_id = std::move(request_id);
  record.api = std::string(api);
  if (request.peer != nullptr) record.source_address = request.peer->address;
  record.action = std::string(action);
  record.resource_type = std::string(resource_type);
  record.resource = std::string(resource);
  return record;
}

void NoteIdentity(const identity::Identity& identity, audit::AuditRecord& record) {
  record.tenant = identity.tenant;
  record.principal = identity.principal;
  record.auth_method = std::string(identity::MethodName(identity.method));
  record.key_id = identity.key_id;
}

void NoteDecision(const policy::Decision& decision, audit::AuditRecord& record) {
  record.allowed = decision.allowed;
  record.rules = decision.rules;
  record.obligations = decision.obligations;
}

policy::AccessOutcome CheckRecorded(const policy::AccessControl& access,
                                    const net::HttpRequest& request, std::string_view action,
                                    const policy::Resource& resource, int64_t tokens,
                                    audit::AuditRecord& record) {
  return CheckRecorded(access, gateway::CredentialsOf(request), action, resource, tokens, record);
}

policy::AccessOutcome CheckRecorded(const policy::AccessControl& access,
                                    const identity::Credentials& credentials,
                                    std::string_view action, const policy::Resource& resource,
                                    int64_t tokens, audit::AuditRecord& record) {
  // AccessControl::Check's three steps, in its order, each noted as it is known.
  Result<identity::Identity> identity = access.Authenticate(credentials);
  if (!identity.ok()) {
    record.allowed = false;
    return policy::AccessRefusal::Unauthenticated(identity.status());
  }
  NoteIdentity(*identity, record);
  const std::string_view source =
      credentials.peer != nullptr ? std::string_view(credentials.peer->address) : "";
  policy::Decision decision = access.Authorise(*identity, action, resource, source);
  NoteDecision(decision, record);
  if (!decision.allowed) return policy::AccessRefusal::Forbidden(decision);
  policy::QuotaLedger::Admission admission = access.Admit(*identity, tokens);
  if (!admission.admitted()) {
    record.allowed = false;
    return policy::AccessRefusal::Quota(*admission.refusal);
  }
  return policy::AccessGrant{.identity = std::move(identity).value(),
                             .decision = std::move(decision),
                             .reservation = std::move(admission.reservation)};
}

std::string_view OutcomeOf(int status) {
  if (status < 400) return "ok";
  switch (status) {
    case 400: return "invalid_argument";
    case 401: return "unauthenticated";
    case 403: return "forbidden";
    case 404: return "not_found";
    case 405: return "method_not_allowed";
    case 408: return "timeout";
    case 413: return "too_large";
    case 415: return "unsupported_media_type";
    case 429: return "rate_limited";
    case 501: return "unimplemented";
    case 503: return "unavailable";
    default: return status < 500 ? "client_error" : "internal";
  }
}

net::HttpResponse AuditUnavailableResponse(const Status& why) {
  net::HttpResponse response =
      KServeError(Unavailable("the audit log could not record the request: {}", why.message()));
  response.status = 503;
  response.headers.emplace_back("Retry-After", "1");
  return response;
}

void SendRecorded(audit::AuditSink* sink, audit::AuditRecord&& record, SteadyTime received,
                  std::string_view request_content, bool full, net::Responder responder,
                  net::HttpResponse response) {
  if (sink == nullptr) {
    responder.Send(std::move(response));
    return;
  }
  record.status = response.status;
  record.outcome = std::string(OutcomeOf(response.status));
  record.latency_ns = received == SteadyTime{} ? 0 : NanosBetween(received, Clock::Real().Now());
  if (!sink->sync()) {
    sink->Record(std::move(record),
                 {.request = request_content, .response = response.body, .full = full}, {});
    responder.Send(std::move(response));
    return;
  }
  // On the heap, so the content's view of the body stays valid as the callback takes it.
  auto held = std::make_unique<net::HttpResponse>(std::move(response));
  const audit::AuditContent content{
      .request = request_content, .response = held->body, .full = full};
  sink->Record(
      std::move(record), content,
      [responder = std::move(responder), held = std::move(held)](Status recorded) mutable {
        responder.Send(recorded.ok() ? std::move(*held) : AuditUnavailableResponse(recorded));
      });
}

RecordedResponder::RecordedResponder(net::Responder responder, audit::AuditSink* sink,
                                     audit::AuditRecord record, SteadyTime received)
    : responder_(std::move(responder)),
      sink_(sink),
      record_(std::make_unique<audit::AuditRecord>(std::move(record))),
      received_(received) {}

RecordedResponder::RecordedResponder(RecordedResponder&& other) noexcept
    : responder_(std::move(other.responder_)),
      sink_(std::exchange(other.sink_, nullptr)),
      record_(std::move(other.record_)),
      request_content_(std::move(other.request_content_)),
      received_(other.received_),
      full_(other.full_),
      sent_(std::exchange(other.sent_, true)) {}

RecordedResponder::~RecordedResponder() {
  if (sink_ != nullptr && !sent_) {
    net::HttpResponse response;
    response.status = 500;
    response.body = R"({"error":"internal error: request was dropped without an answer"})";
    Send(std::move(response));
  }
}

void RecordedResponder::Send(net::HttpResponse response) {
  sent_ = true;
  if (sink_ == nullptr) {
    responder_.Send(std::move(response));
    return;
  }
  SendRecorded(sink_, std::move(*record_), received_, request_content_, full_,
               std::move(responder_), std::move(response));
}

net::StreamWriter RecordedResponder::StartStream(net::HttpResponseHead head) {
  sent_ = true;
  if (sink_ != nullptr) {
    record_->status = head.status;
    record_->outcome = std::string(OutcomeOf(head.status));
    record_->latency_ns = NanosBetween(received_, Clock::Real().Now());
    const audit::AuditContent content{.request = request_content_, .response = {}, .full = full_};
    if (!sink_->sync()) {
      sink_->Record(std::move(*record_), content, {});
    } else {
      std::promise<Status> recorded;
      sink_->Record(std::move(*record_), content,
                    [&recorded](Status status) { recorded.set_value(std::move(status)); });
      if (Status status = recorded.get_future().get(); !status.ok()) {
        responder_.Send(AuditUnavailableResponse(status));
        return net::StreamWriter();
      }
    }
  }
  return responder_.StartStream(std::move(head));
}

void RecordedResponder::SendWith(UniqueFunction<net::HttpResponse()> make_response) {
  if (sink_ == nullptr) {
    sent_ = true;
    responder_.SendWith(std::move(make_response));
    return;
  }
  if (sink_->sync()) {
    Send(make_response());
    return;
  }
  sent_ = true;
  responder_.SendWith([sink = sink_, record = std::move(record_), received = received_,
                       request_content = std::move(request_content_), full = full_,
                       make_response = std::move(make_response)]() mutable {
    net::HttpResponse response = make_response();
    record->status = response.status;
    record->outcome = std::string(OutcomeOf(response.status));
    record->latency_ns = NanosBetween(received, Clock::Real().Now());
    sink->Record(std::move(*record),
                 {.request = request_content, .response = response.body, .full = full}, {});
    return response;
  });
}

}  // namespace rampart::api
