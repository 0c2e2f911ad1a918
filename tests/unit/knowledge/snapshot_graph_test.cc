// Snapshots that carry the namespaces' HNSW graphs (format 2): loading them gives the index that
// was saved, a graph that fails any check is rebuilt from the records, format 1 still loads.

#include <cstring>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "crypto/digest.h"
#include "engine_test_util.h"
#include "knowledge/index/durable_files.h"
#include "knowledge/index/hnsw_engine.h"
#include "knowledge/index/snapshot.h"
#include "map_engine.h"
#include "temp_folder.h"
#include "test_keyring.h"

namespace rampart::knowledge {
namespace {

EngineOptions Options(size_t m = 8) {
  EngineOptions options;
  options.dimension = 16;
  options.metric = Metric::kCosine;
  options.hnsw_m = m;
  options.ef_construction = 40;
  options.default_ef = 20;         // narrow, so that a graph built otherwise answers otherwise
  options.compaction_ratio = 1.0;  // keep the tombstones in the graph
  return options;
}

// Two namespaces, then replacements and deletes, so that the graphs hold tombstones and the
// slots have gaps.
std::unique_ptr<HnswEngine> Filled(const EngineOptions& options, size_t count) {
  auto engine = std::make_unique<HnswEngine>(options);
  testing::ClusteredVectors vectors(options.dimension, 12, 7);
  for (const std::string name_space : {"", "other"}) {
    for (size_t first = 0; first < count; first += 100) {
      std::vector<VectorRecord> records;
      for (size_t i = first; i < std::min(count, first + 100); ++i) {
        records.push_back({fmt::format("id-{}", i),
                           vectors.Next(),
                           {},
                           testing::RandomMetadata(vectors.random())});
      }
      engine->Apply(WriteOp{name_space, UpsertOp{std::move(records)}});
    }
    for (size_t i = 0; i < count; i += 7) {  // replaced
      engine->Apply(WriteOp{name_space, UpsertOp{{{fmt::format("id-{}", i), vectors.Next()}}}});
    }
    std::vector<std::string> deleted;
    for (size_t i = 3; i < count; i += 11) deleted.push_back(fmt::format("id-{}", i));
    engine->Apply(WriteOp{name_space, DeleteIdsOp{deleted}});
  }
  return engine;
}

// The answers of `engine` to a fixed set of queries in `name_space`, as text: the planner's path,
// then id:score of each match; and the namespace's count.
std::vector<std::string> Answers(const IndexEngine& engine, const std::string& name_space,
                                 size_t ef = 0) {
  testing::ClusteredVectors vectors(engine.options().dimension, 12, 99);
  std::vector<std::string> answers;
  for (int q = 0; q < 40; ++q) {
    QueryRequest request;
    request.name_space = name_space;
    request.top_k = 10;
    request.ef = ef;
    request.vector = vectors.Next();
    auto result = engine.Query(request);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    if (!result.ok()) continue;
    std::string answer(result->plan);
    for (const Match& match : result->matches) {
      answer += fmt::format(" {}:{}", match.id, match.score);
    }
    answers.push_back(answer);
  }
  auto stats = engine.Stats(nullptr);
  EXPECT_TRUE(stats.ok());
  for (const auto& ns : stats->namespaces) {
    if (ns.name_space == name_space) answers.push_back(fmt::format("count {}", ns.vector_count));
  }
  return answers;
}

std::vector<std::string> Answers(const IndexEngine& engine, size_t ef = 0) {
  std::vector<std::string> answers = Answers(engine, "", ef);
  for (std::string& answer : Answers(engine, "other", ef)) answers.push_back(std::move(answer));
  return answers;
}

// The share of the ids in `a`'s answers that are in `b`'s.
double Overlap(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  size_t total = 0, shared = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    std::set<std::string> ids;
    std::istringstream right(b[i]);
    for (std::string word; right >> word;) ids.insert(word.substr(0, word.find(':')));
    std::istringstream left(a[i]);
    for (std::string word; left >> word;) {
      ++total;
      shared += ids.contains(word.substr(0, word.find(':')));
    }
  }
  return total == 0 ? 0 : static_cast<double>(shared) / static_cast<double>(total);
}

// A view whose graphs are changed by `tamper`.
class TamperedView final : public EngineView {
 public:
  TamperedView(std::unique_ptr<EngineView> inner,
               const std::function<void(std::vector<NamespaceGraph>&)>& tamper)
      : inner_(std::move(inner)), graphs_(inner_->graphs()) {
    tamper(graphs_);
  }
  Status ForEach(
      const std::function<Status(std::string_view, const VectorRecord&)>& visit) const override {
    return inner_->ForEach(visit);
  }
  uint64_t record_count() const override { return inner_->record_count(); }
  const std::vector<NamespaceGraph>& graphs() const override { return graphs_; }

