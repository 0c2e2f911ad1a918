#include "metrics/metrics.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "metrics/process_collector.h"
#include "metrics/registry.h"
#include "metrics/text_format.h"

namespace rampart::metrics {
namespace {

constexpr int kThreads = 8;
constexpr int kPerThread = 100000;

template <typename Body>
void RunThreads(Body body) {
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back([&body, t] { body(t); });
  for (std::thread& thread : threads) thread.join();
}

class FakeClock final : public Clock {
 public:
  SteadyTime Now() const override { return now_; }
  void Advance(Nanoseconds by) { now_ += by; }

 private:
  SteadyTime now_{};
};

// ---- Counter and Gauge --------------------------------------------------------------------------

TEST(Counter, CountsExactlyAfterKnownIncrements) {
  Counter counter;
  counter.Increment();
  counter.Increment(41);
  EXPECT_EQ(counter.Value(), 42.0);
  counter.Add(0.5);
  EXPECT_EQ(counter.Value(), 42.5);
}

TEST(Counter, IgnoresNegativeAndNaNAmounts) {
  Counter counter;
  counter.Add(2.0);
  counter.Add(-1.0);
  counter.Add(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(counter.Value(), 2.0);
}

TEST(Counter, CountsExactlyFromManyThreads) {
  Counter counter;
  RunThreads([&](int) {
    for (int i = 0; i < kPerThread; ++i) {
      counter.Increment();
      counter.Add(0.25);  // exact in binary, so the double sum must be exact too
    }
  });
  EXPECT_EQ(counter.Value(), kThreads * kPerThread * 1.25);
}

TEST(Gauge, SetsAddsAndCountsUpAndDownFromManyThreads) {
  Gauge gauge;
  gauge.Set(10);
  gauge.Add(-2.5);
  EXPECT_EQ(gauge.Value(), 7.5);
  RunThreads([&](int t) {
    for (int i = 0; i < kPerThread; ++i) {
      gauge.Increment();
      if (t % 2 == 0) gauge.Decrement();
    }
  });
  EXPECT_EQ(gauge.Value(), 7.5 + kThreads / 2 * kPerThread);
}

// ---- Histogram ----------------------------------------------------------------------------------

TEST(Histogram, BucketsAreCumulativeWithInclusiveUpperBounds) {
  Histogram histogram({.bounds = {1, 5, 10}});
  for (double value : {0.5, 1.0, 1.5, 5.0, 7.0, 10.0, 11.0, 1000.0}) histogram.Observe(value);
  HistogramSnapshot snapshot = histogram.Snapshot();
  EXPECT_EQ(snapshot.bounds, (std::vector<double>{1, 5, 10}));
  EXPECT_EQ(snapshot.cumulative, (std::vector<uint64_t>{2, 4, 6, 8}));
  EXPECT_EQ(snapshot.count, 8u);
  EXPECT_EQ(snapshot.sum, 1036.0);
}

TEST(Histogram, IgnoresNaNAndCountsInfinityInTheLastBucket) {
  Histogram histogram({.bounds = {1}});
  histogram.Observe(std::numeric_limits<double>::quiet_NaN());
  histogram.Observe(-std::numeric_limits<double>::infinity());
  histogram.Observe(std::numeric_limits<double>::infinity());
  HistogramSnapshot snapshot = histogram.Snapshot();
  EXPECT_EQ(snapshot.cumulative, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(snapshot.count, 2u);
}

TEST(Histogram, CountsExactlyFromManyThreadsAndStaysConsistentWhileRead) {
  Histogram histogram({.bounds = {10, 100, 1000}});
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) {
      HistogramSnapshot snapshot = histogram.Snapshot();
      for (size_t i = 1; i < snapshot.cumulative.size(); ++i) {
        ASSERT_LE(snapshot.cumulative[i - 1], snapshot.cumulative[i]);
      }
      ASSERT_EQ(snapshot.cumulative.back(), snapshot.count);
    }
  });
  RunThreads([&](int t) {
    for (int i = 0; i < kPerThread; ++i) histogram.Observe((i % 4) * 100 + t);  // integers: exact
  });
  done = true;
  reader.join();

