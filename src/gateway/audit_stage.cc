#include "gateway/audit_stage.h"

#include <chrono>
#include <map>
#include <string>

#include "core/clock.h"
#include "gateway/access_stages.h"

namespace rampart::gateway {
namespace {

int64_t UnixNanosAt(SteadyTime received) {
  const int64_t unix_now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  if (received == SteadyTime{}) return unix_now;
  return unix_now - NanosBetween(received, Clock::Real().Now());
}

audit::NamedCounts<int> Counts(const std::map<std::string_view, int>& found) {
  audit::NamedCounts<int> counts;
  counts.reserve(found.size());
  for (const auto& [type, count] : found) counts[type] = count;
  return counts;
}

class AuditStage final : public Stage {
 public:
  explicit AuditStage(audit::AuditSink* sink) : sink_(sink) {}
  std::string_view name() const override { return "audit"; }

  Status OnAnswer(CallContext& call, std::string& data) override {
    if (sink_ != nullptr) call.audited_answer += data;
    return Status::Ok();
  }

  void OnComplete(const CallContext& call) override {
    if (sink_ == nullptr) return;
    audit::AuditRecord record;
    record.time_unix_ns = UnixNanosAt(call.received);
    record.trace_id = call.trace_id;
    record.request_id = call.request_id;
    record.api = "openai";
    record.tenant = call.identity.tenant;
    record.principal = call.identity.principal;
    if (!call.identity.tenant.empty()) {
      record.auth_method = std::string(identity::MethodName(call.identity.method));
    }
    record.key_id = call.identity.key_id;
    if (call.http.peer != nullptr) record.source_address = call.http.peer->address;
    record.action = std::string(ActionOf(call.operation));
    record.resource_type = "model";
    record.resource = call.request.model;
    record.allowed = call.decision.allowed;
    record.rules = call.decision.rules;
    record.obligations = call.decision.obligations;
    record.pii_input = Counts(call.guard_findings.input);
    record.pii_output = Counts(call.guard_findings.output);
    if (!call.knowledge_store.empty()) {
      // An answer from a knowledge base: the store it searched and the files it drew on.
      record.resource_type = "vector_store";
      record.resource = call.knowledge_store;
      record.documents = call.knowledge_files;
      if (call.search_ns > 0) record.stages_ns["search"] = call.search_ns;
    }
    record.route = call.plan.route;
    record.target = call.target;
    if (!call.upstream.empty()) record.stages_ns["upstream"] = call.upstream_ns;
    record.stages_ns["gateway"] = call.gateway_ns;
    if (call.first_token_ns >= 0) record.stages_ns["first_token"] = call.first_token_ns;
    record.tokens_in = call.usage.prompt_tokens;
    record.tokens_out = call.usage.completion_tokens;
    record.latency_ns =
        call.received == SteadyTime{} ? 0 : NanosBetween(call.received, Clock::Real().Now());
    record.status = call.status;
    record.outcome = call.outcome;
    const bool full = call.decision.allowed &&
                      std::find(call.decision.obligations.begin(), call.decision.obligations.end(),
                                policy::kObligationAuditFull) != call.decision.obligations.end();
    sink_->Record(std::move(record),
                  {.request = call.request.body, .response = call.audited_answer, .full = full},
                  {});
  }

 private:
  audit::AuditSink* const sink_;
};

}  // namespace

std::unique_ptr<Stage> MakeAuditStage(audit::AuditSink* sink) {
  return std::make_unique<AuditStage>(sink);
}

}  // namespace rampart::gateway