 private:
  std::unique_ptr<EngineView> inner_;
  std::vector<NamespaceGraph> graphs_;
};

TEST(SnapshotGraphTest, ReopeningLoadsTheGraphsAndAnswersAsBeforeClosing) {
  testing::TempFolder folder;
  const EngineOptions options = Options();
  const auto source = Filled(options, 1500);
  ASSERT_GT(source->View()->graphs().size(), 0u);
  auto written = WriteSnapshot(folder.path(), *source->View(), 5, options, {});
  ASSERT_TRUE(written.ok()) << written.status().ToString();

  HnswEngine loaded(options);
  auto info = LoadSnapshot(written->path, options, {}, loaded);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->graphs_loaded, 2u);
  EXPECT_EQ(info->graphs_rebuilt, 0u);
  const std::vector<std::string> before = Answers(*source);
  EXPECT_EQ(Answers(loaded), before);
  const std::vector<std::string> ids = {"id-0", "id-3", "id-7", "id-10", "id-1499"};
  for (const std::string name_space : {"", "other"}) {
    EXPECT_EQ(loaded.Fetch(name_space, ids).size(), source->Fetch(name_space, ids).size());
    for (size_t i = 0; i < source->Fetch(name_space, ids).size(); ++i) {
      EXPECT_TRUE(
          testing::SameRecord(loaded.Fetch(name_space, ids)[i], source->Fetch(name_space, ids)[i]));
    }
  }
  // The graph held tombstones; they stay hidden and count towards compaction as before.
  EXPECT_EQ(loaded.MemoryBytes() > 0, true);

  // A rebuilt index (the records only, as format 1 and a fallback load them) is another graph,
  // so it answers alike only where the search is broad enough to be near exact.
  HnswEngine rebuilt(options);
  auto records_only = WriteSnapshot(
      folder.path(), TamperedView(source->View(), [](auto& graphs) { graphs.clear(); }), 6, options,
      {});
  ASSERT_TRUE(records_only.ok());
  auto rebuilt_info = LoadSnapshot(records_only->path, options, {}, rebuilt);
  ASSERT_TRUE(rebuilt_info.ok());
  EXPECT_EQ(rebuilt_info->graphs_loaded, 0u);
  EXPECT_EQ(Answers(rebuilt).size(), before.size());
  EXPECT_GE(Overlap(Answers(rebuilt, 400), Answers(*source, 400)), 0.97);

  // Writes after loading: a new record, a replacement and a delete behave as on the source.
  for (IndexEngine* engine :
       {static_cast<IndexEngine*>(source.get()), static_cast<IndexEngine*>(&loaded)}) {
    std::vector<float> values(options.dimension, 0.25f);
    values[0] = 5;
    engine->Apply(WriteOp{"", UpsertOp{{{"fresh", values}, {"id-1", values}}}});
    engine->Apply(WriteOp{"", DeleteIdsOp{{"id-2"}}});
  }
  EXPECT_EQ(Answers(loaded), Answers(*source));
  HnswEngine& loaded_engine = loaded;
  loaded_engine.CompactAll();
  loaded_engine.WaitForCompactions();
  EXPECT_EQ(loaded_engine.compactions_done(), 2u);
  EXPECT_EQ(loaded_engine.Stats(nullptr)->total_vector_count,
            source->Stats(nullptr)->total_vector_count);
}

