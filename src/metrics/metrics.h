#pragma once

// The four Prometheus metric kinds as lock-free children of a metric family, plus the parser for
// histogram bucket lists given on the command line or in a model's parameters.
//
// Ownership: a Registry's family creates and owns each child (see registry.h); the reference it
// hands out stays valid for the registry's life, so the serving hot path keeps it and never looks
// anything up again.
//
// Thread safety: every method on Counter, Gauge, Histogram and Summary may be called from any
// thread at any time. Increment/Add/Set/Observe are lock-free (std::atomic, relaxed ordering: a
// metric orders nothing else) and never allocate. Readers (Value, Snapshot) see each atomic at
// some recent value; a Histogram snapshot is always self-consistent (cumulative buckets never
// decrease and `+Inf` equals `count`), though `sum` may not yet include observations that are
// still in flight.

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/status.h"

namespace rampart::metrics {

// A monotonic total. Integer increments are exact up to 2^53 as exposed (a float in the text
// format); fractional amounts go through Add(double).
class Counter {
 public:
  static constexpr std::string_view kTypeName = "counter";
  struct Options {};

  explicit Counter(const Options& options = {});

  void Increment(uint64_t amount = 1) { integer_.fetch_add(amount, std::memory_order_relaxed); }
  // Adds a non-negative amount. Negative and NaN amounts are ignored: a counter never goes down.
  void Add(double amount);

  double Value() const;

 private:
  std::atomic<uint64_t> integer_{0};
  std::atomic<double> fractional_{0.0};
};

// A value that goes up and down (queue depth, memory in use).
class Gauge {
 public:
  static constexpr std::string_view kTypeName = "gauge";
  struct Options {};

  explicit Gauge(const Options& options = {});

  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double amount) { value_.fetch_add(amount, std::memory_order_relaxed); }
  void Increment() { Add(1.0); }
  void Decrement() { Add(-1.0); }

  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// Default bucket bounds of the latency histograms, in microseconds: 10 µs to 5 s in 1-2.5-5
// steps, 18 bounds (19 series with +Inf per histogram and model version).
//
// Why this range: it is the range of this server's own latencies. A small model executed on the
// thread that read its request (the example `simple`) is answered within 5 to 100 µs of the
// request being read, and a request that finds an idle instance queues for a few µs; a batching
// model's requests wait out its queue delay (milliseconds), and a large model or batch computes
// for tens to hundreds of ms; past 5 s a request is better counted in +Inf than resolved. Three
// bounds per decade keep each bucket within 2.5 times its lower bound, so a quantile
// histogram_quantile interpolates in a bucket is off by less than that factor at any scale, and
// nothing under a millisecond falls into one coarse first bucket.
inline constexpr std::array<double, 18> kDefaultDurationBucketsUs = {
    10,    25,    50,    100,    250,    500,    1000,    2500,    5000,
    10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000, 5000000};
// The same list as the --metrics-histogram-buckets flag spells it (for --help and the docs;
// a unit test keeps the two equal).
inline constexpr std::string_view kDefaultDurationBucketsUsText =
    "10,25,50,100,250,500,1000,2500,5000,10000,25000,50000,100000,250000,500000,1000000,"
    "2500000,5000000";

// At most this many bounds per histogram; each is one time series per label set.
inline constexpr size_t kMaxHistogramBuckets = 256;

// OK when `bounds` is a non-empty list of at most kMaxHistogramBuckets finite, strictly
// increasing numbers (the `+Inf` bucket is implicit); InvalidArgument saying what is wrong
// otherwise.
Status ValidateHistogramBuckets(std::span<const double> bounds);

// Parses "1000,5000,10000" (spaces allowed around numbers, optional surrounding "[...]") into
// bucket upper bounds in the unit of the metric. InvalidArgument naming the offending entry when
// an entry is not a number, the list is empty, or ValidateHistogramBuckets fails. For the
// --metrics-histogram-buckets flag and the per-model parameter of the same meaning.
Result<std::vector<double>> ParseHistogramBuckets(std::string_view text);

struct HistogramSnapshot {
  std::vector<double> bounds;        // upper bounds, without +Inf
  std::vector<uint64_t> cumulative;  // bounds.size() + 1 entries; the last one is +Inf
  uint64_t count = 0;                // == cumulative.back()
  double sum = 0.0;
};

// Declared outside Histogram so that `= {}` default arguments can use its member initializers.
struct HistogramOptions {
  // Upper bounds in the unit of the metric, without +Inf.
  std::vector<double> bounds{kDefaultDurationBucketsUs.begin(), kDefaultDurationBucketsUs.end()};
};

// Counts observations into buckets with inclusive upper bounds (v <= le), Prometheus style.
class Histogram {
 public:
  static constexpr std::string_view kTypeName = "histogram";
  using Options = HistogramOptions;

  // REQUIRES: ValidateHistogramBuckets(options.bounds).ok() (CHECKed).
  explicit Histogram(const Options& options = {});

  // NaN observations are ignored.
  void Observe(double value);

  HistogramSnapshot Snapshot() const;
  std::span<const double> bounds() const { return bounds_; }

 private:
  const std::vector<double> bounds_;
  // Non-cumulative: bucket i counts bounds_[i-1] < v <= bounds_[i]; the last is (max, +Inf).
  // The total count is their sum, which is what keeps snapshots consistent.
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;
  std::atomic<double> sum_{0.0};
};

struct SummarySnapshot {
  std::vector<std::pair<double, double>> quantiles;  // (quantile, value); NaN value when empty
  uint64_t count = 0;                                // all observations ever
  double sum = 0.0;
};

struct SummaryOptions {
  std::vector<double> quantiles = {0.5, 0.9, 0.99};  // each in [0, 1], increasing
  size_t window_size = 1024;                         // observations kept for quantiles
  Nanoseconds max_age{0};                            // 0: no age limit
  const Clock* clock = nullptr;                      // for max_age; nullptr: Clock::Real()
};

// Quantiles over the most recent `window_size` observations (optionally only those younger than
// `max_age`), with `_sum` and `_count` over all observations. Quantiles are exact over that
// window (nearest rank), computed at snapshot time; Observe stays lock-free by writing into a
// ring of atomics, so a snapshot racing with writers may miss the newest few observations.
class Summary {
 public:
  static constexpr std::string_view kTypeName = "summary";
  using Options = SummaryOptions;

  // REQUIRES: quantiles within [0, 1] and strictly increasing, window_size > 0 (CHECKed).
  // `options.clock`, when given, must outlive the summary.
  explicit Summary(const Options& options = {});

  // NaN observations are ignored.
  void Observe(double value);

  SummarySnapshot Snapshot() const;

 private:
  const std::vector<double> quantiles_;
  const size_t window_size_;
  const Nanoseconds max_age_;
  const Clock& clock_;
  std::unique_ptr<std::atomic<double>[]> samples_;        // NaN until written
  std::unique_ptr<std::atomic<int64_t>[]> sample_times_;  // steady nanos; used with max_age
  std::atomic<uint64_t> next_{0};  // observations so far; the next one goes to next_ % window_size_
  std::atomic<double> sum_{0.0};
};

}  // namespace rampart::metrics
