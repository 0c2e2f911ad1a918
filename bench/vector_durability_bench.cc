// The durable layer's cost (docs/benchmarks.md, "Vector indexes: durability"), in one process
// on one disk:
//   - upserts per second through DurableIndex (log with group commit, fdatasync before the
//     answer) from several writer threads, against the engine's Resolve + Apply alone; and the
//     same over a map engine (tests/unit/knowledge/map_engine.h: a std::map, no graph), which
//     shows the log's own ceiling;
//   - the engine's View (the pause a snapshot imposes on writes: it copies the graphs);
//   - snapshot write time, and recovery time from a snapshot and from the log alone.
//
//   vector_durability_bench [--records 100000] [--dimension 128] [--batch 100]
//                           [--threads 1,4,16] [--dir DIR]
//
// Vectors are clustered (100 centres, Gaussian spread), not uniform noise. DIR defaults to a new
// folder under the system's temp folder (removed afterwards): put it on the disk to be measured.

#include <unistd.h>
#include <algorithm>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "knowledge/index/durable_index.h"
#include "knowledge/index/engine.h"
#include "knowledge/map_engine.h"

namespace {

using namespace rampart::knowledge;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::vector<VectorRecord> Generate(size_t count, size_t dimension) {
  std::mt19937 random(42);
  std::normal_distribution<float> centre(0, 1), spread(0, 0.15f);
  std::vector<std::vector<float>> centres(100, std::vector<float>(dimension));
  for (auto& c : centres) {
    for (float& x : c) x = centre(random);
  }
  std::vector<VectorRecord> records(count);
  for (size_t i = 0; i < count; ++i) {
    const auto& c = centres[i % centres.size()];
    records[i].id = fmt::format("doc-{}", i);
    records[i].values.resize(dimension);
    for (size_t d = 0; d < dimension; ++d) records[i].values[d] = c[d] + spread(random);
    records[i].metadata = {{"cluster", double(i % centres.size())}};
  }
  return records;
}

EngineOptions Engine(size_t dimension) {
  EngineOptions options;
  options.dimension = dimension;
  options.metric = Metric::kCosine;
  return options;
}

int Fail(const rampart::Status& status) {
  std::fprintf(stderr, "%s\n", status.ToString().c_str());
  return 1;
}

DurableIndexOptions IndexOptions(const std::string& folder, size_t dimension,
                                 bool map_engine = false) {
  DurableIndexOptions options;
  options.directory = folder;
  options.spec.name = "bench";
  options.spec.engine = Engine(dimension);
  options.engine_factory =
      map_engine ? EngineFactory(testing::MapEngine::Make) : EngineFactory(NewHnswEngine);
  options.durability.snapshot_every_records = uint64_t{1} << 62;  // only when asked
  options.durability.snapshot_every_bytes = uint64_t{1} << 62;
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("vector index durability benchmark");
  size_t records = 100000, dimension = 128, batch = 100;
  std::vector<int> thread_counts = {1, 4, 16};
  std::string dir;
  app.add_option("--records", records);
  app.add_option("--dimension", dimension);
  app.add_option("--batch", batch);
  app.add_option("--threads", thread_counts)->delimiter(',');
  app.add_option("--dir", dir);
  CLI11_PARSE(app, argc, argv);
  const bool own_dir = dir.empty();
  if (own_dir) dir = (fs::temp_directory_path() / fmt::format("rampart_vdb_{}", getpid())).string();
  fs::create_directories(dir);
  const std::vector<VectorRecord> data = Generate(records, dimension);
  std::printf("records %zu dimension %zu batch %zu (clustered, cosine)\n", records, dimension,
              batch);

  {  // The engine alone: Resolve + Apply on one thread, as the writer does without the log.
    auto engine = NewHnswEngine(Engine(dimension));
    if (!engine.ok()) return Fail(engine.status());
    const auto start = Clock::now();
    for (size_t i = 0; i < records; i += batch) {
      std::vector<VectorRecord> slice(data.begin() + i,
                                      data.begin() + std::min(records, i + batch));
      auto op = (*engine)->ResolveUpsert("", std::move(slice));
      if (!op.ok()) return Fail(op.status());
      (*engine)->Apply(*op);
    }
    std::printf("engine Resolve+Apply alone: %.0f records/s\n", records / Seconds(start));
    // View: what a snapshot takes while writes wait (the records' pointers and the graphs' copy).
    double slowest = 0, total = 0;
    size_t graph_bytes = 0;
    for (int round = 0; round < 5; ++round) {
      const auto view_start = Clock::now();
      const auto view = (*engine)->View();
      const double took = Seconds(view_start);
      slowest = std::max(slowest, took);
      total += took;
      graph_bytes = 0;
      for (const auto& graph : view->graphs()) graph_bytes += graph.graph.size();
    }
    std::printf("engine View (writes wait): %.1f ms mean, %.1f ms slowest of 5; graphs %.0f MB\n",
                total / 5 * 1e3, slowest * 1e3, graph_bytes / 1e6);
  }

  for (const bool map_engine : {true, false})
    for (const int threads : thread_counts) {
      const std::string folder = fmt::format("{}/upsert-{}-{}", dir, threads, map_engine);
      fs::create_directories(folder);
      auto index = DurableIndex::Open(IndexOptions(folder, dimension, map_engine));
      if (!index.ok()) return Fail((index.status()));
      std::atomic<size_t> next{0};
      std::atomic<bool> failed{false};
      const auto start = Clock::now();
      std::vector<std::thread> writers;
      for (int t = 0; t < threads; ++t) {
        writers.emplace_back([&] {
          while (true) {  // closed loop: each writer waits for its answer before the next write
            const size_t first = next.fetch_add(batch);
            if (first >= records) return;
            std::vector<VectorRecord> slice(data.begin() + first,
                                            data.begin() + std::min(records, first + batch));
            std::promise<rampart::Status> done;
            (*index)->Upsert("", std::move(slice),
                             [&](rampart::Status status) { done.set_value(status); });
            if (!done.get_future().get().ok()) failed = true;
          }
        });
      }
      for (auto& writer : writers) writer.join();
      const double elapsed = Seconds(start);
      if (failed) return Fail(rampart::Internal("an upsert failed"));
      const uint64_t writes = (*index)->applied_sequence();
      std::printf(
          "durable upserts (%s engine), %d writer threads: %.0f records/s, %.0f writes/s, "
          "%.1f writes per fdatasync\n",
          map_engine ? "map" : "hnsw", threads, records / elapsed, writes / elapsed,
          double(writes) / double((*index)->commits()));
      if (!map_engine && threads == thread_counts.back()) {
        auto begin = Clock::now();
        const auto copy = folder + "-log-only";
        fs::copy(folder, copy);  // as a crash leaves it: everything in the log
        auto snapshot_start = Clock::now();
        if (auto status = (*index)->SnapshotNow(); !status.ok()) return Fail(status);
        const double snapshot_seconds = Seconds(snapshot_start);
        uintmax_t snapshot_bytes = 0;
        for (const auto& info : ListSnapshots(folder)) snapshot_bytes += fs::file_size(info.path);
        index->reset();
        begin = Clock::now();
        auto from_snapshot = DurableIndex::Open(IndexOptions(folder, dimension));
        if (!from_snapshot.ok()) return Fail(from_snapshot.status());
        const double snapshot_recovery = Seconds(begin);
        from_snapshot->reset();
        begin = Clock::now();
        auto from_log = DurableIndex::Open(IndexOptions(copy, dimension));
        if (!from_log.ok()) return Fail(from_log.status());
        const double log_recovery = Seconds(begin);
        std::printf(
            "snapshot of %zu records: written in %.2f s (%.0f MB); recovery from it %.2f s, "
            "from the log alone %.2f s\n",
            records, snapshot_seconds, snapshot_bytes / 1e6, snapshot_recovery, log_recovery);
      }
    }
  if (own_dir) fs::remove_all(dir);
  return 0;
}
