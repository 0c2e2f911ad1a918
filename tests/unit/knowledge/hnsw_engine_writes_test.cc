// The engine's writes: updates, deletes, the memory limit, validation, views, hybrid scores, and
// readers running beside the writer.

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "knowledge/engine_test_util.h"
#include "knowledge/index/engine.h"
#include "knowledge/index/hnsw_engine.h"

namespace rampart::knowledge {
namespace {

using testing::Record;
using testing::Upsert;

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

void ExpectError(const Status& status, StatusCode code, std::string_view fragment) {
  EXPECT_EQ(status.code(), code) << status.ToString();
  EXPECT_NE(status.message().find(fragment), std::string::npos) << status.message();
}

TEST(HnswEngineWritesTest, OptionsOutOfRangeAreRefused) {
  EngineOptions options;
  EXPECT_FALSE(NewHnswEngine(options).ok());  // dimension 0
  options.dimension = kMaxDimension + 1;
  EXPECT_FALSE(NewHnswEngine(options).ok());
  options.dimension = 4;
  options.hnsw_m = 1;
  EXPECT_FALSE(NewHnswEngine(options).ok());
  options.hnsw_m = 16;
  options.compaction_ratio = 0;
  EXPECT_FALSE(NewHnswEngine(options).ok());
  options.compaction_ratio = 0.25;
  EXPECT_TRUE(NewHnswEngine(options).ok());
}

TEST(HnswEngineWritesTest, UpdateMergesMetadataAndReplacesValues) {
  auto engine = MakeEngine(2, Metric::kEuclidean);
  Upsert(*engine, "ns", {Record("a", {0, 0}, {{"genre", std::string("noir")}, {"year", 1990.0}})});
  UpdateRequest update;
  update.name_space = "ns";
  update.id = "a";
  update.values = std::vector<float>{5, 5};
  update.set_metadata = Metadata{{"year", 2000.0}, {"added", true}};
  auto op = engine->ResolveUpdate(update);
  ASSERT_TRUE(op.ok()) << op.status().ToString();
  ASSERT_TRUE(op->has_value());
  engine->Apply(**op);
  auto fetched = engine->Fetch("ns", std::vector<std::string>{"a"});
  ASSERT_EQ(fetched.size(), 1u);
  EXPECT_EQ(fetched[0].values, (std::vector<float>{5, 5}));
  EXPECT_EQ(fetched[0].metadata,
            (Metadata{{"added", true}, {"genre", std::string("noir")}, {"year", 2000.0}}));
  update.id = "absent";
  auto absent = engine->ResolveUpdate(update);
  ASSERT_TRUE(absent.ok());
  EXPECT_FALSE(absent->has_value());
  update.id = "a";
  update.values = std::vector<float>{1};
  ExpectError(engine->ResolveUpdate(update).status(), StatusCode::kInvalidArgument,
              "dimension 1 does not match");
}

TEST(HnswEngineWritesTest, DeleteByFilterAllAndIds) {
  auto engine = MakeEngine(2, Metric::kDotProduct);
  std::vector<VectorRecord> records;
  for (int i = 0; i < 10; ++i) {
    records.push_back(
        Record(fmt::format("r{}", i), {1, static_cast<float>(i)}, {{"even", i % 2 == 0}}));
  }
  Upsert(*engine, "", records);
  Upsert(*engine, "other", {Record("x", {1, 1})});
  DeleteRequest by_filter;
  FilterNode even;
  even.op = FilterNode::Op::kEq;
  even.field = "even";
  even.operands = {true};
  by_filter.filter = even;
  auto op = engine->ResolveDelete(by_filter);
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(std::get<DeleteIdsOp>(op->change).ids.size(), 5u);
  engine->Apply(*op);
  EXPECT_EQ(engine->Stats(nullptr)->total_vector_count, 6u);
  FilterNode odd = even;
  odd.operands = {false};
  auto stats = engine->Stats(&odd);
  ASSERT_TRUE(stats.ok());
  ASSERT_EQ(stats->namespaces.size(), 1u);  // "other" has no match and is left out
  EXPECT_EQ(stats->namespaces[0].vector_count, 5u);

  DeleteRequest two_ways;
  two_ways.ids = {"r1"};
  two_ways.delete_all = true;
  ExpectError(engine->ResolveDelete(two_ways).status(), StatusCode::kInvalidArgument,
              "exactly one of ids, deleteAll and filter");
  DeleteRequest all;
  all.name_space = "__default__";
  all.delete_all = true;
  engine->Apply(*engine->ResolveDelete(all));
  stats = engine->Stats(nullptr);
  ASSERT_EQ(stats->namespaces.size(), 1u);
  EXPECT_EQ(stats->namespaces[0].name_space, "other");
  QueryRequest query;
  query.vector = {1, 1};
  query.top_k = 3;
  EXPECT_EQ(engine->Query(query)->plan, "empty");
  // A namespace made again after deleteAll starts empty.
  Upsert(*engine, "", {Record("new", {1, 2})});
  EXPECT_EQ(engine->Query(query)->matches.size(), 1u);
}

TEST(HnswEngineWritesTest, QueryAndUpsertErrors) {
  auto engine = MakeEngine(3, Metric::kCosine);
  Upsert(*engine, "", {Record("a", {1, 2, 3})});
  QueryRequest query;
  query.vector = {1, 2, 3};
  query.top_k = 0;
  ExpectError(engine->Query(query).status(), StatusCode::kInvalidArgument, "topK must be 1..10000");
  query.top_k = kMaxTopK + 1;
  EXPECT_FALSE(engine->Query(query).ok());
  query.top_k = 5;
  query.id = "a";
  ExpectError(engine->Query(query).status(), StatusCode::kInvalidArgument,
              "exactly one of vector and id");
  query.vector.clear();
  query.id = "absent";
  ExpectError(engine->Query(query).status(), StatusCode::kNotFound, "no vector with id 'absent'");
  query.id.reset();
  query.vector = {1, 2};
  ExpectError(engine->Query(query).status(), StatusCode::kInvalidArgument, "dimension 2");
  query.vector = {1, 2, 3};
  query.sparse = SparseValues{{1}, {1.0f}};
  ExpectError(engine->Query(query).status(), StatusCode::kInvalidArgument,
              "only by indexes with the dotproduct metric");

  ExpectError(engine->ResolveUpsert("", {}).status(), StatusCode::kInvalidArgument,
              "at least one vector");
  ExpectError(engine->ResolveUpsert("", {Record("ok", {1, 2, 3}), Record("bad", {1, 2})}).status(),
              StatusCode::kInvalidArgument, "vectors[1]: values: vector dimension 2");
  std::vector<VectorRecord> many(kMaxUpsertRecords + 1, Record("x", {1, 2, 3}));
  ExpectError(engine->ResolveUpsert("", many).status(), StatusCode::kInvalidArgument,
              "over the limit of 1000 per upsert");
  ExpectError(
      engine->ResolveUpsert(std::string(kMaxNamespaceBytes + 1, 'n'), {Record("x", {1, 2, 3})})
          .status(),
      StatusCode::kInvalidArgument, "namespace");
}

TEST(HnswEngineWritesTest, MemoryLimitRefusesUpsertsAndDeletesFreeRoom) {
  constexpr size_t kLimit = 2 * 1024 * 1024;
  auto engine = MakeEngine(64, Metric::kEuclidean, kLimit);
  testing::ClusteredVectors vectors(64, 4, 1);
  size_t written = 0;
  Status refused;
  for (int batch = 0; batch < 100 && refused.ok(); ++batch) {
    std::vector<VectorRecord> records;
    for (int i = 0; i < 100; ++i)
      records.push_back(Record(fmt::format("v{}", written + i), vectors.Next()));
    auto op = engine->ResolveUpsert("ns", records);
    if (!op.ok()) {
      refused = op.status();
      break;
    }
    engine->Apply(*op);
    written += records.size();
  }
  ExpectError(refused, StatusCode::kResourceExhausted, "over its memory limit of 2097152 bytes");
  EXPECT_GT(written, 0u);
  EXPECT_LE(engine->MemoryBytes(), kLimit);
  EXPECT_GT(engine->Stats(nullptr)->fullness, 0.5);
  DeleteRequest all;
  all.name_space = "ns";
  all.delete_all = true;
  engine->Apply(*engine->ResolveDelete(all));
  EXPECT_EQ(engine->MemoryBytes(), 0u);
  EXPECT_TRUE(engine->ResolveUpsert("ns", {Record("again", vectors.Next())}).ok());
}

TEST(HnswEngineWritesTest, HybridScoresAddTheSparseDotProduct) {
  auto engine = MakeEngine(2, Metric::kDotProduct);
  VectorRecord a = Record("a", {1, 0});
  a.sparse = SparseValues{{3, 7}, {2.0f, 1.0f}};
  VectorRecord b = Record("b", {1.5f, 0});
  Upsert(*engine, "", {a, b});
  QueryRequest query;
  query.vector = {1, 0};
  query.top_k = 2;
  query.include_values = true;
  EXPECT_EQ(engine->Query(query)->matches[0].id, "b");  // dense only: 1.5 > 1
  query.sparse = SparseValues{{7, 9}, {1.0f, 5.0f}};
  auto result = engine->Query(query);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->matches[0].id, "a");  // 1 + 1*1 > 1.5
  EXPECT_FLOAT_EQ(result->matches[0].score, 2.0f);
  ASSERT_TRUE(result->matches[0].sparse.has_value());
  EXPECT_EQ(result->matches[0].sparse->indices, (std::vector<uint32_t>{3, 7}));
}

TEST(HnswEngineWritesTest, ViewIsACutThatLaterWritesDoNotChange) {
  auto engine = MakeEngine(2, Metric::kEuclidean);
  Upsert(*engine, "a", {Record("1", {1, 1}), Record("2", {2, 2})});
  Upsert(*engine, "b", {Record("3", {3, 3})});
  auto view = engine->View();
  Upsert(*engine, "a", {Record("1", {9, 9}), Record("4", {4, 4})});
  DeleteRequest all;
  all.name_space = "b";
  all.delete_all = true;
  engine->Apply(*engine->ResolveDelete(all));
  EXPECT_EQ(view->record_count(), 3u);
  std::vector<std::string> seen;
  ASSERT_TRUE(view->ForEach([&](std::string_view name_space, const VectorRecord& record) {
                    seen.push_back(
                        fmt::format("{}/{}={}", name_space, record.id, record.values[0]));
                    return Status::Ok();
                  })
                  .ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"a/1=1", "a/2=2", "b/3=3"}));
  Status stop =
      view->ForEach([](std::string_view, const VectorRecord&) { return InvalidArgument("stop"); });
  EXPECT_EQ(stop.message(), "stop");
}