  HistogramSnapshot snapshot = histogram.Snapshot();
  const uint64_t total = uint64_t{kThreads} * kPerThread;
  EXPECT_EQ(snapshot.count, total);
  // Per thread t: a quarter each of t, 100+t, 200+t, 300+t.
  EXPECT_EQ(snapshot.cumulative[0], total / 4);                   // t <= 10
  EXPECT_EQ(snapshot.cumulative[1], total / 4 + kPerThread / 4);  // only t == 0 adds 100 <= 100
  EXPECT_EQ(snapshot.cumulative[2], total);
  EXPECT_EQ(snapshot.cumulative[3], total);
  double expected_sum = 0;
  for (int t = 0; t < kThreads; ++t) expected_sum += kPerThread / 4 * (600.0 + 4 * t);
  EXPECT_EQ(snapshot.sum, expected_sum);
}

// ---- Summary ------------------------------------------------------------------------------------

TEST(Summary, ReportsNearestRankQuantilesAndTotals) {
  Summary summary({.quantiles = {0, 0.5, 0.9, 0.99, 1}});
  for (int i = 100; i >= 1; --i) summary.Observe(i);
  SummarySnapshot snapshot = summary.Snapshot();
  EXPECT_EQ(snapshot.count, 100u);
  EXPECT_EQ(snapshot.sum, 5050.0);
  std::vector<std::pair<double, double>> expected = {
      {0, 1}, {0.5, 50}, {0.9, 90}, {0.99, 99}, {1, 100}};
  EXPECT_EQ(snapshot.quantiles, expected);
}

TEST(Summary, QuantilesCoverOnlyTheWindowButTotalsCoverEverything) {
  Summary summary({.quantiles = {0.5}, .window_size = 10});
  for (int i = 1; i <= 1000; ++i) summary.Observe(i <= 990 ? 1 : 5);
  SummarySnapshot snapshot = summary.Snapshot();
  EXPECT_EQ(snapshot.count, 1000u);
  EXPECT_EQ(snapshot.sum, 990.0 + 50.0);
  EXPECT_EQ(snapshot.quantiles[0].second, 5.0);
}

TEST(Summary, EmptyOrAgedOutWindowGivesNaN) {
  FakeClock clock;
  Summary summary({.quantiles = {0.5}, .max_age = std::chrono::seconds(10), .clock = &clock});
  EXPECT_TRUE(std::isnan(summary.Snapshot().quantiles[0].second));
  summary.Observe(3);
  clock.Advance(std::chrono::seconds(5));
  summary.Observe(7);
  EXPECT_EQ(summary.Snapshot().quantiles[0].second, 3.0);
  clock.Advance(std::chrono::seconds(6));  // the 3 is now 11 s old
  EXPECT_EQ(summary.Snapshot().quantiles[0].second, 7.0);
  clock.Advance(std::chrono::seconds(5));
  SummarySnapshot snapshot = summary.Snapshot();
  EXPECT_TRUE(std::isnan(snapshot.quantiles[0].second));
  EXPECT_EQ(snapshot.count, 2u);
}

TEST(Summary, CountsExactlyFromManyThreads) {
  Summary summary({.window_size = 64});
  RunThreads([&](int) {
    for (int i = 0; i < kPerThread; ++i) summary.Observe(2);
  });
  SummarySnapshot snapshot = summary.Snapshot();
  EXPECT_EQ(snapshot.count, uint64_t{kThreads} * kPerThread);
  EXPECT_EQ(snapshot.sum, 2.0 * kThreads * kPerThread);
  EXPECT_EQ(snapshot.quantiles[0].second, 2.0);
}

// ---- Bucket lists -------------------------------------------------------------------------------

TEST(ParseHistogramBuckets, ReadsCommaSeparatedNumbers) {
  EXPECT_EQ(*ParseHistogramBuckets("1000,5000,10000"), (std::vector<double>{1000, 5000, 10000}));
  EXPECT_EQ(*ParseHistogramBuckets(" [0.5, 1 ,2.5e3, +4e3] "),
            (std::vector<double>{0.5, 1, 2500, 4000}));
  EXPECT_EQ(*ParseHistogramBuckets("-1,0"), (std::vector<double>{-1, 0}));
}

TEST(ParseHistogramBuckets, RejectsBadInputWithAClearMessage) {
  struct Case {
    std::string text;
    std::string message;
  };
  std::vector<Case> cases = {
      {"", "histogram buckets: the list is empty"},
      {"[ ]", "histogram buckets: the list is empty"},
      {"1,,2", "histogram buckets: entry 2 ('') is not a number"},
      {"1,2,", "histogram buckets: entry 3 ('') is not a number"},
      {"1, fast", "histogram buckets: entry 2 ('fast') is not a number"},
      {"1ms", "histogram buckets: entry 1 ('1ms') is not a number"},
      {"1 2", "histogram buckets: entry 1 ('1 2') is not a number"},
      {"1e999", "histogram buckets: entry 1 ('1e999') is not a number"},
      {"++1", "histogram buckets: entry 1 ('++1') is not a number"},
      {"5,1", "histogram buckets: bounds must be strictly increasing, but bound 2 (1) follows 5"},
      {"1,1", "histogram buckets: bounds must be strictly increasing, but bound 2 (1) follows 1"},
      {"1,+Inf", "histogram buckets: bound 2 is not a finite number (the +Inf bucket is implicit)"},
      {"nan", "histogram buckets: bound 1 is not a finite number (the +Inf bucket is implicit)"},
  };
  for (const Case& c : cases) {
    Result<std::vector<double>> result = ParseHistogramBuckets(c.text);
    ASSERT_FALSE(result.ok()) << c.text;
    EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument) << c.text;
    EXPECT_EQ(result.status().message(), c.message) << c.text;
  }
  std::string too_many;
  for (size_t i = 0; i <= kMaxHistogramBuckets; ++i) too_many += std::to_string(i) + ",";
  too_many.pop_back();
  EXPECT_EQ(ParseHistogramBuckets(too_many).status().message(),
            "histogram buckets: 257 bounds given, at most 256 allowed");
}

