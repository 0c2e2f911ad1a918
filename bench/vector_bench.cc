// The embedded vector engine (knowledge/index/engine.h) against raw hnswlib in the same process,
// same data, same M / ef_construction / ef, in the same run:
//
//   build           records per second into the engine (ResolveUpsert + Apply in batches of
//                   --batch) and into raw hnswlib (addPoint), one thread each
//   search ef=E     queries per second, p50/p99 latency and recall@10 (against exact search)
//                   of the engine and of raw hnswlib, and the ratio of their QPS
//   filter S%       filtered queries at selectivity S (1%, 10%, 50%): recall@10 against exact
//                   search of the matching records, p50/p99, and the plans the engine chose
//   under-writes    p50/p99 of queries while another thread upserts (the writer's lock)
//
//   vector_bench [--count 100000] [--dimension 128] [--queries 1000] [--clusters 100]
//                [--m 16] [--ef-construction 200] [--ef 32,64,128,256] [--metric cosine]
//
// Data: --count vectors around --clusters Gaussian centres (not uniform noise), each with a
// "bucket" number 0..99 that the filters select on. Prints a Markdown table.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

// hnswlib 0.6.2's headers define non-inline globals, and the engine's library includes them
// too: the baseline's copy goes into a namespace of its own.
#include <queue>
#include <unordered_map>
#define hnswlib hnswlib_baseline
#define cpuid hnswlib_baseline_cpuid
#define xgetbv hnswlib_baseline_xgetbv
#define AVXCapable hnswlib_baseline_AVXCapable
#define AVX512Capable hnswlib_baseline_AVX512Capable
#include <hnswlib/hnswlib.h>
#undef hnswlib
#undef cpuid
#undef xgetbv
#undef AVXCapable
#undef AVX512Capable

#include "knowledge/index/distance.h"
#include "knowledge/index/engine.h"

