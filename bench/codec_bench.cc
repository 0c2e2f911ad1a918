// KServe v2 JSON request decoding, against its floor: parsing the same body with simdjson alone.
//
// Every JSON infer request is parsed (json::Parser, simdjson) and then decoded into tensors
// (api::DecodeInferRequest: field checks, dtype conversion, flattening). The parse is a cost no
// JSON front end avoids; what decoding adds on top of it is Rampart's own. For each body this
// prints both times per request and their ratio (decode / parse, 1.0 = decoding costs nothing
// beyond the parse). Bodies: `simple` (two INT32 [1,16]), `mlp_classifier` (FP32 [1,256], the
// batching benchmark's request) and an image (FP32 [1,3,32,32]).
//
// Usage: build/bench/codec_bench [--benchmark_min_time=0.5] (Google Benchmark flags)

#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "api/kserve_codec.h"
#include "json/reader.h"

namespace {

using rampart::api::DecodeInferRequest;

// One KServe v2 input with `count` elements printed by `element(i)`.
template <typename Element>
std::string Input(const std::string& name, const std::string& datatype, const std::string& shape,
                  int count, Element element) {
  std::string text = R"({"name":")" + name + R"(","datatype":")" + datatype + R"(","shape":)" +
                     shape + R"(,"data":[)";
  for (int i = 0; i < count; ++i) {
    if (i > 0) text += ',';
    text += element(i);
  }
  return text + "]}";
}

std::string FloatText(int i) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4f", std::sin(0.1 * i));
  return text;
}

const std::map<std::string, std::string>& Bodies() {
  static const auto* bodies = new std::map<std::string, std::string>{
      {"simple",
       R"({"inputs":[)" +
           Input("INPUT0", "INT32", "[1,16]", 16, [](int i) { return std::to_string(i); }) + "," +
           Input("INPUT1", "INT32", "[1,16]", 16, [](int) { return std::string("1"); }) + "]}"},
      {"mlp_classifier",
       R"({"inputs":[)" + Input("INPUT__0", "FP32", "[1,256]", 256, FloatText) + "]}"},
      {"image",
       R"({"inputs":[)" + Input("INPUT__0", "FP32", "[1,3,32,32]", 3072, FloatText) + "]}"},
  };
  return *bodies;
}

void Parse(benchmark::State& state, const std::string& body) {
  rampart::json::Parser parser;
  for (auto _ : state) {
    auto root = parser.Parse(body);
    if (!root.ok()) state.SkipWithError(root.status().ToString().c_str());
    benchmark::DoNotOptimize(root);
  }
}

void Decode(benchmark::State& state, const std::string& body) {
  for (auto _ : state) {
    auto decoded = DecodeInferRequest(body, std::nullopt);
    if (!decoded.ok()) state.SkipWithError(decoded.status().ToString().c_str());
    benchmark::DoNotOptimize(decoded);
  }
}

// Keeps each run's CPU time per iteration (ns) by name, for the ratios printed at the end.
class Collector : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (!run.error_occurred && run.iterations > 0) {
        ns_[run.benchmark_name()] = run.GetAdjustedCPUTime();
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
  double ns(const std::string& name) const {
    auto it = ns_.find(name);
    return it == ns_.end() ? 0 : it->second;
  }

 private:
  std::map<std::string, double> ns_;
};

}  // namespace

int main(int argc, char** argv) {
  for (const auto& [name, body] : Bodies()) {
    benchmark::RegisterBenchmark(("parse/" + name).c_str(), Parse, body);
    benchmark::RegisterBenchmark(("decode/" + name).c_str(), Decode, body);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  Collector collector;
  benchmark::RunSpecifiedBenchmarks(&collector);

  std::printf("\n%-16s %8s %12s %12s %16s\n", "body", "bytes", "parse (us)", "decode (us)",
              "decode / parse");
  for (const auto& [name, body] : Bodies()) {
    const double parse = collector.ns("parse/" + name);
    const double decode = collector.ns("decode/" + name);
    if (parse <= 0 || decode <= 0) continue;
    std::printf("%-16s %8zu %12.2f %12.2f %16.2f\n", name.c_str(), body.size(), parse / 1000,
                decode / 1000, decode / parse);
  }
  benchmark::Shutdown();
  return 0;
}
