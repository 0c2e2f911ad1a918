// BM25 against hand-computed scores, removal, the allowed-set predicate, the threshold on the
// normalised score, and readers running while a writer adds and removes.
#include "knowledge/hub/bm25.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <thread>

namespace rampart::knowledge::hub {
namespace {

std::shared_ptr<const Analyzer> PlainAnalyzer() {
  AnalyzerOptions options;
  options.language = AnalyzerLanguage::kEnglish;
  options.stem = false;
  options.remove_stop_words = false;
  Result<std::unique_ptr<Analyzer>> analyzer = Analyzer::Create(options);
  EXPECT_TRUE(analyzer.ok());
  return std::shared_ptr<const Analyzer>(std::move(*analyzer));
}

// d1 "apple banana" (2 terms), d2 "apple apple cherry" (3), d3 "banana cherry durian date" (4):
// N = 3, avgdl = 3.
std::unique_ptr<Bm25Index> SmallIndex(const Bm25Options& options = {}) {
  Result<std::unique_ptr<Bm25Index>> index = Bm25Index::Create(PlainAnalyzer(), options);
  EXPECT_TRUE(index.ok());
  EXPECT_TRUE((*index)->Add(1, "apple banana").ok());
  EXPECT_TRUE((*index)->Add(2, "Apple apple cherry").ok());
  EXPECT_TRUE((*index)->Add(3, "banana cherry durian date").ok());
  return std::move(*index);
}

TEST(Bm25Test, HandComputedScores) {
  std::unique_ptr<Bm25Index> index = SmallIndex();
  EXPECT_EQ(index->size(), 3u);
  EXPECT_DOUBLE_EQ(index->average_length(), 3.0);

  // idf(apple) = ln(1 + (3 - 2 + 0.5) / (2 + 0.5)) = ln 1.6 = 0.470004.
  // d2: tf 2, |d| 3: 2 * 2.2 / (2 + 1.2 * (0.25 + 0.75 * 3/3)) = 1.375 -> 0.646255.
  // d1: tf 1, |d| 2: 1 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 2/3)) = 1.157895 -> 0.544215.
  // Normalised by idf * 2.2: 1.375 / 2.2 = 0.625 and 1.157895 / 2.2 = 0.526316.
  Result<std::vector<Bm25Hit>> hits = index->Search("apple");
  ASSERT_TRUE(hits.ok());
  ASSERT_EQ(hits->size(), 2u);
  EXPECT_EQ((*hits)[0].id, 2u);
  EXPECT_NEAR((*hits)[0].raw_score, 0.6462549902, 1e-9);
  EXPECT_NEAR((*hits)[0].score, 0.625, 1e-12);
  EXPECT_EQ((*hits)[1].id, 1u);
  EXPECT_NEAR((*hits)[1].raw_score, 0.5442147286, 1e-9);
  EXPECT_NEAR((*hits)[1].score, 0.5263157895, 1e-9);

  // idf(durian) = ln(1 + 2.5 / 1.5) = 0.980829; d3 (|d| 4): each term's tf part is
  // 2.2 / (1 + 1.2 * 1.25) = 0.88 -> (0.470004 + 0.980829) * 0.88 = 1.276733, normalised 0.4.
  hits = index->Search("banana durian");
  ASSERT_TRUE(hits.ok());
  ASSERT_EQ(hits->size(), 2u);
  EXPECT_EQ((*hits)[0].id, 3u);
  EXPECT_NEAR((*hits)[0].raw_score, 1.2767329364, 1e-9);
  EXPECT_NEAR((*hits)[0].score, 0.4, 1e-12);
  EXPECT_EQ((*hits)[1].id, 1u);
  EXPECT_NEAR((*hits)[1].score, 0.1705022916, 1e-9);

  // A repeated query term counts once; an unknown one adds nothing.
  Result<std::vector<Bm25Hit>> repeated = index->Search("apple APPLE zebra");
  ASSERT_TRUE(repeated.ok());
  EXPECT_NEAR((*repeated)[0].raw_score, 0.6462549902, 1e-9);
  EXPECT_TRUE(index->Search("zebra")->empty());
  EXPECT_TRUE(index->Search("")->empty());
}

TEST(Bm25Test, ConfigurableParameters) {
  Bm25Options options;
  options.k1 = 2.0;
  options.b = 0.0;  // no length normalisation: d2 = 0.470004 * 2 * 3 / (2 + 2) = 0.705005
  std::unique_ptr<Bm25Index> index = SmallIndex(options);
  Result<std::vector<Bm25Hit>> hits = index->Search("apple");
  ASSERT_TRUE(hits.ok());
  EXPECT_NEAR((*hits)[0].raw_score, 0.7050054439, 1e-9);
  EXPECT_FALSE(Bm25Index::Create(PlainAnalyzer(), {1.2, 1.5}).ok());
  EXPECT_FALSE(Bm25Index::Create(PlainAnalyzer(), {-1, 0.75}).ok());
  EXPECT_FALSE(Bm25Index::Create(nullptr).ok());
}

TEST(Bm25Test, RemovalUpdatesStatisticsAndHidesTheChunk) {
  std::unique_ptr<Bm25Index> index = SmallIndex();
  EXPECT_TRUE(index->Remove(3));
  EXPECT_FALSE(index->Remove(3));
  EXPECT_EQ(index->size(), 2u);
  EXPECT_TRUE(index->Search("durian")->empty());
  // N = 2, avgdl = 2.5, df(banana) = 1: ln 2 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 2 / 2.5)).
  Result<std::vector<Bm25Hit>> hits = index->Search("banana durian");
  ASSERT_TRUE(hits.ok());
  ASSERT_EQ(hits->size(), 1u);
  EXPECT_EQ((*hits)[0].id, 1u);
  EXPECT_NEAR((*hits)[0].raw_score, 0.7549127709, 1e-9);
  // Re-adding the id indexes the new text.
  EXPECT_EQ(index->Add(1, "again").code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(index->Add(3, "durian").ok());
  EXPECT_EQ(index->Search("durian")->front().id, 3u);
}

TEST(Bm25Test, CompactionKeepsResults) {
  Result<std::unique_ptr<Bm25Index>> index = Bm25Index::Create(PlainAnalyzer());
  ASSERT_TRUE(index.ok());
  for (ChunkId id = 0; id < 3000; ++id) {
    ASSERT_TRUE((*index)
                    ->Add(id, "common term" + std::string(id % 2 == 0 ? " even" : " odd") +
                                  " word" + std::to_string(id))
                    .ok());
  }
  for (ChunkId id = 0; id < 3000; id += 2) ASSERT_TRUE((*index)->Remove(id));  // compacts
  EXPECT_EQ((*index)->size(), 1500u);
  EXPECT_TRUE((*index)->Search("even")->empty());
  EXPECT_TRUE((*index)->Search("word2")->empty());
  Result<std::vector<Bm25Hit>> hits = (*index)->Search("word7");
  ASSERT_TRUE(hits.ok());
  ASSERT_EQ(hits->size(), 1u);
  EXPECT_EQ((*hits)[0].id, 7u);
  Bm25SearchOptions options;
  options.top_k = 5000;
  EXPECT_EQ((*index)->Search("odd", options)->size(), 1500u);
}

// Export and Import carry the index without its texts: the same answers and scores, removed
// chunks left out; damaged contents are refused.
TEST(Bm25Test, ExportedContentsImportToTheSameAnswers) {
  Result<std::unique_ptr<Bm25Index>> index = Bm25Index::Create(PlainAnalyzer());
  ASSERT_TRUE(index.ok());
  for (ChunkId id = 1; id <= 40; ++id) {
    ASSERT_TRUE((*index)
                    ->Add(id, "apple banana " + std::string(id % 3 == 0 ? "cherry cherry " : "") +
                                  "word" + std::to_string(id % 7))
                    .ok());
  }
  for (ChunkId id = 1; id <= 40; id += 4) ASSERT_TRUE((*index)->Remove(id));
  Bm25Contents contents = (*index)->Export();
  EXPECT_EQ(contents.chunks.size(), 30u);
  Result<std::unique_ptr<Bm25Index>> copy = Bm25Index::Import(PlainAnalyzer(), contents);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_EQ((*copy)->size(), (*index)->size());
  EXPECT_DOUBLE_EQ((*copy)->average_length(), (*index)->average_length());
  for (const char* query : {"cherry", "banana word3", "word5 apple", "word1"}) {
    auto expected = (*index)->Search(query);
    auto found = (*copy)->Search(query);
    ASSERT_TRUE(expected.ok() && found.ok());
    ASSERT_EQ(found->size(), expected->size()) << query;
    for (size_t i = 0; i < found->size(); ++i) {
      EXPECT_EQ((*found)[i].id, (*expected)[i].id) << query;
      EXPECT_DOUBLE_EQ((*found)[i].raw_score, (*expected)[i].raw_score) << query;
    }
  }
  EXPECT_TRUE((*copy)->Add(100, "cherry").ok());  // it goes on taking chunks
  EXPECT_EQ((*copy)->Search("cherry")->front().id, 100u);

  Bm25Contents twice = contents;
  twice.terms.push_back(twice.terms.front());
  EXPECT_FALSE(Bm25Index::Import(PlainAnalyzer(), twice).ok());
  Bm25Contents out_of_range = contents;
  out_of_range.chunks.begin()->second.terms.back().first = 1000;
  EXPECT_FALSE(Bm25Index::Import(PlainAnalyzer(), out_of_range).ok());
  Bm25Contents wrong_length = contents;
  wrong_length.chunks.begin()->second.length += 1;
  EXPECT_FALSE(Bm25Index::Import(PlainAnalyzer(), wrong_length).ok());
}

TEST(Bm25Test, AllowedPredicateAppliesBeforeRanking) {
  std::unique_ptr<Bm25Index> index = SmallIndex();
  Bm25SearchOptions options;
  options.top_k = 1;
  options.allowed = [](ChunkId id) { return id != 2; };
  // d2 would rank first; filtered inside, d1 takes the one place.
  Result<std::vector<Bm25Hit>> hits = index->Search("apple", options);
  ASSERT_TRUE(hits.ok());
  ASSERT_EQ(hits->size(), 1u);
  EXPECT_EQ((*hits)[0].id, 1u);
  options.allowed = [](ChunkId) { return false; };
  EXPECT_TRUE(index->Search("apple", options)->empty());
}

TEST(Bm25Test, ScoreThresholdOnNormalisedScore) {
  std::unique_ptr<Bm25Index> index = SmallIndex();
  Bm25SearchOptions options;
  options.score_threshold = 0.6;
  Result<std::vector<Bm25Hit>> hits = index->Search("apple", options);
  ASSERT_TRUE(hits.ok());
  ASSERT_EQ(hits->size(), 1u);  // 0.625 passes, 0.526 does not
  EXPECT_EQ((*hits)[0].id, 2u);
}

TEST(Bm25Test, ReadersDuringWrites) {
  std::unique_ptr<Bm25Index> index = SmallIndex();
  std::atomic<bool> stop{false};
  std::atomic<int> searches{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      do {  // at least once, however fast the writer is
        Result<std::vector<Bm25Hit>> hits = index->Search("apple banana");
        ASSERT_TRUE(hits.ok());
        for (const Bm25Hit& hit : *hits) {
          EXPECT_GE(hit.score, 0.0);
          EXPECT_LT(hit.score, 1.0);
        }
        searches.fetch_add(1);
      } while (!stop.load());
    });
  }
  for (ChunkId id = 100; id < 2100; ++id) {
    ASSERT_TRUE(index->Add(id, "banana split number " + std::to_string(id)).ok());
    if (id % 3 == 0) {
      ASSERT_TRUE(index->Remove(id));
    }
  }
  stop.store(true);
  for (std::thread& reader : readers) reader.join();
  EXPECT_EQ(index->size(), 3u + 2000u - 666u);
  EXPECT_GT(searches.load(), 0);
}

}  // namespace
}  // namespace rampart::knowledge::hub
