#include "metrics/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>

#include "core/check.h"
#include "core/strings.h"

namespace rampart::metrics {
namespace {

// The hot-path promise in metrics.h.
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<int64_t>::is_always_lock_free);
static_assert(std::atomic<double>::is_always_lock_free);

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

// ---- Counter ----------------------------------------------------------------------------------

Counter::Counter(const Options& /*options*/) {}

void Counter::Add(double amount) {
  if (!(amount >= 0.0)) return;  // negative or NaN
  fractional_.fetch_add(amount, std::memory_order_relaxed);
}

double Counter::Value() const {
  return static_cast<double>(integer_.load(std::memory_order_relaxed)) +
         fractional_.load(std::memory_order_relaxed);
}

// ---- Gauge ------------------------------------------------------------------------------------

Gauge::Gauge(const Options& /*options*/) {}

// ---- Histogram --------------------------------------------------------------------------------

Status ValidateHistogramBuckets(std::span<const double> bounds) {
  if (bounds.empty()) return InvalidArgument("histogram buckets: at least one bound is needed");
  if (bounds.size() > kMaxHistogramBuckets) {
    return InvalidArgument("histogram buckets: {} bounds given, at most {} allowed", bounds.size(),
                           kMaxHistogramBuckets);
  }
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i])) {
      return InvalidArgument(
          "histogram buckets: bound {} is not a finite number (the +Inf bucket is implicit)",
          i + 1);
    }
    if (i > 0 && !(bounds[i] > bounds[i - 1])) {
      return InvalidArgument(
          "histogram buckets: bounds must be strictly increasing, but bound {} ({}) follows {}",
          i + 1, bounds[i], bounds[i - 1]);
    }
  }
  return Status::Ok();
}

Result<std::vector<double>> ParseHistogramBuckets(std::string_view text) {
  std::string_view list = TrimWhitespace(text);
  if (list.starts_with('[') && list.ends_with(']'))
    list = TrimWhitespace(list.substr(1, list.size() - 2));
  if (list.empty()) return InvalidArgument("histogram buckets: the list is empty");

  std::vector<double> bounds;
  size_t position = 0;
  while (true) {
    size_t comma = list.find(',', position);
    std::string_view entry = TrimWhitespace(
        list.substr(position, comma == std::string_view::npos ? comma : comma - position));
    // from_chars reads no leading '+'; allow it for numbers only ("+Inf" is still rejected below).
    std::string_view digits = entry;
    if (digits.size() > 1 && digits[0] == '+' && digits[1] != '-' && digits[1] != '+') {
      digits.remove_prefix(1);
    }
    double value = 0.0;
    auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (entry.empty() || error != std::errc() || end != digits.data() + digits.size()) {
      return InvalidArgument("histogram buckets: entry {} ('{}') is not a number",
                             bounds.size() + 1, entry);
    }
    bounds.push_back(value);
    if (comma == std::string_view::npos) break;
    position = comma + 1;
  }
  RETURN_IF_ERROR(ValidateHistogramBuckets(bounds));
  return bounds;
}

Histogram::Histogram(const Options& options)
    : bounds_(options.bounds),
      buckets_(std::make_unique<std::atomic<uint64_t>[]>(options.bounds.size() + 1)) {
  CHECK(ValidateHistogramBuckets(bounds_).ok());
}

void Histogram::Observe(double value) {
  if (std::isnan(value)) return;
  // Inclusive upper bounds: the first bound >= value. Lists are short; lower_bound keeps it cheap
  // for long ones too.
  size_t index = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  buckets_[index].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

HistogramSnapshot Histogram::Snapshot() const {
  HistogramSnapshot snapshot;
  snapshot.bounds = bounds_;
  snapshot.cumulative.resize(bounds_.size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    snapshot.cumulative[i] = running;
  }
  snapshot.count = running;
  snapshot.sum = sum_.load(std::memory_order_relaxed);
  return snapshot;
}

// ---- Summary ----------------------------------------------------------------------------------

Summary::Summary(const Options& options)
    : quantiles_(options.quantiles),
      window_size_(options.window_size),
      max_age_(options.max_age),
      clock_(options.clock != nullptr ? *options.clock : Clock::Real()),
      samples_(std::make_unique<std::atomic<double>[]>(options.window_size)),
      sample_times_(std::make_unique<std::atomic<int64_t>[]>(options.window_size)) {
  CHECK(window_size_ > 0);
  for (size_t i = 0; i < quantiles_.size(); ++i) {
    CHECK(quantiles_[i] >= 0.0 && quantiles_[i] <= 1.0);
    CHECK(i == 0 || quantiles_[i] > quantiles_[i - 1]);
  }
  for (size_t i = 0; i < window_size_; ++i) samples_[i].store(kNaN, std::memory_order_relaxed);
}

void Summary::Observe(double value) {
  if (std::isnan(value)) return;
  size_t slot = next_.fetch_add(1, std::memory_order_relaxed) % window_size_;
  if (max_age_.count() > 0) {
    sample_times_[slot].store(clock_.Now().time_since_epoch().count(), std::memory_order_relaxed);
  }
  samples_[slot].store(value, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

SummarySnapshot Summary::Snapshot() const {
  SummarySnapshot snapshot;
  snapshot.count = next_.load(std::memory_order_relaxed);
  snapshot.sum = sum_.load(std::memory_order_relaxed);

  const bool check_age = max_age_.count() > 0;
  const int64_t oldest = check_age ? (clock_.Now() - max_age_).time_since_epoch().count() : 0;
  std::vector<double> window;
  window.reserve(std::min<uint64_t>(snapshot.count, window_size_));
  for (size_t i = 0; i < window_size_; ++i) {
    double value = samples_[i].load(std::memory_order_relaxed);
    if (std::isnan(value)) continue;  // never written
    if (check_age && sample_times_[i].load(std::memory_order_relaxed) < oldest) continue;
    window.push_back(value);
  }
  std::sort(window.begin(), window.end());
  for (double quantile : quantiles_) {
    double value = kNaN;
    if (!window.empty()) {
      // Nearest rank: the smallest sample with at least quantile * n samples at or below it.
      size_t rank = static_cast<size_t>(std::ceil(quantile * static_cast<double>(window.size())));
      value = window[rank == 0 ? 0 : rank - 1];
    }
    snapshot.quantiles.emplace_back(quantile, value);
  }
  return snapshot;
}

}  // namespace rampart::metrics
