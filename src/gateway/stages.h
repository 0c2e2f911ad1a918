#pragma once

// The stages this module implements: parse (the OpenAI request), route (the Router's plan),
// guard_input and guard_output (the PII guard: guard_stages.h) and account (metrics and the
// access log). The others are PassThroughStage until built.

#include <memory>

#include "gateway/metrics.h"
#include "gateway/stage.h"

namespace rampart::gateway {

// Parses the body under CallContext::limits.
std::unique_ptr<Stage> MakeParseStage();
std::unique_ptr<Stage> MakeRouteStage();
// Counts every call in `metrics` and, with `access_log`, logs one JSON line per call.
std::unique_ptr<Stage> MakeAccountStage(GatewayMetrics& metrics, bool access_log);

// The standard pipeline: the stages above, pass-through for the rest.
Pipeline StandardPipeline(GatewayMetrics& metrics, bool access_log);

}  // namespace rampart::gateway
