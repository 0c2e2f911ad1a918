#pragma once

// ServeMetrics: the serving core's Prometheus metrics, under Triton's names plus Rampart's
// latency histograms (docs/observability.md lists them all).
//
// It is the InferenceServer's ServerObserver: each loaded version gets handles to its own
// children up front, so recording a request is a handful of lock-free atomic updates with no
// lookup. The pending-request gauge is read from the server's queues at scrape time.
//
//   Triton counters   nv_inference_request_success, nv_inference_request_failure{reason},
//                     nv_inference_count, nv_inference_exec_count,
//                     nv_inference_{request,queue,compute_input,compute_infer,compute_output}
//                     _duration_us (cumulative microseconds of successful requests)
//   Triton gauges     nv_inference_pending_request_count, nv_model_load_duration_secs, and the
//                     process collector's nv_cpu_* gauges
//   histograms        rampart_inference_{request,queue,compute_infer}_duration_seconds, buckets
//                     10 µs to 5 s by default (kDefaultDurationBucketsUs), configurable per
//                     server and per model (parameter `metrics_histogram_buckets`, microseconds)
//   ensembles         rampart_ensemble_alignment_seconds: spread of the parallel branches'
//                     finish times
//   summaries         nv_inference_{request,queue,compute_infer}_summary_us (p50/p90/p99), off
//                     unless asked for, as in Triton
//
// Thread safety: everything may be called from any thread. The registry must outlive this
// object, and this object must outlive the InferenceServer it observes.

#include <memory>
#include <vector>

#include "metrics/registry.h"
#include "serve/observer.h"
#include "serve/server.h"

namespace rampart::metrics {

struct ServeMetricsOptions {
  // Histogram bucket upper bounds in microseconds (exported in seconds).
  std::vector<double> histogram_buckets_us{kDefaultDurationBucketsUs.begin(),
                                           kDefaultDurationBucketsUs.end()};
  bool summaries = false;
};

// The model config parameter that overrides the histogram buckets for one model.
inline constexpr std::string_view kModelBucketsParameter = "metrics_histogram_buckets";

// ParseHistogramBuckets for a list in microseconds, also checked as the seconds the histograms
// keep (two bounds a hair apart, or tiny ones, can become one bound). For the
// --metrics-histogram-buckets flag and the per-model parameter.
Result<std::vector<double>> ParseMicrosecondBuckets(std::string_view text);

class ServeMetrics final : public serve::ServerObserver {
 public:
  // REQUIRES: ValidateHistogramBuckets(options.histogram_buckets_us).ok().
  ServeMetrics(Registry& registry, ServeMetricsOptions options);
  ~ServeMetrics() override;

  // Starts reading the server's queue sizes and canary states (rampart_canary_weight_percent,
  // rampart_canary_stage, rampart_canary_state) at each scrape. Call once the server exists.
  void WatchQueues(const serve::InferenceServer& server);

  std::unique_ptr<serve::VersionObserver> ForVersion(const model::ModelConfig& config,
                                                     int64_t version) override;

 private:
  Registry& registry_;
  const ServeMetricsOptions options_;
};

}  // namespace rampart::metrics
