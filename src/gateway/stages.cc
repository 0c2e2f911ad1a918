#include "gateway/stages.h"

#include <algorithm>

#include "core/check.h"
#include "core/logging.h"
#include "gateway/access_stages.h"
#include "gateway/audit_stage.h"
#include "gateway/guard_stages.h"
#include "json/writer.h"

namespace rampart::gateway {
namespace {

// Parses under the limits of the configuration the call started with (CallContext::limits), so
// that a reload changes them too.
class ParseStage final : public Stage {
 public:
  std::string_view name() const override { return "parse"; }
  Status OnRequest(CallContext& call) override {
    RequestError error;
    Result<OpenAiRequest> request =
        ParseOpenAiRequest(call.operation, std::move(call.http.body), call.limits, error);
    if (!request.ok()) {
      call.error_param = error.param;
      return request.status();
    }
    call.request = std::move(request).value();
    return Status::Ok();
  }
};

class RouteStage final : public Stage {
 public:
  std::string_view name() const override { return "route"; }
  Status OnRequest(CallContext& call) override {
    Result<RoutePlan> plan = call.router->Resolve(call.request, call.http);
    if (!plan.ok()) {
      call.error_param = "model";
      return plan.status();
    }
    call.plan = std::move(plan).value();
    return ApplyObligations(call);
  }
};

class AccountStage final : public Stage {
 public:
  AccountStage(GatewayMetrics& metrics, bool access_log)
      : metrics_(metrics), access_log_(access_log) {}
  std::string_view name() const override { return "account"; }

  void OnComplete(const CallContext& call) override {
    const std::string& route = call.plan.route.empty() ? kNone : call.plan.route;
    const std::string& model = call.target.empty() ? kNone : call.target;
    const std::string operation(OperationName(call.operation));
    metrics_.requests.WithLabels({route, model, operation, std::to_string(call.status)})
        .Increment();
    if (call.retries > 0) metrics_.retries.WithLabels({route}).Increment(call.retries);
    if (call.fallbacks > 0) metrics_.fallbacks.WithLabels({route}).Increment(call.fallbacks);
    if (call.failover) metrics_.failovers.WithLabels({model}).Increment();
    if (call.broken_stream) metrics_.broken_streams.WithLabels({route}).Increment();
    const std::string estimated = call.usage.estimated ? "true" : "false";
    if (call.usage.prompt_tokens > 0) {
      metrics_.tokens.WithLabels({route, model, "prompt", estimated})
          .Increment(static_cast<uint64_t>(call.usage.prompt_tokens));
    }
    if (call.usage.completion_tokens > 0) {
      metrics_.tokens.WithLabels({route, model, "completion", estimated})
          .Increment(static_cast<uint64_t>(call.usage.completion_tokens));
    }
    if (call.first_token_ns >= 0) {
      metrics_.time_to_first_token.WithLabels({model}).Observe(
          static_cast<double>(call.first_token_ns) / 1e9);
    }
    metrics_.overhead.WithLabels({operation}).Observe(static_cast<double>(call.gateway_ns) / 1e9);
    if (access_log_) LOG_INFO("{}", AccessLine(call, route, model));
  }

 private:
  static std::string AccessLine(const CallContext& call, const std::string& route,
                                const std::string& model) {
    json::Writer line;
    line.StartObject();
    line.Key("event");
    line.String("gateway");
    line.Key("trace_id");
    line.String(call.trace_id);
    line.Key("request_id");
    line.String(call.request_id);
    line.Key("operation");
    line.String(OperationName(call.operation));
    if (!call.identity.tenant.empty()) {
      line.Key("tenant");
      line.String(call.identity.tenant);
      line.Key("principal");
      line.String(call.identity.principal);
      line.Key("auth");
      line.String(identity::MethodName(call.identity.method));
      if (!call.identity.key_id.empty()) {
        line.Key("key_id");
        line.String(call.identity.key_id);
      }
    }
    if (!call.decision.rules.empty()) {
      line.Key("rules");
      line.StartArray();
      for (const std::string& rule : call.decision.rules) line.String(rule);
      line.EndArray();
    }
    if (!call.decision.obligations.empty()) {
      // audit:full among them marks the call for the audit log.
      line.Key("obligations");
      line.StartArray();
      for (const std::string& obligation : call.decision.obligations) line.String(obligation);
      line.EndArray();
    }
    line.Key("model_requested");
    line.String(call.request.model);
    line.Key("route");
    line.String(route);
    if (!call.knowledge_store.empty()) {
      line.Key("vector_store");
      line.String(call.knowledge_store);
      line.Key("cited_files");
      line.StartArray();
      for (const std::string& file : call.knowledge_files) line.String(file);
      line.EndArray();
      line.Key("search_ms");
      line.Double(static_cast<double>(call.search_ns) / 1e6);
    }
    line.Key("target");
    line.String(model);
    line.Key("upstream");
    line.String(call.upstream);
    line.Key("status");
    line.Int64(call.status);
    line.Key("outcome");
    line.String(call.outcome);
    line.Key("stream");
    line.Bool(call.streamed);
    line.Key("attempts");
    line.Int64(call.attempts);
    line.Key("fallbacks");
    line.Int64(call.fallbacks);
    line.Key("prompt_tokens");
    line.Int64(call.usage.prompt_tokens);
    line.Key("completion_tokens");
    line.Int64(call.usage.completion_tokens);
    line.Key("tokens_estimated");
    line.Bool(call.usage.estimated);
    line.Key("upstream_ms");
    line.Double(static_cast<double>(call.upstream_ns) / 1e6);
    line.Key("gateway_ms");
    line.Double(static_cast<double>(call.gateway_ns) / 1e6);
    const GuardFindings& found = call.guard_findings;
    if (!found.input.empty() || !found.output.empty() || found.blocked) {
      // Types and counts, never the values.
      line.Key("guard");
      line.StartObject();
      for (const auto& [direction, counts] :
           {std::pair{"input", &found.input}, std::pair{"output", &found.output}}) {
        line.Key(direction);
        line.StartObject();
        for (const auto& [type, count] : *counts) {
          line.Key(type);
          line.Int64(count);
        }
        line.EndObject();
      }
      line.Key("blocked");
      line.Bool(found.blocked);
      line.EndObject();
    }
    line.EndObject();
    return line.Take();
  }

