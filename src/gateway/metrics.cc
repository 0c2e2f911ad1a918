#include "gateway/metrics.h"

namespace rampart::gateway {
namespace {

// Seconds: 100 µs to 2 min, for time to first token and latencies between tokens.
const std::vector<double> kTokenBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                           0.025,  0.05,    0.1,    0.25,  0.5,    1,     2.5,
                                           5,      10,      30,     60,    120};
// Seconds: 5 µs to 100 ms, for the gateway's own time.
const std::vector<double> kOverheadBuckets = {0.000005, 0.00001, 0.000025, 0.00005, 0.0001,
                                              0.00025,  0.0005,  0.001,    0.0025,  0.005,
                                              0.01,     0.025,   0.1};

class HealthCollector final : public metrics::Collector {
 public:
  HealthCollector(metrics::GaugeFamily& gauge,
                  std::function<std::vector<std::pair<std::string, bool>>()> read)
      : gauge_(gauge), read_(std::move(read)) {}
  void Collect() override {
    const auto states = read_();
    gauge_.RemoveChildrenIf([](const std::vector<std::string>&) { return true; });
    for (const auto& [upstream, available] : states) {
      gauge_.WithLabels({upstream}).Set(available ? 1 : 0);
    }
  }

 private:
  metrics::GaugeFamily& gauge_;
  std::function<std::vector<std::pair<std::string, bool>>()> read_;
};

}  // namespace

GatewayMetrics::GatewayMetrics(metrics::Registry& registry)
    : requests(registry.Counter("rampart_gateway_requests_total",
                                "OpenAI gateway calls answered, by route, model and HTTP status",
                                {"route", "model", "operation", "code"})),
      upstream_calls(registry.Counter("rampart_gateway_upstream_calls_total",
                                      "Calls to upstream servers, by outcome",
                                      {"upstream", "outcome"})),
      retries(registry.Counter("rampart_gateway_retries_total",
                               "Upstream calls repeated after a retryable failure", {"route"})),
      fallbacks(registry.Counter("rampart_gateway_fallbacks_total",
                                 "Calls passed to a route's fallback model", {"route"})),
      failovers(registry.Counter("rampart_gateway_failovers_total",
                                 "Upstream calls sent below the highest priority group",
                                 {"model"})),
      broken_streams(registry.Counter(
          "rampart_gateway_broken_streams_total",
          "Streams an upstream broke after tokens were sent (ended with an error event)",
          {"route"})),
      ejections(registry.Counter("rampart_gateway_ejections_total",
                                 "Upstreams ejected after consecutive failures", {"upstream"})),
      tokens(registry.Counter("rampart_gateway_tokens_total",
                              "Tokens in (prompt) and out (completion); estimated=\"true\" where "
                              "the upstream reported none",
                              {"route", "model", "kind", "estimated"})),
      time_to_first_token(registry.Histogram("rampart_gateway_time_to_first_token_seconds",
                                             "Time from a streamed call's arrival to its first "
                                             "token",
                                             {"model"}, kTokenBuckets)),
      inter_token_latency(registry.Histogram("rampart_gateway_inter_token_latency_seconds",
                                             "Time between stream events carrying tokens",
                                             {"model"}, kTokenBuckets)),
      overhead(registry.Histogram("rampart_gateway_overhead_seconds",
                                  "The gateway's own time per call (not waiting for upstreams)",
                                  {"operation"}, kOverheadBuckets)),
      upstream_healthy(registry.Gauge("rampart_gateway_upstream_healthy",
                                      "1 while an upstream takes calls (health checks pass, not "
                                      "ejected), else 0",
                                      {"upstream"})),
      guard_entities(registry.Counter("rampart_guard_entities_total",
                                      "PII and data-leak entities the guard found, by type, "
                                      "direction (input, output, api) and action (redacted, "
                                      "blocked, detected)",
                                      {"type", "direction", "action"})),
      guard_blocked(registry.Counter("rampart_guard_blocked_requests_total",
                                     "Calls the guard refused (a blocked entity type found)",
                                     {"route"})) {}

void GatewayMetrics::CollectHealth(
    metrics::Registry& registry, std::function<std::vector<std::pair<std::string, bool>>()> read) {
  registry.AddCollector(std::make_unique<HealthCollector>(upstream_healthy, std::move(read)));
}

}  // namespace rampart::gateway