// ---- Text format --------------------------------------------------------------------------------

TEST(TextFormat, FormatsNumbersAsPrometheusReadsThem) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(42), "42");
  EXPECT_EQ(FormatValue(-7), "-7");
  EXPECT_EQ(FormatValue(1000000), "1000000");
  EXPECT_EQ(FormatValue(1e300), "1e+300");
  EXPECT_EQ(FormatValue(18446744073709551615.0), "18446744073709551616");  // shorter than 1.8e+19
  EXPECT_EQ(FormatValue(0.25), "0.25");
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(FormatValue(1e-7), "1e-07");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::quiet_NaN()), "NaN");
}

TEST(TextFormat, EscapesLabelValuesAndHelp) {
  std::string label;
  AppendEscapedLabelValue(label, "a\"b\\c\nd é");
  EXPECT_EQ(label, R"(a\"b\\c\nd é)");
  std::string help;
  AppendEscapedHelp(help, "say \"hi\"\\\nbye");
  EXPECT_EQ(help, "say \"hi\"\\\\\\nbye");
}

TEST(TextFormat, ReplacesInvalidUtf8) {
  std::string label;
  // A stray continuation byte, a truncated sequence, an overlong '/' and a surrogate.
  AppendEscapedLabelValue(label,
                          "a\x80"
                          "b\xE2\x82"
                          "c\xC0\xAF"
                          "d\xED\xA0\x80");
  EXPECT_EQ(label, "a\uFFFDb\uFFFD\uFFFDc\uFFFD\uFFFDd\uFFFD\uFFFD\uFFFD");
}