// One writer upserts pairs of records (one Apply each), re-upserting earlier pairs so that
// tombstones and compactions happen; readers check they see every pair whole or not at all,
// and every pair whose Apply returned before they looked.
TEST(HnswEngineWritesTest, ReadersSeeEachApplyWholeWhileTheWriterRuns) {
  EngineOptions options;
  options.dimension = 8;
  options.metric = Metric::kCosine;
  auto made = NewHnswEngine(options);
  ASSERT_TRUE(made.ok());
  auto& engine = static_cast<HnswEngine&>(**made);
  constexpr int kPairs = 1500;
  std::atomic<int> applied{0};
  std::atomic<bool> done{false};
  std::atomic<int> failures{0};
  testing::ClusteredVectors vectors(8, 8, 5);
  auto pair = [&](int i) {
    Metadata metadata = {{"pair", static_cast<double>(i)}};
    return std::vector<VectorRecord>{Record(fmt::format("p{}a", i), vectors.Next(), metadata),
                                     Record(fmt::format("p{}b", i), vectors.Next(), metadata)};
  };
  std::thread writer([&] {
    for (int i = 0; i < kPairs; ++i) {
      engine.Apply(*engine.ResolveUpsert("", pair(i)));
      applied.store(i + 1, std::memory_order_release);
      if (i % 2 == 0 && i > 0) engine.Apply(*engine.ResolveUpsert("", pair(i / 2)));
    }
    done = true;
  });
  auto reader = [&](int seed) {
    std::mt19937 random(seed);
    testing::ClusteredVectors queries(8, 8, 5);
    while (!done.load()) {
      int seen = applied.load(std::memory_order_acquire);
      if (seen == 0) continue;
      int i = std::uniform_int_distribution<int>(0, seen - 1)(random);
      std::vector<std::string> ids = {fmt::format("p{}a", i), fmt::format("p{}b", i)};
      if (engine.Fetch("", ids).size() != 2) ++failures;
      // The newest pair, by filter: both or none, and here both (its Apply returned).
      QueryRequest query;
      query.vector = queries.Next();
      query.top_k = 4;
      FilterNode newest;
      newest.op = FilterNode::Op::kEq;
      newest.field = "pair";
      newest.operands = {static_cast<double>(seen - 1)};
      query.filter = newest;
      auto result = engine.Query(query);
      if (!result.ok() || result->matches.size() % 2 != 0 || result->matches.empty()) ++failures;
      auto stats = engine.Stats(nullptr);
      if (stats->total_vector_count % 2 != 0) ++failures;
      query.filter.reset();
      query.top_k = 20;
      result = engine.Query(query);
      std::set<std::string> unique;
      for (const Match& match : result->matches) unique.insert(match.id);
      // 20 matches once 20 records exist (a reader may start before the writer's tenth pair).
      if (unique.size() != result->matches.size() || (seen >= 10 && result->matches.size() != 20)) {
        ++failures;
      }
    }
  };
  std::thread reader1(reader, 1);
  std::thread reader2(reader, 2);
  writer.join();
  reader1.join();
  reader2.join();
  EXPECT_EQ(failures.load(), 0);
  engine.WaitForCompactions();
  EXPECT_GT(engine.compactions_done(), 0u);
  EXPECT_EQ(engine.Stats(nullptr)->total_vector_count, 2u * kPairs);
}

}  // namespace
}  // namespace rampart::knowledge
