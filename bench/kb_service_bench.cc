// The vector store service in process (knowledge/hub/vector_store_service.h) on a SQLite store in
// a temporary directory, with a fake embedder of 64 dimensions (hashed word counts; no model):
// ingestion MB/s of text (upload excluded: extraction, chunking, embedding, the store's
// transaction and both indexes), the time a second instance takes to build its indexes from the
// store, the time the first takes to write its index snapshot at stop and a third takes to start
// from it (wall and process CPU), and search latency p50/p99 over a store of --chunks chunks for
// keyword, vector and hybrid ranking (on the instance started from the snapshot, whose answers
// are checked against the rebuilt one's), with the hybrid/keyword cost ratio.
// Usage: kb_service_bench [--chunks N] [--queries N] [--workers N] (defaults 100000, 1000, 1).
// The corpus is Zipf-distributed made-up words (seeded, reproducible), chunked static 100/0.

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "knowledge/hub/vector_store_service.h"
#include "store/store.h"

namespace {

using namespace rampart::knowledge::hub;  // NOLINT(google-build-using-namespace)
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

class HashEmbedder final : public Embedder {
 public:
  rampart::Result<std::vector<std::vector<float>>> Embed(
      const std::vector<std::string>& texts) override {
    std::vector<std::vector<float>> vectors;
    for (const std::string& text : texts) {
      std::vector<float> vector(kDimension, 0);
      size_t start = 0;
      while (start < text.size()) {
        size_t end = text.find_first_of(" \n", start);
        if (end == std::string::npos) end = text.size();
        if (end > start) {
          vector[std::hash<std::string_view>()(std::string_view(text).substr(start, end - start)) %
                 kDimension] += 1;
        }
        start = end + 1;
      }
      vector[0] += 0.01f;
      vectors.push_back(std::move(vector));
    }
    return vectors;
  }
  size_t dimension() const override { return kDimension; }
  std::string name() const override { return "hash-64"; }

 private:
  static constexpr size_t kDimension = 64;
};

struct Corpus {
  std::vector<std::string> vocabulary;
  std::discrete_distribution<size_t> zipf;
  std::mt19937_64 random{42};

  Corpus() {
    std::vector<double> weights;
    const char* syllables[] = {"ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa"};
    for (int i = 0; i < 20000; ++i) {
      std::string word;
      for (int n = i + 7; n > 0; n /= 10) word += syllables[n % 10];
      vocabulary.push_back(word);
      weights.push_back(1.0 / (i + 1));
    }
    zipf = std::discrete_distribution<size_t>(weights.begin(), weights.end());
  }
  std::string Word() { return vocabulary[zipf(random)]; }
  // Paragraphs of 40-80 words.
  std::string Document(size_t bytes) {
    std::string text;
    while (text.size() < bytes) {
      const int words = 40 + static_cast<int>(random() % 41);
      for (int i = 0; i < words; ++i) text += Word() + (i + 1 == words ? ".\n\n" : " ");
    }
    return text;
  }
};

double Percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<size_t>(p * values.size()))];
}