TEST(TextFormat, ChecksNames) {
  EXPECT_TRUE(IsValidMetricName("nv_inference_count"));
  EXPECT_TRUE(IsValidMetricName("job:rate5m"));
  EXPECT_FALSE(IsValidMetricName("1abc"));
  EXPECT_FALSE(IsValidMetricName("a-b"));
  EXPECT_FALSE(IsValidMetricName(""));
  EXPECT_TRUE(IsValidLabelName("model"));
  EXPECT_FALSE(IsValidLabelName("__name__"));
  EXPECT_FALSE(IsValidLabelName("a:b"));
}

// ---- Registry -----------------------------------------------------------------------------------

TEST(Registry, WritesGoldenExpositionForATinyRegistry) {
  Registry registry;
  CounterFamily& inferences = registry.Counter(
      "nv_inference_count", "Number of inferences performed", {"model", "version"});
  inferences.WithLabels({"simple", "1"}).Increment(3);
  inferences.WithLabels({"add \"sub\"\\", "2"}).Increment();
  registry
      .Gauge("nv_inference_pending_request_count", "Instantaneous number of pending requests",
             {"model", "version"})
      .WithLabels({"simple", "1"})
      .Set(2);
  Histogram& durations = registry
                             .Histogram("rampart_inference_request_duration_us",
                                        "Request duration\nin microseconds", {"model"}, {100, 1000})
                             .WithLabels({"simple"});
  durations.Observe(50);
  durations.Observe(100);
  durations.Observe(2000.5);
  registry.Summary("queue_summary_us", "Queue time", {}, {.quantiles = {0.5, 0.99}})
      .WithLabels({})
      .Observe(7);
  registry.Gauge("unused_gauge", "Has labels but no children", {"model"});

  EXPECT_EQ(registry.Exposition(),
            R"(# HELP nv_inference_count Number of inferences performed
# TYPE nv_inference_count counter
nv_inference_count{model="add \"sub\"\\",version="2"} 1
nv_inference_count{model="simple",version="1"} 3
# HELP nv_inference_pending_request_count Instantaneous number of pending requests
# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{model="simple",version="1"} 2
# HELP queue_summary_us Queue time
# TYPE queue_summary_us summary
queue_summary_us{quantile="0.5"} 7
queue_summary_us{quantile="0.99"} 7
queue_summary_us_sum 7
queue_summary_us_count 1
# HELP rampart_inference_request_duration_us Request duration\nin microseconds
# TYPE rampart_inference_request_duration_us histogram
rampart_inference_request_duration_us_bucket{model="simple",le="100"} 2
rampart_inference_request_duration_us_bucket{model="simple",le="1000"} 2
rampart_inference_request_duration_us_bucket{model="simple",le="+Inf"} 3
rampart_inference_request_duration_us_sum{model="simple"} 2150.5
rampart_inference_request_duration_us_count{model="simple"} 3
)");
}

TEST(Registry, LabellessFamiliesAreExposedAtZero) {
  Registry registry;
  registry.Counter("requests_total", "Requests");
  EXPECT_EQ(registry.Exposition(),
            "# HELP requests_total Requests\n# TYPE requests_total counter\nrequests_total 0\n");
}

TEST(Registry, ReturnsTheSameFamilyAndStableChildren) {
  Registry registry;
  CounterFamily& family = registry.Counter("c_total", "help", {"model"});
  EXPECT_EQ(&registry.Counter("c_total", "other help", {"model"}), &family);
  Counter& first = family.WithLabels({"a"});
  for (int i = 0; i < 1000; ++i) family.WithLabels({std::to_string(i)}).Increment();
  EXPECT_EQ(&family.WithLabels({"a"}), &first);
  first.Increment(5);
  EXPECT_EQ(family.WithLabels({"a"}).Value(), 5.0);
}

