// The in-process side of bench/pinecone_http_bench.sh: loads an index folder with clustered
// vectors, writes a Pinecone query body, and runs that same query against the index in-process
// (IndexBackend::Query on T threads), so that the script can set its QPS beside the same query's
// over HTTP (wrk against `rampart serve` on the same folder).
//
//   index_query_probe load  --indexes DIR --index NAME --count N --dimension D
//   index_query_probe query --indexes DIR --index NAME --query-file FILE --threads 1,2
//                           --rounds R --seconds S
//
// `load` also writes FILE (--query-file) with {"topK":10,"vector":[...],"namespace":""}, a point
// near one of the clusters. `query` opens the folder once (recovering an index rebuilds its graph,
// which takes long), parses FILE with the front end's own codec (api/pinecone_codec.h), and for
// each thread count and round prints one line:
// "threads=<t> round=<r> qps=<n> p50_us=<n> p99_us=<n> matches=<k>".

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <random>
#include <sstream>
#include <thread>

#include <CLI/CLI.hpp>

#include "api/pinecone_codec.h"
#include "json/writer.h"
#include "knowledge/index/backend.h"

namespace rampart {
namespace {

struct Args {
  std::string indexes;
  std::string index = "bench";
  std::string query_file;
  size_t count = 100000;
  size_t dimension = 128;
  size_t clusters = 64;
  std::vector<int> threads = {1, 2};
  int rounds = 3;
  double seconds = 5;
};

int Fail(const Status& status) {
  std::fprintf(stderr, "index_query_probe: %s\n", status.ToString().c_str());
  return 1;
}

Result<std::unique_ptr<knowledge::IndexCatalog>> Open(const Args& args) {
  knowledge::CatalogOptions options;
  options.directory = args.indexes;
  return knowledge::OpenIndexCatalog(options);
}

int Load(const Args& args) {
  Result<std::unique_ptr<knowledge::IndexCatalog>> catalog = Open(args);
  if (!catalog.ok()) return Fail(catalog.status());
  knowledge::IndexSpec spec;
  spec.name = args.index;
  spec.engine.dimension = args.dimension;
  spec.engine.metric = knowledge::Metric::kCosine;
  Result<std::shared_ptr<knowledge::IndexBackend>> index = (*catalog)->Create(spec);
  if (!index.ok()) return Fail(index.status());
  // Clusters: centres uniform in [-1, 1], members a centre plus noise of 0.1.
  std::mt19937 random(42);
  std::uniform_real_distribution<float> uniform(-1, 1);
  std::normal_distribution<float> noise(0, 0.1f);
  std::vector<std::vector<float>> centres(args.clusters, std::vector<float>(args.dimension));
  for (auto& centre : centres) {
    for (float& value : centre) value = uniform(random);
  }
  const auto near = [&](size_t cluster) {
    std::vector<float> values = centres[cluster % args.clusters];
    for (float& value : values) value += noise(random);
    return values;
  };
  constexpr size_t kBatch = 1000;
  for (size_t start = 0; start < args.count; start += kBatch) {
    std::vector<knowledge::VectorRecord> records;
    for (size_t i = start; i < std::min(args.count, start + kBatch); ++i) {
      records.push_back({.id = "v" + std::to_string(i),
                         .values = near(i),
                         .metadata = {{"cluster", static_cast<double>(i % args.clusters)}}});
    }
    std::promise<Status> written;
    (*index)->Upsert("", std::move(records),
                     [&written](Status status) { written.set_value(std::move(status)); });
    if (Status status = written.get_future().get(); !status.ok()) return Fail(status);
  }
  json::Writer writer;
  writer.StartObject();
  writer.Key("topK");
  writer.Uint64(10);
  writer.Key("vector");
  writer.StartArray();
  for (float value : near(7)) writer.Float(value);
  writer.EndArray();
  writer.Key("namespace");
  writer.String("");
  writer.EndObject();
  std::ofstream(args.query_file) << writer.Take();
  std::printf("loaded %zu vectors of %zu dimensions in %zu clusters into '%s'\n", args.count,
              args.dimension, args.clusters, args.index.c_str());
  return 0;
}

// Runs `request` on `threads` threads for `seconds` and prints the round's line.
void RunRound(const knowledge::IndexBackend& index, const knowledge::QueryRequest& request,
              int threads, int round, double seconds) {
  std::atomic<bool> stop{false};
  std::vector<std::vector<int64_t>> latencies(threads);
  std::atomic<size_t> matches{0};
  std::vector<std::thread> running;
  for (int t = 0; t < threads; ++t) {
    running.emplace_back([&, t] {
      while (!stop.load(std::memory_order_relaxed)) {
        const auto started = std::chrono::steady_clock::now();
        Result<knowledge::QueryResult> result = index.Query(request);
        latencies[t].push_back(std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::steady_clock::now() - started)
                                   .count());
        if (result.ok()) matches.store(result->matches.size(), std::memory_order_relaxed);
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));  // the round's length
  stop = true;
  for (std::thread& thread : running) thread.join();
  std::vector<int64_t> all;
  for (const auto& some : latencies) all.insert(all.end(), some.begin(), some.end());
  std::sort(all.begin(), all.end());
  const auto percentile = [&](double p) {
    return all.empty() ? 0 : all[std::min(all.size() - 1, static_cast<size_t>(p * all.size()))];
  };
  std::printf("threads=%d round=%d qps=%.0f p50_us=%lld p99_us=%lld matches=%zu\n", threads, round,
              static_cast<double>(all.size()) / seconds, static_cast<long long>(percentile(0.5)),
              static_cast<long long>(percentile(0.99)), matches.load());
  std::fflush(stdout);
}

int Query(const Args& args) {
  Result<std::unique_ptr<knowledge::IndexCatalog>> catalog = Open(args);
  if (!catalog.ok()) return Fail(catalog.status());
  Result<std::shared_ptr<knowledge::IndexBackend>> index = (*catalog)->Get(args.index);
  if (!index.ok()) return Fail(index.status());
  std::stringstream body;
  body << std::ifstream(args.query_file).rdbuf();
  json::Parser parser;
  Result<knowledge::QueryRequest> request =
      api::pinecone::ParseQuery(parser, body.str(), (*index)->spec().engine.dimension);
  if (!request.ok()) return Fail(request.status());
  for (int threads : args.threads) {
    for (int round = 1; round <= args.rounds; ++round) {
      RunRound(**index, *request, threads, round, args.seconds);
    }
  }
  return 0;
}

}  // namespace
}  // namespace rampart

int main(int argc, char** argv) {
  rampart::Args args;
  CLI::App app("Loads an index folder, and queries it in-process (bench/pinecone_http_bench.sh)");
  app.require_subcommand(1);
  for (CLI::App* command :
       {app.add_subcommand("load", "Create NAME with clustered vectors and write the query body"),
        app.add_subcommand("query", "Run the query body against NAME in-process")}) {
    command->add_option("--indexes", args.indexes, "The indexes folder")->required();
    command->add_option("--index", args.index, "The index's name");
    command->add_option("--query-file", args.query_file, "The query body (JSON)")->required();
  }
  CLI::App* load = app.get_subcommand("load");
  load->add_option("--count", args.count, "Vectors");
  load->add_option("--dimension", args.dimension, "Dimensions");
  load->add_option("--clusters", args.clusters, "Clusters the vectors are drawn around");
  CLI::App* query = app.get_subcommand("query");
  query->add_option("--threads", args.threads, "Query thread counts, each run in turn")
      ->delimiter(',');
  query->add_option("--rounds", args.rounds, "Rounds of each thread count");
  query->add_option("--seconds", args.seconds, "Length of a round");
  CLI11_PARSE(app, argc, argv);
  return load->parsed() ? rampart::Load(args) : rampart::Query(args);
}
