#include "metrics/serve_metrics.h"

#include <array>
#include <functional>
#include <set>

#include "core/logging.h"

namespace rampart::metrics {
namespace {

const std::vector<std::string> kModelLabels = {"model", "version"};

std::vector<double> ToSeconds(const std::vector<double>& microseconds) {
  std::vector<double> seconds;
  seconds.reserve(microseconds.size());
  for (double us : microseconds) seconds.push_back(us / 1e6);
  return seconds;
}

// One version's handles, resolved once at load and held for the version's life: its series go
// when the version does (as Triton drops an unloaded model's metrics), unless a version loaded
// again under the same number still holds them, which then keeps counting.
class VersionMetrics final : public serve::VersionObserver {
 public:
  VersionMetrics(Registry& registry, const std::vector<std::string>& labels,
                 const std::vector<double>& buckets_seconds, bool summaries, bool is_ensemble)
      : success_(Hold(registry.Counter("nv_inference_request_success",
                                       "Number of successful inference requests, all batch sizes",
                                       kModelLabels),
                      labels)),
        inference_count_(
            Hold(registry.Counter("nv_inference_count",
                                  "Number of inferences performed (batch items)", kModelLabels),
                 labels)),
        execution_count_(
            Hold(registry.Counter("nv_inference_exec_count", "Number of model executions performed",
                                  kModelLabels),
                 labels)),
        request_us_(DurationCounter(registry, "request", "end-to-end inference request", labels)),
        queue_us_(DurationCounter(registry, "queue", "queue", labels)),
        input_us_(DurationCounter(registry, "compute_input", "compute input", labels)),
        infer_us_(DurationCounter(registry, "compute_infer", "compute infer", labels)),
        output_us_(DurationCounter(registry, "compute_output", "compute output", labels)),
        load_seconds_(Hold(
            registry.Gauge("nv_model_load_duration_secs",
                           "Time the last load of a model version took, in seconds", kModelLabels),
            labels)),
        request_histogram_(
            Histogram(registry, "request", "End-to-end request", labels, buckets_seconds)),
        queue_histogram_(Histogram(registry, "queue", "Queue", labels, buckets_seconds)),
        infer_histogram_(Histogram(registry, "compute_infer", "Model execution (compute infer)",
                                   labels, buckets_seconds)) {
    auto& failures = registry.Counter("nv_inference_request_failure",
                                      "Number of failed inference requests, all batch sizes",
                                      {"model", "version", "reason"});
    for (int reason = 0; reason < serve::kFailureReasons; ++reason) {
      failures_[static_cast<size_t>(reason)] =
          &Hold(failures, {labels[0], labels[1],
                           serve::FailureReasonName(static_cast<serve::FailureReason>(reason))});
    }
    if (is_ensemble) {
      alignment_ = &Hold(registry.Histogram("rampart_ensemble_alignment_seconds",
                                            "Spread between the finish times of an ensemble's "
                                            "parallel branches, in seconds",
                                            kModelLabels, buckets_seconds),
                         labels, HistogramOptions{buckets_seconds});
    }
    if (summaries) {
      request_summary_ = &Summary(registry, "request", labels);
      queue_summary_ = &Summary(registry, "queue", labels);
      infer_summary_ = &Summary(registry, "compute_infer", labels);
    }
  }

  ~VersionMetrics() override {
    for (auto& release : releases_) release();
  }
  VersionMetrics(const VersionMetrics&) = delete;
  VersionMetrics& operator=(const VersionMetrics&) = delete;

  void OnLoaded(double seconds) override { load_seconds_.Set(seconds); }

  void OnExecution(uint64_t) override { execution_count_.Increment(); }