TEST(Registry, RemovedChildrenAreNoLongerExposed) {
  Registry registry;
  GaugeFamily& pending = registry.Gauge("pending", "Pending", {"model", "version"});
  pending.WithLabels({"a", "1"}).Set(3);
  pending.WithLabels({"b", "1"}).Set(4);
  pending.RemoveChildrenIf([](const auto& labels) { return labels[0] == "a"; });
  EXPECT_EQ(registry.Exposition(),
            "# HELP pending Pending\n# TYPE pending gauge\npending{model=\"b\",version=\"1\"} 4\n");
  EXPECT_EQ(pending.WithLabels({"a", "1"}).Value(), 0.0);  // made anew
  pending.RemoveChildrenIf([](const auto&) { return true; });
  EXPECT_EQ(registry.Exposition(), "");
}

TEST(Registry, AHeldChildGoesWithItsLastHolder) {
  Registry registry;
  CounterFamily& success = registry.Counter("success_total", "Successes", {"model"});
  Counter& first = success.Hold({"m"});
  first.Increment(2);
  Counter& second = success.Hold({"m"});  // the same model loaded again under the same labels
  EXPECT_EQ(&second, &first);
  success.Release({"m"});
  second.Increment();
  EXPECT_EQ(registry.Exposition(),
            "# HELP success_total Successes\n# TYPE success_total counter\n"
            "success_total{model=\"m\"} 3\n");
  success.Release({"m"});
  EXPECT_EQ(registry.Exposition(), "");
  EXPECT_EQ(success.Hold({"m"}).Value(), 0.0);  // a new series
}

TEST(Registry, PerChildHistogramBucketsApplyAtCreation) {
  Registry registry;
  HistogramFamily& family = registry.Histogram("h", "help", {"model"}, {1, 2});
  Histogram& custom = family.WithLabels({"a"}, {.bounds = {10, 20, 30}});
  EXPECT_EQ(custom.bounds().size(), 3u);
  EXPECT_EQ(&family.WithLabels({"a"}), &custom);
  EXPECT_EQ(family.WithLabels({"b"}).bounds().size(), 2u);
}

TEST(Registry, ConcurrentRegistrationUpdatesAndScrapesCountExactly) {
  Registry registry;
  std::atomic<bool> done{false};
  std::thread scraper([&] {
    // Every scrape, even mid-update, shows each histogram with +Inf == _count.
    while (!done.load()) {
      std::istringstream lines(registry.Exposition());
      std::map<std::string, std::string> infinity_buckets, counts;
      std::string line;
      while (std::getline(lines, line)) {
        size_t model = line.find("{model=\"");
        if (line.starts_with("d_us_bucket") && line.find("le=\"+Inf\"") != std::string::npos) {
          infinity_buckets[line.substr(model, 10)] = line.substr(line.rfind(' '));
        } else if (line.starts_with("d_us_count")) {
          counts[line.substr(model, 10)] = line.substr(line.rfind(' '));
        }
      }
      ASSERT_EQ(infinity_buckets, counts);
    }
  });
  RunThreads([&](int t) {
    Counter& counter = registry.Counter("nv_inference_count", "help", {"model"}).WithLabels({"m"});
    Histogram& histogram =
        registry.Histogram("d_us", "help", {"model"}, {1, 2}).WithLabels({std::to_string(t % 2)});
    for (int i = 0; i < kPerThread; ++i) {
      counter.Increment();
      histogram.Observe(1);
    }
  });
  done = true;
  scraper.join();
  std::string text = registry.Exposition();
  EXPECT_NE(text.find("nv_inference_count{model=\"m\"} 800000\n"), std::string::npos) << text;
  EXPECT_NE(text.find("d_us_count{model=\"0\"} 400000\n"), std::string::npos) << text;
  EXPECT_NE(text.find("d_us_bucket{model=\"1\",le=\"1\"} 400000\n"), std::string::npos) << text;
}