// The process's CPU seconds (user + system, all threads) so far.
double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  size_t target_chunks = 100000;
  size_t queries = 1000;
  size_t workers = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--chunks") == 0)
      target_chunks = std::strtoul(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--queries") == 0) queries = std::strtoul(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--workers") == 0) workers = std::strtoul(argv[i + 1], nullptr, 10);
  }
  char pattern[] = "/tmp/rampart-kb-bench-XXXXXX";
  if (mkdtemp(pattern) == nullptr) return 1;
  const std::string dir = pattern;
  auto store = rampart::store::OpenSqliteStore(dir + "/db");
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return 1;
  }
  FileStorage files(dir + "/files", nullptr, "");
  if (!files.Prepare().ok()) return 1;
  HashEmbedder embedder;

  // Files of 256 KB; a static 100-token chunk holds about 575 bytes of this text.
  Corpus corpus;
  constexpr size_t kFileBytes = 256 * 1024;
  const size_t file_count = std::max<size_t>(1, target_chunks * 575 / kFileBytes);
  std::vector<std::string> ids;
  size_t text_bytes = 0;
  for (size_t i = 0; i < file_count; ++i) {
    char id_text[32];
    std::snprintf(id_text, sizeof(id_text), "file-%024zu", i);
    const std::string id = id_text;
    const std::string text = corpus.Document(kFileBytes);
    text_bytes += text.size();
    (void)(*store)->CreateFile({.tenant = "bench",
                                .id = id,
                                .filename = "doc" + std::to_string(i) + ".txt",
                                .purpose = "assistants",
                                .bytes = static_cast<int64_t>(text.size())});
    auto writer = files.Create("bench", id);
    if (!writer.ok() || !(*writer)->Write(text).ok() || !(*writer)->Commit().ok()) return 1;
    ids.push_back(id);
  }

  VectorStoreServiceOptions options;
  options.workers = workers;
  options.sync_interval = std::chrono::milliseconds(50);
  VectorStoreServiceOptions with_snapshots = options;
  with_snapshots.snapshot_directory = dir + "/snapshots";
  auto service = NewVectorStoreService(store->get(), &files, &embedder, with_snapshots);
  if (!service.ok() || !(*service)->Start().ok()) return 1;
  const auto ingest_start = Clock::now();
  auto created = (*service)->CreateStore(
      "bench", {.name = "bench", .file_ids = ids, .chunking = ChunkingOptions::Static(100, 0)});
  if (!created.ok()) {
    std::fprintf(stderr, "%s\n", created.status().ToString().c_str());
    return 1;
  }
  while (true) {
    auto info = (*service)->GetStore("bench", created->id);
    if (info.ok() && info->file_counts.in_progress == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double ingest_seconds = Seconds(ingest_start);
  const auto info = (*service)->GetStore("bench", created->id);
  size_t chunks = 0;
  for (const std::string& id : ids) {
    auto content = (*service)->FileContent("bench", created->id, id);
    if (content.ok()) chunks += content->size();
  }
  std::printf(
      "ingestion: %zu files, %.1f MB of text, %zu chunks (%lld completed, %lld failed) in "
      "%.1f s: %.2f MB/s, %.0f chunks/s (%zu worker%s)\n",
      file_count, text_bytes / 1e6, chunks, static_cast<long long>(info->file_counts.completed),
      static_cast<long long>(info->file_counts.failed), ingest_seconds,
      text_bytes / 1e6 / ingest_seconds, chunks / ingest_seconds, workers, workers == 1 ? "" : "s");

  // The first instance writes its snapshot at stop; a second builds its indexes from the store.
  const auto stopping = Clock::now();
  const double stopping_cpu = CpuSeconds();
  (*service)->Stop();
  const double stop_seconds = Seconds(stopping);
  const double stop_cpu = CpuSeconds() - stopping_cpu;
  uintmax_t snapshot_bytes = 0;
  std::error_code walk;
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(with_snapshots.snapshot_directory, walk)) {
    if (entry.is_regular_file()) snapshot_bytes += entry.file_size();
  }
  std::printf("stop, writing the snapshot: %.1f s (CPU %.1f s), %.1f MB on disk\n", stop_seconds,
              stop_cpu, snapshot_bytes / 1e6);
  const auto restart = Clock::now();
  const double restart_cpu = CpuSeconds();
  auto second = NewVectorStoreService(store->get(), &files, &embedder, options);
  if (!second.ok() || !(*second)->Start().ok()) return 1;
  std::printf("start from the store (%zu chunks): %.1f s (CPU %.1f s)\n", chunks, Seconds(restart),
              CpuSeconds() - restart_cpu);

  std::vector<std::string> texts;
  for (size_t i = 0; i < queries; ++i)
    texts.push_back(corpus.Word() + " " + corpus.Word() + " " + corpus.Word());
  // The rebuilt instance's answers, for the one started from the snapshot to match.
  const size_t compared = std::min<size_t>(texts.size(), 200);
  std::vector<std::vector<std::pair<std::string, int>>> rebuilt_answers;
  const auto answers = [&](VectorStoreService& instance, const std::string& text, Ranker ranker) {
    SearchRequest request;
    request.queries = {text};
    request.ranker = ranker;
    std::vector<std::pair<std::string, int>> hits;
    auto found = instance.Search("bench", created->id, request);
    if (found.ok()) {
      for (const SearchHit& hit : found->hits) hits.emplace_back(hit.file_id, hit.chunk_index);
    }
    return hits;
  };
  for (size_t i = 0; i < compared; ++i) {
    for (const Ranker ranker : {Ranker::kKeyword, Ranker::kVector, Ranker::kHybrid}) {
      rebuilt_answers.push_back(answers(**second, texts[i], ranker));
    }
  }
  (*second)->Stop();
  second->reset();

  // A third instance starts from the snapshot.
  const auto loading = Clock::now();
  const double loading_cpu = CpuSeconds();
  auto third = NewVectorStoreService(store->get(), &files, &embedder, with_snapshots);
  if (!third.ok() || !(*third)->Start().ok()) return 1;
  const StartSummary summary = (*third)->start_summary();
  std::printf(
      "start from the snapshot: %.1f s (CPU %.1f s; %zu store loaded, %zu rebuilt, %zu changes "
      "replayed)\n",
      Seconds(loading), CpuSeconds() - loading_cpu, summary.stores_loaded, summary.stores_rebuilt,
      summary.changes_replayed);
  size_t same = 0;
  size_t index = 0;
  for (size_t i = 0; i < compared; ++i) {
    for (const Ranker ranker : {Ranker::kKeyword, Ranker::kVector, Ranker::kHybrid}) {
      if (answers(**third, texts[i], ranker) == rebuilt_answers[index++]) ++same;
    }
  }
  std::printf("answers equal to the rebuilt instance's: %zu of %zu\n", same, index);
  auto& searched = third;
  double p50[3] = {};
  const char* names[] = {"keyword", "vector", "hybrid"};
  const Ranker rankers[] = {Ranker::kKeyword, Ranker::kVector, Ranker::kHybrid};
  for (int r = 0; r < 3; ++r) {
    std::vector<double> micros;
    size_t hits = 0;
    for (const std::string& text : texts) {
      SearchRequest request;
      request.queries = {text};
      request.ranker = rankers[r];
      const auto start = Clock::now();
      auto found = (*searched)->Search("bench", created->id, request);
      micros.push_back(Seconds(start) * 1e6);
      if (found.ok()) hits += found->hits.size();
    }
    p50[r] = Percentile(micros, 0.5);
    std::printf("search %-7s top 10: p50 %.0f us, p99 %.0f us (%.1f hits a query)\n", names[r],
                p50[r], Percentile(micros, 0.99), static_cast<double>(hits) / texts.size());
  }
  std::printf("hybrid / keyword p50: %.2fx\n", p50[2] / p50[0]);
  (*searched)->Stop();
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return 0;
}