  void OnSuccess(const serve::RequestTiming& timing, int64_t total_ns,
                 uint64_t batch_items) override {
    success_.Increment();
    inference_count_.Increment(batch_items);
    const double total_us = static_cast<double>(total_ns) / 1e3;
    const double queue_us = static_cast<double>(timing.queue_ns) / 1e3;
    const double infer_us = static_cast<double>(timing.compute_infer_ns) / 1e3;
    request_us_.Add(total_us);
    queue_us_.Add(queue_us);
    input_us_.Add(static_cast<double>(timing.compute_input_ns) / 1e3);
    infer_us_.Add(infer_us);
    output_us_.Add(static_cast<double>(timing.compute_output_ns) / 1e3);
    request_histogram_.Observe(total_us / 1e6);
    queue_histogram_.Observe(queue_us / 1e6);
    infer_histogram_.Observe(infer_us / 1e6);
    if (request_summary_ != nullptr) {
      request_summary_->Observe(total_us);
      queue_summary_->Observe(queue_us);
      infer_summary_->Observe(infer_us);
    }
  }

  void OnFailure(serve::FailureReason reason, int64_t) override {
    failures_[static_cast<size_t>(reason)]->Increment();
  }

  void OnEnsembleAlignment(int64_t alignment_ns) override {
    if (alignment_ != nullptr) alignment_->Observe(static_cast<double>(alignment_ns) / 1e9);
  }

 private:
  // The child of `family` for `labels`, held until this version's metrics go.
  template <typename Metric, typename... Options>
  Metric& Hold(Family<Metric>& family, const std::vector<std::string>& labels,
               const Options&... options) {
    Metric& metric = family.Hold(labels, options...);
    releases_.push_back([&family, labels] { family.Release(labels); });
    return metric;
  }

  Counter& DurationCounter(Registry& registry, std::string_view stage, std::string_view what,
                           const std::vector<std::string>& labels) {
    return Hold(
        registry.Counter(
            fmt::format("nv_inference_{}_duration_us", stage),
            fmt::format("Cumulative {} duration in microseconds (successful requests)", what),
            kModelLabels),
        labels);
  }

  metrics::Histogram& Histogram(Registry& registry, std::string_view stage, std::string_view what,
                                const std::vector<std::string>& labels,
                                const std::vector<double>& buckets_seconds) {
    return Hold(registry.Histogram(
                    fmt::format("rampart_inference_{}_duration_seconds", stage),
                    fmt::format("{} duration of successful inference requests, in seconds", what),
                    kModelLabels, buckets_seconds),
                labels, HistogramOptions{buckets_seconds});
  }

  metrics::Summary& Summary(Registry& registry, std::string_view stage,
                            const std::vector<std::string>& labels) {
    return Hold(registry.Summary(
                    fmt::format("nv_inference_{}_summary_us", stage),
                    fmt::format("Summary of {} durations in microseconds (Triton's name)", stage),
                    kModelLabels),
                labels);
  }

  // First: the helpers above fill it while the members below are initialized.
  std::vector<std::function<void()>> releases_;
  Counter& success_;
  Counter& inference_count_;
  Counter& execution_count_;
  Counter& request_us_;
  Counter& queue_us_;
  Counter& input_us_;
  Counter& infer_us_;
  Counter& output_us_;
  Gauge& load_seconds_;
  metrics::Histogram& request_histogram_;
  metrics::Histogram& queue_histogram_;
  metrics::Histogram& infer_histogram_;
  std::array<Counter*, serve::kFailureReasons> failures_{};
  metrics::Histogram* alignment_ = nullptr;
  metrics::Summary* request_summary_ = nullptr;
  metrics::Summary* queue_summary_ = nullptr;
  metrics::Summary* infer_summary_ = nullptr;
};

// Reads queue depths and canary states at scrape time; the series of versions no longer loaded
// and of canaries no longer running go (Triton drops an unloaded model's metrics), instead of
// keeping their last value.
class ServerCollector final : public Collector {
 public:
  ServerCollector(Registry& registry, const serve::InferenceServer& server)
      : pending_(registry.Gauge("nv_inference_pending_request_count",
                                "Instantaneous number of requests waiting for a model instance",
                                kModelLabels)),
        busy_(registry.Gauge(
            "rampart_model_busy_instances",
            "Instantaneous number of a model version's instances executing a batch", kModelLabels)),
        canary_weight_(registry.Gauge(
            "rampart_canary_weight_percent",
            "Share of a model's unversioned traffic sent to its canary candidate", {"model"})),
        canary_stage_(registry.Gauge("rampart_canary_stage", "Index of the canary's current stage",
                                     {"model"})),
        canary_state_(
            registry.Gauge("rampart_canary_state",
                           "1 for the canary's current state (RUNNING, PROMOTED, ROLLED_BACK)",
                           {"model", "state"})),
        server_(server) {}