TEST(RegistryDeathTest, ReusingANameWithAnotherTypeOrLabelsCrashes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Registry registry;
  registry.Counter("x", "help", {"model"});
  EXPECT_DEATH(registry.Gauge("x", "help", {"model"}), "CHECK failed");
  EXPECT_DEATH(registry.Counter("x", "help", {"version"}), "CHECK failed");
  EXPECT_DEATH(registry.Counter("bad-name", "help"), "CHECK failed");
  EXPECT_DEATH(registry.Histogram("h", "help", {"le"}, {1}), "CHECK failed");
  EXPECT_DEATH(registry.Counter("x", "help", {"model"}).WithLabels({}), "CHECK failed");
}

// ---- ProcessCollector ---------------------------------------------------------------------------

class FakeProc {
 public:
  FakeProc() {
    root_ = std::filesystem::temp_directory_path() /
            ("rampart_metrics_proc_" + std::to_string(::getpid()));
    std::filesystem::create_directories(root_ / "self");
  }
  ~FakeProc() { std::filesystem::remove_all(root_); }
  void Write(const std::string& relative, const std::string& contents) {
    std::ofstream(root_ / relative) << contents;
  }
  std::string root() const { return root_.string(); }

 private:
  std::filesystem::path root_;
};

double Sample(const std::string& exposition, const std::string& name) {
  std::istringstream lines(exposition);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.starts_with(name + " ")) return std::stod(line.substr(name.size() + 1));
  }
  ADD_FAILURE() << name << " not in\n" << exposition;
  return -1;
}

TEST(ProcessCollector, ReportsCpuAndMemoryFromProc) {
  FakeProc proc;
  proc.Write("stat", "cpu  100 0 100 700 100 0 0 0 0 0\ncpu0 1 2 3 4\n");
  proc.Write("meminfo",
             "MemTotal:       1000 kB\nMemFree:         100 kB\nMemAvailable:    400 kB\n");
  proc.Write("self/stat",
             "4242 (rampart (a) b) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 12 0 100 1000 77\n");
  proc.Write("self/statm", "5000 300 100 1 0 200 0\n");

  Registry registry;
  registry.AddCollector(std::make_unique<ProcessCollector>(
      registry, ProcessCollector::Options{
                    .proc_root = proc.root(), .ticks_per_second = 100, .page_size = 4096}));
  std::string text = registry.Exposition();
  EXPECT_EQ(Sample(text, "nv_cpu_utilization"), 0.2);  // since boot: 200 busy of 1000
  EXPECT_EQ(Sample(text, "nv_cpu_memory_total_bytes"), 1024000);
  EXPECT_EQ(Sample(text, "nv_cpu_memory_used_bytes"), 614400);
  EXPECT_EQ(Sample(text, "process_cpu_seconds_total"), 3);
  EXPECT_EQ(Sample(text, "process_resident_memory_bytes"), 300 * 4096);

  // 100 more busy and 300 more idle ticks: 25% busy since the previous scrape.
  proc.Write("stat", "cpu  150 0 150 1000 100 0 0 0 0 0\n");
  proc.Write("self/stat",
             "4242 (rampart (a) b) S 1 2 3 4 5 6 7 8 9 10 300 100 0 0 20 0 12 0 100 1000 77\n");
  text = registry.Exposition();
  EXPECT_EQ(Sample(text, "nv_cpu_utilization"), 0.25);
  EXPECT_EQ(Sample(text, "process_cpu_seconds_total"), 4);

  // Unreadable files leave the last values in place.
  std::filesystem::remove(std::filesystem::path(proc.root()) / "stat");
  proc.Write("meminfo", "garbage\n");
  text = registry.Exposition();
  EXPECT_EQ(Sample(text, "nv_cpu_utilization"), 0.25);
  EXPECT_EQ(Sample(text, "nv_cpu_memory_total_bytes"), 1024000);
}

