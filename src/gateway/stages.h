#pragma once

// The stages this module implements: parse (the OpenAI request), authenticate, authorise and
// quota (access_stages.h), route (the Router's plan, then the decision's obligations),
// guard_input and guard_output (the PII guard: guard_stages.h) and account (metrics and the
// access log); audit is gateway/audit_stage.h.

#include <memory>

#include "audit/sink.h"
#include "gateway/metrics.h"
#include "gateway/stage.h"
#include "policy/access.h"

namespace rampart::gateway {

// Parses the body under CallContext::limits.
std::unique_ptr<Stage> MakeParseStage();
std::unique_ptr<Stage> MakeRouteStage();
// Counts every call in `metrics` and, with `access_log`, logs one JSON line per call.
std::unique_ptr<Stage> MakeAccountStage(GatewayMetrics& metrics, bool access_log);

// The standard pipeline: the stages above and the audit stage. `access` (null: open, every call
// allowed as the anonymous principal) and `audit` (null: nothing recorded) must outlive the
// pipeline.
Pipeline StandardPipeline(GatewayMetrics& metrics, bool access_log,
                          const policy::AccessControl* access = nullptr,
                          audit::AuditSink* audit = nullptr);

}  // namespace rampart::gateway
