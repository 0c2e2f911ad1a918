#include "metrics/serve_metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "metrics/metrics.h"
#include "metrics/registry.h"
#include "metrics/text_format.h"

namespace rampart::metrics {
namespace {

constexpr int64_t kMicrosecond = 1000;  // in nanoseconds

// (le, cumulative count) of every `<name>_bucket` sample of model `model`, in exposition order.
std::vector<std::pair<std::string, double>> Buckets(const std::string& exposition,
                                                    const std::string& name,
                                                    const std::string& model) {
  const std::string prefix = name + "_bucket{model=\"" + model + "\",version=\"1\",le=\"";
  std::vector<std::pair<std::string, double>> buckets;
  std::istringstream lines(exposition);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.starts_with(prefix)) continue;
    const size_t quote = line.find('"', prefix.size());
    buckets.emplace_back(line.substr(prefix.size(), quote - prefix.size()),
                         std::stod(line.substr(line.rfind(' ') + 1)));
  }
  return buckets;
}

std::vector<std::string> LeValues(const std::vector<std::pair<std::string, double>>& buckets) {
  std::vector<std::string> values;
  for (const auto& [le, count] : buckets) values.push_back(le);
  return values;
}

// The `le` labels a histogram with these microsecond bounds exports (in seconds, then +Inf).
std::vector<std::string> ExpectedLe(const std::vector<double>& bounds_us) {
  std::vector<std::string> values;
  for (double us : bounds_us) values.push_back(FormatValue(us / 1e6));
  values.push_back("+Inf");
  return values;
}

model::ModelConfig Config(const std::string& name, const std::string& buckets_parameter = "") {
  model::ModelConfig config;
  config.set_name(name);
  config.set_platform("pytorch_libtorch");
  if (!buckets_parameter.empty()) {
    (*config.mutable_parameters())[std::string(kModelBucketsParameter)].set_string_value(
        buckets_parameter);
  }
  return config;
}

// One successful request of `total_us` end to end, of which `queue_us` queued and `infer_us`
// executed.
void Succeed(serve::VersionObserver& observer, int64_t total_us, int64_t queue_us,
             int64_t infer_us) {
  serve::RequestTiming timing;
  timing.queue_ns = queue_us * kMicrosecond;
  timing.compute_infer_ns = infer_us * kMicrosecond;
  observer.OnSuccess(timing, total_us * kMicrosecond, 1);
}

const std::vector<double> kDefaults(kDefaultDurationBucketsUs.begin(),
                                    kDefaultDurationBucketsUs.end());

// ---- The default buckets ------------------------------------------------------------------------

TEST(DefaultDurationBuckets, SpanTensOfMicrosecondsToSecondsInOneTwoPointFiveFiveSteps) {
  ASSERT_TRUE(ValidateHistogramBuckets(kDefaults).ok());
  EXPECT_LE(kDefaults.front(), 25);        // a ~30 µs request lands above the first bucket
  EXPECT_GE(kDefaults.back(), 5'000'000);  // seconds-long requests are still resolved
  for (size_t i = 1; i < kDefaults.size(); ++i) {
    // Each bucket at most 2.5 times its lower bound: quantiles are interpolated within that.
    EXPECT_LE(kDefaults[i] / kDefaults[i - 1], 2.5) << "bound " << i;
  }
  // 1-2.5-5 within every decade.
  for (double bound : kDefaults) {
    const double mantissa = bound / std::pow(10.0, std::floor(std::log10(bound)));
    EXPECT_TRUE(mantissa == 1 || mantissa == 2.5 || mantissa == 5) << bound;
  }
}

TEST(DefaultDurationBuckets, TheFlagSpellingMatchesTheListAndParsesAsMicroseconds) {
  Result<std::vector<double>> parsed = ParseHistogramBuckets(kDefaultDurationBucketsUsText);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(*parsed, kDefaults);
  Result<std::vector<double>> microseconds = ParseMicrosecondBuckets(kDefaultDurationBucketsUsText);
  ASSERT_TRUE(microseconds.ok()) << microseconds.status().message();
  EXPECT_EQ(*microseconds, kDefaults);
  EXPECT_EQ(ServeMetricsOptions{}.histogram_buckets_us, kDefaults);
  EXPECT_EQ(HistogramOptions{}.bounds, kDefaults);
}

// ---- ServeMetrics -------------------------------------------------------------------------------