TEST(ProcessCollector, ParsesOldKernelMemInfoWithoutMemAvailable) {
  Result<HostMemory> memory =
      ParseMemInfo("MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 50 kB\nCached: 250 kB\n");
  ASSERT_TRUE(memory.ok());
  EXPECT_EQ(memory->available_bytes, 400u * 1024);
  EXPECT_FALSE(ParseMemInfo("MemFree: 1 kB\n").ok());
  EXPECT_FALSE(ParseProcStat("intr 1 2 3\n").ok());
  EXPECT_FALSE(ParseProcessCpuTicks("42 (x) S 1 2").ok());
  EXPECT_FALSE(ParseResidentPages("12\n").ok());
}

TEST(ProcessCollector, ReadsTheRealProcOnLinux) {
  if (!std::filesystem::exists("/proc/self/stat")) GTEST_SKIP() << "no /proc";
  Registry registry;
  registry.AddCollector(std::make_unique<ProcessCollector>(registry));
  std::string text = registry.Exposition();
  double utilization = Sample(text, "nv_cpu_utilization");
  EXPECT_GE(utilization, 0.0);
  EXPECT_LE(utilization, 1.0);
  EXPECT_GT(Sample(text, "nv_cpu_memory_total_bytes"), 0);
  EXPECT_GT(Sample(text, "nv_cpu_memory_used_bytes"), 0);
  EXPECT_GT(Sample(text, "process_resident_memory_bytes"), 0);
}

// ---- promtool -----------------------------------------------------------------------------------

// A registry shaped like the server's: Triton's names (docs/triton-compatibility.md) per model and
// version, Rampart's latency histograms, a Triton-style summary and the process collector.
void FillRealisticRegistry(Registry& registry) {
  const std::vector<std::string> kModelLabels = {"model", "version"};
  const std::vector<std::vector<std::string>> kModels = {
      {"simple", "1"}, {"resnet50", "3"}, {"we\"ird\\model\nname", "1"}};
  const char* kCounters[][2] = {
      {"nv_inference_request_success", "Number of successful inference requests, all batch sizes"},
      {"nv_inference_count", "Number of inferences performed (does not include cached requests)"},
      {"nv_inference_exec_count", "Number of model executions performed"},
      {"nv_inference_request_duration_us", "Cumulative inference request duration in us"},
      {"nv_inference_queue_duration_us", "Cumulative inference queuing duration in us"},
      {"nv_inference_compute_input_duration_us", "Cumulative compute input duration in us"},
      {"nv_inference_compute_infer_duration_us", "Cumulative compute inference duration in us"},
      {"nv_inference_compute_output_duration_us", "Cumulative inference compute output duration"},
  };
  for (const auto& [name, help] : kCounters) {
    CounterFamily& family = registry.Counter(name, help, kModelLabels);
    for (const auto& model : kModels) family.WithLabels(model).Increment(1234);
  }
  CounterFamily& failures = registry.Counter("nv_inference_request_failure",
                                             "Number of failed inference requests, all batch sizes",
                                             {"model", "version", "reason"});
  for (const char* reason : {"REJECTED", "CANCELED", "BACKEND", "OTHER"}) {
    failures.WithLabels({"simple", "1", reason}).Increment();
  }
  GaugeFamily& pending = registry.Gauge("nv_inference_pending_request_count",
                                        "Instantaneous number of pending requests awaiting "
                                        "execution per-model.",
                                        kModelLabels);
  GaugeFamily& load =
      registry.Gauge("nv_model_load_duration_secs", "Model load time in seconds", kModelLabels);
  for (const auto& model : kModels) {
    pending.WithLabels(model).Set(3);
    load.WithLabels(model).Set(0.125);
  }
  // The server's histograms: default bounds in microseconds, exported in seconds.
  std::vector<double> buckets_seconds;
  for (double us : kDefaultDurationBucketsUs) buckets_seconds.push_back(us / 1e6);
  for (const char* name :
       {"rampart_inference_request_duration_seconds", "rampart_inference_queue_duration_seconds",
        "rampart_inference_compute_infer_duration_seconds"}) {
    HistogramFamily& family = registry.Histogram(name, "Inference request latency in seconds",
                                                 kModelLabels, buckets_seconds);
    for (const auto& model : kModels) {
      Histogram& histogram = family.WithLabels(model);
      for (double value : {0.00003, 0.0015005, 0.07, 2.0, 9.0}) histogram.Observe(value);
    }
    family.WithLabels({"custom", "1"}, {.bounds = {0.0005, 0.25, 10}}).Observe(0.003);
  }
  SummaryFamily& summary =
      registry.Summary("nv_inference_request_summary_us",
                       "Summary of inference request duration in us", kModelLabels);
  summary.WithLabels({"simple", "1"}).Observe(42);
  summary.WithLabels({"idle", "1"});  // NaN quantiles
  registry.AddCollector(std::make_unique<ProcessCollector>(registry));
}