namespace {

using namespace rampart;
using namespace rampart::knowledge;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Data {
  size_t dimension = 0;
  std::vector<std::vector<float>> vectors;   // as given (the engine normalises for cosine)
  std::vector<std::vector<float>> searched;  // what hnswlib gets: normalised for cosine
  std::vector<int> buckets;
  std::vector<std::vector<float>> queries;
};

Data Generate(size_t count, size_t dimension, size_t queries, size_t clusters, Metric metric) {
  Data data;
  data.dimension = dimension;
  std::mt19937 random(2024);
  std::normal_distribution<float> normal(0, 1);
  std::normal_distribution<float> spread(0, 0.35f);
  std::vector<std::vector<float>> centres(clusters, std::vector<float>(dimension));
  for (auto& centre : centres) {
    for (float& value : centre) value = normal(random);
  }
  std::uniform_int_distribution<size_t> pick(0, clusters - 1);
  auto point = [&] {
    const auto& centre = centres[pick(random)];
    std::vector<float> values(dimension);
    for (size_t i = 0; i < dimension; ++i) values[i] = centre[i] + spread(random);
    return values;
  };
  for (size_t i = 0; i < count; ++i) {
    data.vectors.push_back(point());
    data.buckets.push_back(static_cast<int>(random() % 100));
  }
  for (size_t i = 0; i < queries; ++i) data.queries.push_back(point());
  data.searched = data.vectors;
  if (metric == Metric::kCosine) {
    for (auto& values : data.searched) Normalize(values);
    for (auto& values : data.queries) Normalize(values);
  }
  return data;
}

// Exact top 10 ids among the records with bucket < `buckets`.
std::vector<std::vector<size_t>> Exact(const Data& data, Metric metric, int buckets) {
  std::vector<std::vector<size_t>> truth;
  for (const auto& query : data.queries) {
    std::vector<std::pair<float, size_t>> scored;
    for (size_t i = 0; i < data.searched.size(); ++i) {
      if (data.buckets[i] >= buckets) continue;
      float distance = metric == Metric::kEuclidean
                           ? SquaredL2(query.data(), data.searched[i].data(), data.dimension)
                           : -DotProduct(query.data(), data.searched[i].data(), data.dimension);
      scored.emplace_back(distance, i);
    }
    size_t keep = std::min<size_t>(10, scored.size());
    std::partial_sort(scored.begin(), scored.begin() + keep, scored.end());
    std::vector<size_t> ids;
    for (size_t i = 0; i < keep; ++i) ids.push_back(scored[i].second);
    truth.push_back(std::move(ids));
  }
  return truth;
}

struct Run {
  double qps = 0;
  double p50_us = 0;
  double p99_us = 0;
  double recall = 0;
  std::map<std::string, int> plans;
};

template <typename Search>  // Search(query index) -> vector of record indices
Run Measure(const Data& data, const std::vector<std::vector<size_t>>& truth, Search search,
            std::map<std::string, int>* plans = nullptr) {
  Run run;
  std::vector<double> latencies;
  size_t hits = 0, total = 0;
  auto start = Clock::now();
  for (size_t q = 0; q < data.queries.size(); ++q) {
    auto begin = Clock::now();
    std::vector<size_t> found = search(q);
    latencies.push_back(Seconds(begin) * 1e6);
    std::set<size_t> got(found.begin(), found.end());
    for (size_t id : truth[q]) hits += got.count(id);
    total += truth[q].size();
  }
  run.qps = static_cast<double>(data.queries.size()) / Seconds(start);
  std::sort(latencies.begin(), latencies.end());
  run.p50_us = latencies[latencies.size() / 2];
  run.p99_us = latencies[std::min(latencies.size() - 1, latencies.size() * 99 / 100)];
  run.recall = total ? static_cast<double>(hits) / static_cast<double>(total) : 1;
  if (plans) run.plans = *plans;
  return run;
}

std::string PlanText(const std::map<std::string, int>& plans) {
  std::string text;
  for (const auto& [plan, count] : plans)
    text += fmt::format("{}{} {}", text.empty() ? "" : ", ", plan, count);
  return text;
}

size_t IdIndex(const std::string& id) { return std::stoul(id.substr(1)); }

// The record indices of a query's matches ("v17" -> 17); a failed query ends the run.
std::vector<size_t> Ids(const Result<QueryResult>& result) {
  if (!result.ok()) {
    fmt::print(stderr, "query failed: {}\n", result.status().ToString());
    std::exit(1);
  }
  std::vector<size_t> ids;
  for (const Match& match : result->matches) ids.push_back(IdIndex(match.id));
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The vector engine against raw hnswlib, in process"};
  size_t count = 100000, dimension = 128, queries = 1000, clusters = 100, m = 16,
         ef_construction = 200, batch = 100;
  std::vector<size_t> efs = {32, 64, 128, 256};
  std::string metric_name = "cosine";
  app.add_option("--count", count);
  app.add_option("--dimension", dimension);
  app.add_option("--queries", queries);
  app.add_option("--clusters", clusters);
  app.add_option("--m", m);
  app.add_option("--ef-construction", ef_construction);
  app.add_option("--ef", efs)->delimiter(',');
  app.add_option("--metric", metric_name);
  app.add_option("--batch", batch);
  CLI11_PARSE(app, argc, argv);
  auto metric = ParseMetric(metric_name);
  if (!metric.ok()) {
    fmt::print(stderr, "{}\n", metric.status().ToString());
    return 2;
  }

  Data data = Generate(count, dimension, queries, clusters, *metric);
  fmt::print(
      "# vector_bench: {} vectors x {} dimensions ({} clusters), {} queries, {}, M {}, "
      "ef_construction {}, {} hardware threads\n\n",
      count, dimension, clusters, queries, metric_name, m, ef_construction,
      std::thread::hardware_concurrency());

  EngineOptions options;
  options.dimension = dimension;
  options.metric = *metric;
  options.hnsw_m = m;
  options.ef_construction = ef_construction;
  auto made = NewHnswEngine(options);
  if (!made.ok()) {
    fmt::print(stderr, "{}\n", made.status().ToString());
    return 1;
  }
  IndexEngine& engine = **made;
  auto start = Clock::now();
  for (size_t first = 0; first < count; first += batch) {
    std::vector<VectorRecord> records;
    for (size_t i = first; i < std::min(count, first + batch); ++i) {
      VectorRecord record;
      record.id = fmt::format("v{}", i);
      record.values = data.vectors[i];
      record.metadata = {{"bucket", static_cast<double>(data.buckets[i])}};
      records.push_back(std::move(record));
    }
    auto op = engine.ResolveUpsert("", std::move(records));
    if (!op.ok()) {
      fmt::print(stderr, "{}\n", op.status().ToString());
      return 1;
    }
    engine.Apply(*op);
  }
  double engine_build = Seconds(start);

  std::unique_ptr<hnswlib_baseline::SpaceInterface<float>> space;
  if (*metric == Metric::kEuclidean) {
    space = std::make_unique<hnswlib_baseline::L2Space>(dimension);
  } else {
    space = std::make_unique<hnswlib_baseline::InnerProductSpace>(dimension);
  }
  hnswlib_baseline::HierarchicalNSW<float> raw(space.get(), count, m, ef_construction);
  start = Clock::now();
  for (size_t i = 0; i < count; ++i) raw.addPoint(data.searched[i].data(), i);
  double raw_build = Seconds(start);

  fmt::print("| measurement | engine | raw hnswlib | engine / raw |\n|---|---|---|---|\n");
  fmt::print("| build, records/s (1 thread) | {:.0f} | {:.0f} | {:.2f} |\n", count / engine_build,
             count / raw_build, raw_build / engine_build);
  fmt::print("| memory, MiB | {:.1f} | | |\n", engine.MemoryBytes() / 1048576.0);

  auto truth = Exact(data, *metric, 100);
  for (size_t ef : efs) {
    // Engine and baseline alternate query by query, so that both meet the same machine.
    std::vector<double> ours_us, raw_us;
    size_t ours_hits = 0, raw_hits = 0, total = 0;
    double ours_seconds = 0, raw_seconds = 0;
    for (size_t q = 0; q < data.queries.size(); ++q) {
      QueryRequest request;
      request.vector = data.queries[q];
      request.top_k = 10;
      request.ef = ef;
      auto begin = Clock::now();
      std::vector<size_t> ours = Ids(engine.Query(request));
      double took = Seconds(begin);
      ours_seconds += took;
      ours_us.push_back(took * 1e6);
      raw.setEf(ef);
      begin = Clock::now();
      auto found = raw.searchKnn(data.queries[q].data(), 10);
      std::vector<size_t> baseline;
      while (!found.empty()) {
        baseline.push_back(found.top().second);
        found.pop();
      }
      took = Seconds(begin);
      raw_seconds += took;
      raw_us.push_back(took * 1e6);
      std::set<size_t> ours_set(ours.begin(), ours.end()),
          raw_set(baseline.begin(), baseline.end());
      for (size_t id : truth[q]) {
        ours_hits += ours_set.count(id);
        raw_hits += raw_set.count(id);
      }
      total += truth[q].size();
    }
    auto percentile = [](std::vector<double> values, double share) {
      std::sort(values.begin(), values.end());
      return values[std::min(values.size() - 1, static_cast<size_t>(values.size() * share))];
    };
    double ours_qps = data.queries.size() / ours_seconds,
           raw_qps = data.queries.size() / raw_seconds;
    fmt::print("| search ef={}: QPS | {:.0f} | {:.0f} | {:.2f} |\n", ef, ours_qps, raw_qps,
               ours_qps / raw_qps);
    fmt::print("| search ef={}: p50 / p99 us | {:.0f} / {:.0f} | {:.0f} / {:.0f} | |\n", ef,
               percentile(ours_us, 0.5), percentile(ours_us, 0.99), percentile(raw_us, 0.5),
               percentile(raw_us, 0.99));
    fmt::print("| search ef={}: recall@10 | {:.3f} | {:.3f} | |\n", ef,
               static_cast<double>(ours_hits) / total, static_cast<double>(raw_hits) / total);
  }

  for (int selectivity : {1, 10, 50}) {
    auto filtered_truth = Exact(data, *metric, selectivity);
    FilterNode filter;
    filter.op = FilterNode::Op::kLt;
    filter.field = "bucket";
    filter.operands = {static_cast<double>(selectivity)};
    std::map<std::string, int> plans;
    Run ours = Measure(
        data, filtered_truth,
        [&](size_t q) {
          QueryRequest request;
          request.vector = data.queries[q];
          request.top_k = 10;
          request.filter = filter;
          auto result = engine.Query(request);
          if (result.ok()) ++plans[std::string(result->plan)];
          return Ids(result);
        },
        &plans);
    fmt::print(
        "| filter {}%: QPS, p50 / p99 us, recall@10 | {:.0f}, {:.0f} / {:.0f}, {:.3f} | | "
        "plans: {} |\n",
        selectivity, ours.qps, ours.p50_us, ours.p99_us, ours.recall, PlanText(plans));
  }

  // Queries while another thread upserts new records in batches (the writer's lock).
  std::atomic<bool> writing{true};
  std::thread writer([&] {
    std::mt19937 random(7);
    size_t next = count;
    while (writing.load()) {
      std::vector<VectorRecord> records;
      for (size_t i = 0; i < batch; ++i) {
        VectorRecord record;
        record.id = fmt::format("v{}", next++);
        record.values = data.vectors[random() % count];
        records.push_back(std::move(record));
      }
      engine.Apply(*engine.ResolveUpsert("", std::move(records)));
    }
  });
  Run idle_truthless = Measure(data, truth, [&](size_t q) {
    QueryRequest request;
    request.vector = data.queries[q];
    request.top_k = 10;
    return Ids(engine.Query(request));
  });
  writing = false;
  writer.join();
  fmt::print(
      "| queries during upserts (ef=100): QPS, p50 / p99 us | {:.0f}, {:.0f} / {:.0f} | | "
      "|\n",
      idle_truthless.qps, idle_truthless.p50_us, idle_truthless.p99_us);
  return 0;
}