TEST(ServeMetrics, ExportsTheDefaultBucketsInSecondsAndResolvesAThirtyMicrosecondRequest) {
  Registry registry;
  ServeMetrics metrics(registry, {});
  std::unique_ptr<serve::VersionObserver> simple = metrics.ForVersion(Config("simple"), 1);
  ASSERT_NE(simple, nullptr);
  Succeed(*simple, /*total_us=*/30, /*queue_us=*/3, /*infer_us=*/12);
  const std::string text = registry.Exposition();

  auto request = Buckets(text, "rampart_inference_request_duration_seconds", "simple");
  ASSERT_EQ(LeValues(request), ExpectedLe(kDefaults)) << text;
  EXPECT_EQ(request[0], (std::pair<std::string, double>{"1e-05", 0}));
  EXPECT_EQ(request[1], (std::pair<std::string, double>{"2.5e-05", 0}));
  EXPECT_EQ(request[2], (std::pair<std::string, double>{"5e-05", 1}));  // 30 µs: (25, 50] µs
  EXPECT_EQ(request.back(), (std::pair<std::string, double>{"+Inf", 1}));

  auto queue = Buckets(text, "rampart_inference_queue_duration_seconds", "simple");
  ASSERT_EQ(LeValues(queue), ExpectedLe(kDefaults));
  EXPECT_EQ(queue[0].second, 1);  // 3 µs: the first bucket
  auto infer = Buckets(text, "rampart_inference_compute_infer_duration_seconds", "simple");
  ASSERT_EQ(LeValues(infer), ExpectedLe(kDefaults));
  EXPECT_EQ(infer[0].second, 0);  // 12 µs: (10, 25] µs
  EXPECT_EQ(infer[1].second, 1);

  EXPECT_NE(text.find("rampart_inference_request_duration_seconds_sum{model=\"simple\","
                      "version=\"1\"} 3e-05\n"),
            std::string::npos)
      << text;
  // Triton's cumulative counter keeps microseconds.
  EXPECT_NE(text.find("nv_inference_request_duration_us{model=\"simple\",version=\"1\"} 30\n"),
            std::string::npos)
      << text;
}

TEST(ServeMetrics, TheServerListReplacesTheDefaults) {
  Registry registry;
  ServeMetrics metrics(registry, {.histogram_buckets_us = {500, 5000}});
  auto observer = metrics.ForVersion(Config("simple"), 1);
  Succeed(*observer, 700, 10, 600);
  auto request =
      Buckets(registry.Exposition(), "rampart_inference_request_duration_seconds", "simple");
  EXPECT_EQ(request,
            (std::vector<std::pair<std::string, double>>{{"5e-04", 0}, {"0.005", 1}, {"+Inf", 1}}));
}

TEST(ServeMetrics, AModelParameterOverridesTheServerListForThatModelOnly) {
  Registry registry;
  ServeMetrics metrics(registry, {});
  auto custom = metrics.ForVersion(Config("custom", "[100, 1000]"), 1);
  auto plain = metrics.ForVersion(Config("plain"), 1);
  Succeed(*custom, 150, 1, 100);
  Succeed(*plain, 150, 1, 100);
  const std::string text = registry.Exposition();
  for (const char* name :
       {"rampart_inference_request_duration_seconds", "rampart_inference_queue_duration_seconds",
        "rampart_inference_compute_infer_duration_seconds"}) {
    EXPECT_EQ(LeValues(Buckets(text, name, "custom")), ExpectedLe({100, 1000})) << name;
    EXPECT_EQ(LeValues(Buckets(text, name, "plain")), ExpectedLe(kDefaults)) << name;
  }
  EXPECT_EQ(Buckets(text, "rampart_inference_request_duration_seconds", "custom"),
            (std::vector<std::pair<std::string, double>>{{"1e-04", 0}, {"0.001", 1}, {"+Inf", 1}}));
}

TEST(ServeMetrics, ABadModelParameterFallsBackToTheServerList) {
  Registry registry;
  ServeMetrics metrics(registry, {.histogram_buckets_us = {500, 5000}});
  const std::vector<std::string> kBad = {"fast", "5,1", "1,+Inf", "[]"};
  for (size_t i = 0; i < kBad.size(); ++i) {
    const std::string& bad = kBad[i];
    const std::string name = "bad" + std::to_string(i);
    auto observer = metrics.ForVersion(Config(name, bad), 1);
    ASSERT_NE(observer, nullptr) << bad;
    EXPECT_EQ(LeValues(Buckets(registry.Exposition(), "rampart_inference_request_duration_seconds",
                               name)),
              ExpectedLe({500, 5000}))
        << bad;
  }
}

}  // namespace
}  // namespace rampart::metrics