TEST(SnapshotGraphTest, AGraphThatFailsAnyCheckIsRebuiltFromTheRecords) {
  testing::TempFolder folder;
  const EngineOptions options = Options();
  const auto source = Filled(options, 600);
  HnswEngine reference(options);
  {
    auto plain = WriteSnapshot(folder.path(),
                               TamperedView(source->View(), [](auto& graphs) { graphs.clear(); }),
                               1, options, {});
    ASSERT_TRUE(plain.ok());
    ASSERT_TRUE(LoadSnapshot(plain->path, options, {}, reference).ok());
  }
  const std::vector<std::string> rebuilt_answers = Answers(reference, "");
  const std::vector<std::string> loaded_answers = Answers(*source, "other");

  using Tamper = std::function<void(std::vector<NamespaceGraph>&)>;
  const std::vector<std::pair<std::string, Tamper>> cases = {
      {"truncated", [](auto& graphs) { graphs[0].graph.resize(graphs[0].graph.size() - 9); }},
      {"another layout", [](auto& graphs) { graphs[0].graph[5] ^= 1; }},
      {"a link out of range",
       [](auto& graphs) {
         // Somewhere in the level-0 block: every byte there is a link, a value or a label.
         for (size_t i = 200; i < graphs[0].graph.size() / 2; i += 101) graphs[0].graph[i] ^= 0x40;
       }},
      {"a node count the bytes cannot hold",
       [](auto& graphs) {
         // After the layout: its tag (a U32 length and 36 bytes), 3 U32 sizes and 9 U64 sizes.
         const uint64_t count = 0x7fff0000;
         std::memcpy(graphs[0].graph.data() + 4 + 36 + 12 + 72, &count, 8);
       }},
      {"labels swapped", [](auto& graphs) { std::swap(graphs[0].labels[0], graphs[0].labels[1]); }},
      {"a label missing", [](auto& graphs) { graphs[0].labels[3] = 1u << 30; }},
      {"too few labels", [](auto& graphs) { graphs[0].labels.pop_back(); }},
      {"one namespace's graph as another's",
       [](auto& graphs) { std::swap(graphs[0].graph, graphs[1].graph); }},
  };
  uint64_t sequence = 10;
  for (const auto& [name, tamper] : cases) {
    SCOPED_TRACE(name);
    auto written =
        WriteSnapshot(folder.path(), TamperedView(source->View(), tamper), ++sequence, options, {});
    ASSERT_TRUE(written.ok());
    HnswEngine loaded(options);
    auto info = LoadSnapshot(written->path, options, {}, loaded);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_GE(info->graphs_rebuilt, 1u);
    EXPECT_EQ(info->graphs_loaded + info->graphs_rebuilt, 2u);
    // The first namespace's graph is the damaged one: rebuilt as from the records alone.
    EXPECT_EQ(Answers(loaded, ""), rebuilt_answers);
    if (info->graphs_rebuilt == 1) {
      EXPECT_EQ(Answers(loaded, "other"), loaded_answers);
    } else {
      EXPECT_EQ(info->graphs_rebuilt, 2u);  // both graphs swapped
    }
  }
}

TEST(SnapshotGraphTest, AFormatOneSnapshotStillLoads) {
  testing::TempFolder folder;
  const EngineOptions options = Options();
  const auto source = Filled(options, 300);
  auto written = WriteSnapshot(folder.path(),
                               TamperedView(source->View(), [](auto& graphs) { graphs.clear(); }),
                               3, options, {});
  ASSERT_TRUE(written.ok());
  // Format 2 without graphs is format 1 with an empty graph section: turn it into format 1
  // (version 1, no section, the digest recomputed), as an older Rampart wrote it.
  std::string bytes = *ReadWholeFile(written->path);
  const size_t header = 8 + 4 + 1 + 4 + 1 + 8 + 8;
  ASSERT_EQ(bytes.substr(header, 4), std::string(4, '\0'));
  bytes.erase(header, 4);
  bytes[8] = 1;
  bytes.resize(bytes.size() - 32);
  const crypto::Digest digest = crypto::Hash(crypto::DigestAlgorithm::kSha256, bytes);
  bytes.append(reinterpret_cast<const char*>(digest.data()), 32);
  std::ofstream(written->path, std::ios::binary | std::ios::trunc) << bytes;

  HnswEngine loaded(options);
  auto info = LoadSnapshot(written->path, options, {}, loaded);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->graphs_loaded, 0u);
  EXPECT_EQ(info->record_count, source->View()->record_count());
  EXPECT_EQ(loaded.Stats(nullptr)->total_vector_count, source->Stats(nullptr)->total_vector_count);
}

TEST(SnapshotGraphTest, SealedSnapshotsCarryTheGraphsAcrossChunks) {
  testing::TempFolder folder;
  testing::TestKeyring keys(folder.path(), 'a');
  const EngineOptions options = Options(64);  // 532 bytes of links a node
  const auto source = Filled(options, 4000);  // graphs over 4 MiB: several sealed chunks
  size_t graph_bytes = 0;
  const auto view = source->View();  // held: the loop reads the view's graphs
  for (const auto& graph : view->graphs()) graph_bytes += graph.graph.size();
  ASSERT_GT(graph_bytes, size_t{4} << 20);
  const SnapshotSealing sealing{keys.keyring.get(), "movies"};
  auto written = WriteSnapshot(folder.path(), *source->View(), 9, options, sealing);
  ASSERT_TRUE(written.ok()) << written.status().ToString();

  HnswEngine loaded(options);
  auto info = LoadSnapshot(written->path, options, sealing, loaded);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->graphs_loaded, 2u);
  EXPECT_EQ(Answers(loaded), Answers(*source));

  HnswEngine other_index(options);
  EXPECT_FALSE(
      LoadSnapshot(written->path, options, {keys.keyring.get(), "books"}, other_index).ok());
}

}  // namespace
}  // namespace rampart::knowledge
