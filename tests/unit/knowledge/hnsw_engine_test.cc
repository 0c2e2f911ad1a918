#include "knowledge/index/hnsw_engine.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "knowledge/engine_test_util.h"
#include "knowledge/index/engine.h"

namespace rampart::knowledge {
namespace {

using testing::Record;
using testing::Upsert;

using testing::BruteForce;
using testing::ClusteredVectors;
using testing::RandomMetadata;

std::unique_ptr<IndexEngine> MakeEngine(size_t dimension, Metric metric,
                                        size_t max_memory_bytes = 0) {
  EngineOptions options;
  options.dimension = dimension;
  options.metric = metric;
  options.max_memory_bytes = max_memory_bytes;
  auto engine = NewHnswEngine(options);
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  return std::move(*engine);
}

HnswEngine& Hnsw(IndexEngine& engine) { return static_cast<HnswEngine&>(engine); }

void DeleteIds(IndexEngine& engine, std::string_view name_space, std::vector<std::string> ids) {
  DeleteRequest request;
  request.name_space = std::string(name_space);
  request.ids = std::move(ids);
  auto op = engine.ResolveDelete(request);
  ASSERT_TRUE(op.ok()) << op.status().ToString();
  engine.Apply(*op);
}

QueryResult Query(const IndexEngine& engine, std::vector<float> vector, size_t top_k,
                  const FilterNode* filter = nullptr, std::string name_space = "") {
  QueryRequest request;
  request.name_space = std::move(name_space);
  request.vector = std::move(vector);
  request.top_k = top_k;
  if (filter != nullptr) request.filter = *filter;
  auto result = engine.Query(request);
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  return result.ok() ? *result : QueryResult{};
}

// A populated engine and the reference copy of its records.
struct Corpus {
  std::unique_ptr<IndexEngine> engine;
  std::map<std::string, VectorRecord> records;
};

Corpus MakeCorpus(size_t count, size_t dimension, Metric metric, uint32_t seed) {
  Corpus corpus{MakeEngine(dimension, metric), {}};
  ClusteredVectors vectors(dimension, 20, seed);
  std::vector<VectorRecord> batch;
  for (size_t i = 0; i < count; ++i) {
    VectorRecord record =
        Record(fmt::format("id-{:06}", i), vectors.Next(), RandomMetadata(vectors.random()));
    corpus.records[record.id] = record;
    batch.push_back(std::move(record));
    if (batch.size() == kMaxUpsertRecords || i + 1 == count) {
      Upsert(*corpus.engine, "", std::move(batch));
      batch.clear();
    }
  }
  return corpus;
}

FilterNode Eq(std::string field, FilterNode::Scalar value) {
  FilterNode node;
  node.op = FilterNode::Op::kEq;
  node.field = std::move(field);
  node.operands.push_back(std::move(value));
  return node;
}

FilterNode Compare(FilterNode::Op op, std::string field, std::vector<FilterNode::Scalar> values) {
  FilterNode node;
  node.op = op;
  node.field = std::move(field);
  node.operands = std::move(values);
  return node;
}

FilterNode And(std::vector<FilterNode> children) {
  FilterNode node;
  node.op = FilterNode::Op::kAnd;
  node.children = std::move(children);
  return node;
}

TEST(HnswEngineTest, UpsertFetchQueryScores) {
  for (Metric metric : {Metric::kCosine, Metric::kDotProduct, Metric::kEuclidean}) {
    auto engine = MakeEngine(3, metric);
    Upsert(*engine, "", {Record("a", {1, 0, 0}), Record("b", {0, 2, 0}), Record("c", {1, 1, 0})});
    QueryResult result = Query(*engine, {1, 0.5f, 0}, 3);
    ASSERT_EQ(result.matches.size(), 3u);
    std::map<std::string, VectorRecord> records;
    for (const auto& record : engine->Fetch("", std::vector<std::string>{"a", "b", "c"})) {
      records[record.id] = record;
    }
    auto expected = BruteForce(metric, records, {1, 0.5f, 0}, nullptr, 3);
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(result.matches[i].id, expected[i].id) << MetricName(metric);
      EXPECT_NEAR(result.matches[i].score, expected[i].score, 1e-5) << MetricName(metric);
    }
  }
}

TEST(HnswEngineTest, CosineKeepsOriginalValues) {
  auto engine = MakeEngine(2, Metric::kCosine);
  Upsert(*engine, "", {Record("a", {3, 4})});
  auto fetched = engine->Fetch("", std::vector<std::string>{"a", "missing"});
  ASSERT_EQ(fetched.size(), 1u);
  EXPECT_EQ(fetched[0].values, (std::vector<float>{3, 4}));
  QueryRequest request;
  request.id = "a";
  request.top_k = 1;
  request.include_values = true;
  auto result = engine->Query(request);
  ASSERT_TRUE(result.ok());
  ASSERT_EQ(result->matches.size(), 1u);
  EXPECT_EQ(*result->matches[0].values, (std::vector<float>{3, 4}));
  EXPECT_NEAR(result->matches[0].score, 1.0, 1e-6);
}

TEST(HnswEngineTest, FilteredQueriesMatchBruteForceAtEverySelectivity) {
  Corpus corpus = MakeCorpus(6000, 16, Metric::kCosine, 7);
  std::vector<FilterNode> filters = {
      Eq("rare", std::string("x")),                                   // ~0.5%
      Eq("genre", std::string("noir")),                               // ~18%
      Compare(FilterNode::Op::kGte, "year", {1960.0}),                // ~85%
      Compare(FilterNode::Op::kNe, "genre", {std::string("drama")}),  // ~82%, no index
      Compare(FilterNode::Op::kNin, "tags", {std::string("a"), std::string("b")}),
      And({Eq("flag", true), Compare(FilterNode::Op::kLt, "year", {1970.0})}),
      Compare(FilterNode::Op::kExists, "tags", {false}),
  };
  ClusteredVectors queries(16, 20, 7);  // the same centres as the corpus
  for (size_t f = 0; f < filters.size(); ++f) {
    for (int q = 0; q < 10; ++q) {
      std::vector<float> query = queries.Next();
      QueryResult result = Query(*corpus.engine, query, 20, &filters[f]);
      auto expected = BruteForce(Metric::kCosine, corpus.records, query, &filters[f], 20);
      ASSERT_EQ(result.matches.size(), expected.size())
          << "filter " << f << " plan " << result.plan;
      std::set<std::string> got;
      for (const Match& match : result.matches) {
        EXPECT_TRUE(FilterMatches(filters[f], corpus.records[match.id].metadata));
        got.insert(match.id);
      }
      if (result.plan == "exact") {
        for (size_t i = 0; i < expected.size(); ++i) {
          EXPECT_NEAR(result.matches[i].score, expected[i].score, 1e-4) << "filter " << f;
        }
      } else {
        size_t hits = 0;
        for (const auto& scored : expected) hits += got.count(scored.id);
        EXPECT_GE(hits, expected.size() * 8 / 10) << "filter " << f << " plan " << result.plan;
      }
    }
  }
}

TEST(HnswEngineTest, RecallOfTheGraphAgainstExactSearch) {
  Corpus corpus = MakeCorpus(20000, 32, Metric::kEuclidean, 11);
  ClusteredVectors queries(32, 20, 11);
  size_t hits = 0;
  size_t total = 0;
  for (int q = 0; q < 100; ++q) {
    std::vector<float> query = queries.Next();
    QueryResult result = Query(*corpus.engine, query, 10);
    EXPECT_EQ(result.plan, "hnsw");
    std::set<std::string> got;
    for (const Match& match : result.matches) got.insert(match.id);
    for (const auto& scored : BruteForce(Metric::kEuclidean, corpus.records, query, nullptr, 10)) {
      hits += got.count(scored.id);
      ++total;
    }
  }
  EXPECT_GE(static_cast<double>(hits) / static_cast<double>(total), 0.95);
}

TEST(HnswEngineTest, DeletedAndReplacedVectorsAreNeverFound) {
  Corpus corpus = MakeCorpus(3000, 8, Metric::kDotProduct, 3);
  std::vector<std::string> deleted;
  std::vector<VectorRecord> replaced;
  ClusteredVectors vectors(8, 20, 99);
  for (size_t i = 0; i < 3000; i += 3) deleted.push_back(fmt::format("id-{:06}", i));
  for (size_t i = 1; i < 3000; i += 3) {
    replaced.push_back(
        Record(fmt::format("id-{:06}", i), vectors.Next(), {{"genre", std::string("new")}}));
  }
  for (size_t i = 0; i < deleted.size(); i += kMaxIdsPerCall) {
    DeleteIds(
        *corpus.engine, "",
        std::vector<std::string>(deleted.begin() + i,
                                 deleted.begin() + std::min(deleted.size(), i + kMaxIdsPerCall)));
  }
  Upsert(*corpus.engine, "", replaced);
  std::set<std::string> gone(deleted.begin(), deleted.end());
  for (const auto& record : replaced) corpus.records[record.id] = record;
  for (const auto& id : deleted) corpus.records.erase(id);
  auto check = [&] {
    ClusteredVectors queries(8, 20, 3);
    FilterNode old_genre = Compare(FilterNode::Op::kNe, "genre", {std::string("new")});
    for (int q = 0; q < 20; ++q) {
      QueryResult result = Query(*corpus.engine, queries.Next(), 200);
      EXPECT_EQ(result.matches.size(), 200u);
      for (const Match& match : result.matches) EXPECT_EQ(gone.count(match.id), 0u) << match.id;
      // Replaced records are found only with their new metadata.
      QueryResult filtered = Query(*corpus.engine, queries.Next(), 50, &old_genre);
      for (const Match& match : filtered.matches) {
        EXPECT_EQ(gone.count(match.id), 0u);
        EXPECT_NE(std::stoi(match.id.substr(3)) % 3, 1) << "replaced, found by its old metadata";
      }
    }
    auto stats = corpus.engine->Stats(nullptr);
    ASSERT_TRUE(stats.ok());
    EXPECT_EQ(stats->total_vector_count, 2000u);
  };
  check();
  // Compaction keeps every live record and the answers.
  HnswEngine& hnsw = Hnsw(*corpus.engine);
  hnsw.WaitForCompactions();
  uint64_t before = hnsw.compactions_done();
  hnsw.CompactAll();
  hnsw.WaitForCompactions();
  EXPECT_GT(hnsw.compactions_done(), before);
  check();
  ClusteredVectors queries(8, 20, 5);
  for (int q = 0; q < 10; ++q) {
    std::vector<float> query = queries.Next();
    QueryResult result = Query(*corpus.engine, query, 10);
    auto expected = BruteForce(Metric::kDotProduct, corpus.records, query, nullptr, 10);
    std::set<std::string> got;
    for (const Match& match : result.matches) got.insert(match.id);
    size_t hits = 0;
    for (const auto& scored : expected) hits += got.count(scored.id);
    EXPECT_GE(hits, 8u);
  }
}

TEST(HnswEngineTest, ListPagesInByteOrderWithPrefix) {
  auto engine = MakeEngine(2, Metric::kEuclidean);
  std::vector<VectorRecord> records;
  for (int i = 0; i < 25; ++i) records.push_back(Record(fmt::format("doc#{:02}", i), {1, 2}));
  records.push_back(Record("other", {1, 2}));
  Upsert(*engine, "ns", records);
  std::vector<std::string> seen;
  std::string token;
  int pages = 0;
  do {
    auto page = engine->List("ns", "doc#", 10, token);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    seen.insert(seen.end(), page->ids.begin(), page->ids.end());
    token = page->next_token;
    ++pages;
  } while (!token.empty());
  EXPECT_EQ(pages, 3);
  ASSERT_EQ(seen.size(), 25u);
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  EXPECT_EQ(engine->List("ns", "", 100, "")->ids.size(), 26u);
  EXPECT_FALSE(engine->List("ns", "", 10, "not-hex!").ok());
  EXPECT_FALSE(engine->List("ns", "", 0, "").ok());
  EXPECT_TRUE(engine->List("absent", "", 10, "")->ids.empty());
}

}  // namespace
}  // namespace rampart::knowledge