  static inline const std::string kNone = "none";
  GatewayMetrics& metrics_;
  const bool access_log_;
};

}  // namespace

std::unique_ptr<Stage> MakeParseStage() { return std::make_unique<ParseStage>(); }
std::unique_ptr<Stage> MakeRouteStage() { return std::make_unique<RouteStage>(); }
std::unique_ptr<Stage> MakeAccountStage(GatewayMetrics& metrics, bool access_log) {
  return std::make_unique<AccountStage>(metrics, access_log);
}

Pipeline StandardPipeline(GatewayMetrics& metrics, bool access_log,
                          const policy::AccessControl* access, audit::AuditSink* audit) {
  static const std::unique_ptr<policy::AccessControl> open = policy::AccessControl::Open();
  const policy::AccessControl& control = access != nullptr ? *access : *open;
  std::vector<std::unique_ptr<Stage>> stages;
  stages.push_back(MakeParseStage());
  stages.push_back(MakeAuthenticateStage(control));
  stages.push_back(MakeAuthoriseStage(control));
  stages.push_back(MakeQuotaStage(control));
  stages.push_back(MakeRouteStage());
  stages.push_back(MakeGuardInputStage(metrics));
  stages.push_back(MakeGuardOutputStage(metrics));
  stages.push_back(MakeAccountStage(metrics, access_log));
  stages.push_back(MakeAuditStage(audit));
  return Pipeline(std::move(stages));
}

Pipeline::Pipeline(std::vector<std::unique_ptr<Stage>> stages) {
  for (size_t i = 0; i < kStageOrder.size(); ++i) {
    if (i == kCallStage) continue;
    auto found = std::find_if(stages.begin(), stages.end(), [i](const auto& stage) {
      return stage && stage->name() == kStageOrder[i];
    });
    CHECK(found != stages.end());  // every stage of kStageOrder but "call" is given
    stages_.push_back(std::move(*found));
  }
  CHECK(stages_.size() + 1 == kStageOrder.size());
}

Status Pipeline::Request(CallContext& call) const {
  for (size_t i = 0; i < kCallStage; ++i) RETURN_IF_ERROR(stages_[i]->OnRequest(call));
  return Status::Ok();
}

Status Pipeline::Answer(CallContext& call, std::string& data) const {
  for (size_t i = kCallStage; i < stages_.size(); ++i) {
    RETURN_IF_ERROR(stages_[i]->OnAnswer(call, data));
  }
  return Status::Ok();
}

Result<std::vector<std::string>> Pipeline::AnswerEnd(CallContext& call) const {
  std::vector<std::string> all;
  for (size_t i = kCallStage; i < stages_.size(); ++i) {
    std::vector<std::string> added;
    RETURN_IF_ERROR(stages_[i]->OnAnswerEnd(call, added));
    for (std::string& event : added) {
      for (size_t later = i + 1; later < stages_.size(); ++later) {
        RETURN_IF_ERROR(stages_[later]->OnAnswer(call, event));
      }
      all.push_back(std::move(event));
    }
  }
  return all;
}

void Pipeline::Complete(const CallContext& call) const {
  for (size_t i = stages_.size(); i-- > 0;) stages_[i]->OnComplete(call);
}

const Stage& Pipeline::stage(std::string_view name) const {
  for (const auto& stage : stages_) {
    if (stage->name() == name) return *stage;
  }
  CHECK(false);  // asked for a stage the pipeline cannot have
  return *stages_.front();
}

}  // namespace rampart::gateway