  void Collect() override {
    std::set<std::vector<std::string>> loaded;
    for (const auto& version : server_.AllModels()) {
      std::vector<std::string> labels = {version->name(), std::to_string(version->version())};
      pending_.WithLabels(labels).Set(static_cast<double>(version->QueueSize()));
      busy_.WithLabels(labels).Set(static_cast<double>(version->BusyInstances()));
      loaded.insert(std::move(labels));
    }
    for (GaugeFamily* family : {&pending_, &busy_}) {
      family->RemoveChildrenIf([&](const auto& labels) { return !loaded.contains(labels); });
    }
    std::set<std::string> canaries;
    for (const auto& [model, status] : server_.Canaries()) {
      canaries.insert(model);
      canary_weight_.WithLabels({model}).Set(status.weight_percent);
      canary_stage_.WithLabels({model}).Set(static_cast<double>(status.stage));
      for (auto state : {serve::CanaryState::kRunning, serve::CanaryState::kPromoted,
                         serve::CanaryState::kRolledBack}) {
        canary_state_.WithLabels({model, serve::CanaryStateName(state)})
            .Set(status.state == state ? 1 : 0);
      }
    }
    const auto ended = [&](const std::vector<std::string>& labels) {
      return !canaries.contains(labels[0]);  // the model label comes first
    };
    for (GaugeFamily* family : {&canary_weight_, &canary_stage_, &canary_state_}) {
      family->RemoveChildrenIf(ended);
    }
  }

 private:
  GaugeFamily& pending_;
  GaugeFamily& busy_;
  GaugeFamily& canary_weight_;
  GaugeFamily& canary_stage_;
  GaugeFamily& canary_state_;
  const serve::InferenceServer& server_;
};

}  // namespace

Result<std::vector<double>> ParseMicrosecondBuckets(std::string_view text) {
  ASSIGN_OR_RETURN(std::vector<double> microseconds, ParseHistogramBuckets(text));
  RETURN_IF_ERROR(ValidateHistogramBuckets(ToSeconds(microseconds)).WithContext("in seconds"));
  return microseconds;
}

ServeMetrics::ServeMetrics(Registry& registry, ServeMetricsOptions options)
    : registry_(registry), options_(std::move(options)) {}

ServeMetrics::~ServeMetrics() = default;

void ServeMetrics::WatchQueues(const serve::InferenceServer& server) {
  registry_.AddCollector(std::make_unique<ServerCollector>(registry_, server));
}

std::unique_ptr<serve::VersionObserver> ServeMetrics::ForVersion(const model::ModelConfig& config,
                                                                 int64_t version) {
  std::vector<double> buckets_us = options_.histogram_buckets_us;
  auto parameter = config.parameters().find(std::string(kModelBucketsParameter));
  if (parameter != config.parameters().end()) {
    Result<std::vector<double>> parsed = ParseMicrosecondBuckets(parameter->second.string_value());
    if (parsed.ok()) {
      buckets_us = std::move(parsed).value();
    } else {
      LOG_WARN("model '{}': parameters.{}: {}; using the server's buckets", config.name(),
               kModelBucketsParameter, parsed.status().message());
    }
  }
  const std::vector<std::string> labels = {config.name(), std::to_string(version)};
  return std::make_unique<VersionMetrics>(registry_, labels, ToSeconds(buckets_us),
                                          options_.summaries,
                                          config.platform() == model::kEnsemblePlatform);
}

}  // namespace rampart::metrics
