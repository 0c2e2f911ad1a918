#pragma once

// The gateway's Prometheus metrics (docs/observability.md lists them):
//
//   rampart_gateway_requests_total{route,model,operation,code}   calls answered, by HTTP status
//   rampart_gateway_upstream_calls_total{upstream,outcome}      attempts, by outcome ("ok",
//                                                               "http_503", "connect_failed", ...)
//   rampart_gateway_retries_total{route}, _fallbacks_total{route}, _failovers_total{model},
//   rampart_gateway_broken_streams_total{route}, _ejections_total{upstream}
//   rampart_gateway_tokens_total{route,model,kind,estimated}    kind: prompt | completion
//   rampart_gateway_time_to_first_token_seconds{model}          histogram
//   rampart_gateway_inter_token_latency_seconds{model}          histogram
//   rampart_gateway_overhead_seconds{operation}                 the gateway's own time per call
//   rampart_gateway_upstream_healthy{upstream}                  1 available, 0 not (at scrape)
//   rampart_guard_entities_total{type,direction,action}          PII entities the guard found;
//                          direction input | output | api, action redacted | blocked | detected
//   rampart_guard_blocked_requests_total{route}                  calls the guard refused
//
// Thread-safe; children are looked up per call (a mutex and a map lookup each).

#include <functional>
#include <string>
#include <vector>

#include "metrics/registry.h"

namespace rampart::gateway {

class GatewayMetrics {
 public:
  explicit GatewayMetrics(metrics::Registry& registry);

  metrics::CounterFamily& requests;
  metrics::CounterFamily& upstream_calls;
  metrics::CounterFamily& retries;
  metrics::CounterFamily& fallbacks;
  metrics::CounterFamily& failovers;
  metrics::CounterFamily& broken_streams;
  metrics::CounterFamily& ejections;
  metrics::CounterFamily& tokens;
  metrics::HistogramFamily& time_to_first_token;
  metrics::HistogramFamily& inter_token_latency;
  metrics::HistogramFamily& overhead;
  metrics::GaugeFamily& upstream_healthy;
  metrics::CounterFamily& guard_entities;
  metrics::CounterFamily& guard_blocked;

  // Sets upstream_healthy at every scrape from `read` (upstream name -> available now).
  void CollectHealth(metrics::Registry& registry,
                     std::function<std::vector<std::pair<std::string, bool>>()> read);
};

}  // namespace rampart::gateway