struct CommandOutput {
  int exit_code = -1;
  std::string text;
};

CommandOutput RunCommand(const std::string& command) {
  CommandOutput output;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return output;
  char buffer[4096];
  size_t read = 0;
  while ((read = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.text.append(buffer, read);
  int status = ::pclose(pipe);
  if (status != -1 && WIFEXITED(status)) output.exit_code = WEXITSTATUS(status);
  return output;
}

TEST(Promtool, AcceptsTheExpositionOfARealisticRegistry) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool is not installed";
  }
  Registry registry;
  FillRealisticRegistry(registry);
  const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                     ("rampart_metrics_" + std::to_string(::getpid()) + ".prom");
  std::ofstream(path) << registry.Exposition();
  CommandOutput output = RunCommand("promtool check metrics < '" + path.string() + "' 2>&1");
  std::filesystem::remove(path);

  // promtool exits 3 for lint findings and 1 for anything it cannot parse. The only findings
  // allowed are for names Rampart keeps from Triton (counters without "_total", gauges and
  // counters ending in "_count", "us" as a unit, "summary" in a summary's name); Rampart's own
  // histograms, in seconds, must draw none.
  const std::string kNoTotal = "counter metrics should have \"_total\" suffix";
  const std::string kCountSuffix =
      "non-histogram and non-summary metrics should not have \"_count\" suffix";
  const std::string kUnitAbbreviation = "metric names should not contain abbreviated units";
  const std::string kTypeInName = "metric name should not include type 'summary'";
  const std::map<std::string, std::set<std::string>> kAllowed = {
      {"nv_inference_request_success", {kNoTotal}},
      {"nv_inference_request_failure", {kNoTotal}},
      {"nv_inference_count", {kNoTotal, kCountSuffix}},
      {"nv_inference_exec_count", {kNoTotal, kCountSuffix}},
      {"nv_inference_pending_request_count", {kCountSuffix}},
      {"nv_inference_request_duration_us", {kNoTotal, kUnitAbbreviation}},
      {"nv_inference_queue_duration_us", {kNoTotal, kUnitAbbreviation}},
      {"nv_inference_compute_input_duration_us", {kNoTotal, kUnitAbbreviation}},
      {"nv_inference_compute_infer_duration_us", {kNoTotal, kUnitAbbreviation}},
      {"nv_inference_compute_output_duration_us", {kNoTotal, kUnitAbbreviation}},
      {"nv_inference_request_summary_us", {kUnitAbbreviation, kTypeInName}},
  };
  EXPECT_TRUE(output.exit_code == 0 || output.exit_code == 3) << output.text;
  std::istringstream lines(output.text);
  std::string line;
  int findings = 0;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    ++findings;
    size_t space = line.find(' ');
    std::string name = line.substr(0, space);
    std::string finding = space == std::string::npos ? "" : line.substr(space + 1);
    auto allowed = kAllowed.find(name);
    EXPECT_TRUE(allowed != kAllowed.end() && allowed->second.contains(finding))
        << "unexpected promtool finding: " << line;
  }
  // promtool really linted (the Triton counters must draw the "_total" finding).
  EXPECT_NE(output.text.find("nv_inference_count " + kNoTotal), std::string::npos) << output.text;
  EXPECT_GT(findings, 0);
}

}  // namespace
}  // namespace rampart::metrics
