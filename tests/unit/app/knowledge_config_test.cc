#include "app/knowledge_config.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "app/settings.h"

namespace rampart::app {
namespace {

std::string WriteTemp(const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("rampart_knowledge_" + std::to_string(getpid()) + "_" +
                     ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".yaml");
  std::ofstream(path) << text;
  return path.string();
}

TEST(KnowledgeConfig, ReadsEveryKey) {
  const std::string path = WriteTemp(R"(
knowledge:
  enabled: true
  indexes_dir: /srv/indexes
  read_only: true
  public_url: https://vectors.example.com
  max_memory_mb: 512
  hnsw_m: 32
  ef_construction: 400
  default_ef: 64
  compaction_ratio: 0.5
  snapshot_every_records: 1000
  snapshot_every_mb: 16
  segment_mb: 8
  max_pending_writes: 500
  replica_poll_ms: 250
  seal_snapshots: true
  worker_threads: 8
  max_queued_requests: 64
)");
  Result<std::optional<KnowledgeConfig>> loaded = LoadKnowledgeConfig(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_TRUE(loaded->has_value());
  const KnowledgeConfig& config = **loaded;
  EXPECT_EQ(config.indexes_dir, "/srv/indexes");
  EXPECT_TRUE(config.read_only);
  EXPECT_EQ(config.public_url, "https://vectors.example.com");
  EXPECT_EQ(config.engine.max_memory_bytes, size_t{512} << 20);
  EXPECT_EQ(config.engine.hnsw_m, 32u);
  EXPECT_EQ(config.engine.ef_construction, 400u);
  EXPECT_EQ(config.engine.default_ef, 64u);
  EXPECT_DOUBLE_EQ(config.engine.compaction_ratio, 0.5);
  EXPECT_EQ(config.durability.snapshot_every_records, 1000u);
  EXPECT_EQ(config.durability.snapshot_every_bytes, uint64_t{16} << 20);
  EXPECT_EQ(config.durability.segment_bytes, size_t{8} << 20);
  EXPECT_EQ(config.durability.max_pending_writes, 500u);
  EXPECT_EQ(config.durability.replica_poll_milliseconds, 250u);
  EXPECT_TRUE(config.seal_snapshots);
  EXPECT_EQ(config.worker_threads, 8u);
  EXPECT_EQ(config.max_queued_requests, 64u);
  // The server's own reader accepts the section (and leaves it to this one).
  ServeSettings settings;
  EXPECT_TRUE(ApplyYamlFile(path, settings).ok());
  std::filesystem::remove(path);
}

TEST(KnowledgeConfig, AbsentIsOffAndEmptyTakesTheDefaults) {
  const std::string absent = WriteTemp("server: {}\n");
  Result<std::optional<KnowledgeConfig>> none = LoadKnowledgeConfig(absent);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  const std::string empty = WriteTemp("knowledge:\n");
  Result<std::optional<KnowledgeConfig>> defaults = LoadKnowledgeConfig(empty);
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  ASSERT_TRUE(defaults->has_value());
  EXPECT_TRUE((*defaults)->enabled);
  EXPECT_EQ((*defaults)->indexes_dir, "");
  EXPECT_EQ((*defaults)->engine.hnsw_m, 16u);
  std::filesystem::remove(absent);
  std::filesystem::remove(empty);
}

TEST(KnowledgeConfig, ErrorsNameTheKeyAndLine) {
  const auto error = [](const std::string& text) {
    Result<std::optional<KnowledgeConfig>> loaded = LoadKnowledgeConfig(WriteTemp(text));
    EXPECT_FALSE(loaded.ok()) << text;
    return loaded.ok() ? std::string() : loaded.status().message();
  };
  EXPECT_NE(error("knowledge:\n  hnsw: 3\n").find("unknown key 'knowledge.hnsw' (line 2)"),
            std::string::npos);
  EXPECT_NE(
      error("knowledge:\n  hnsw_m: 1\n").find("'knowledge.hnsw_m' must be in [2, 128], got 1"),
      std::string::npos);
  EXPECT_NE(
      error("knowledge:\n  read_only: maybe\n").find("'knowledge.read_only' has the wrong type"),
      std::string::npos);
  EXPECT_NE(error("knowledge:\n  public_url: vectors.example.com\n").find("http:// or https://"),
            std::string::npos);
  EXPECT_NE(error("knowledge: [1]\n").find("must be a map"), std::string::npos);
}

TEST(KnowledgeConfig, VectorStoresSection) {
  const std::string path = WriteTemp(R"(
knowledge:
  vector_stores:
    embedding_target: text-embedding
    embedding_batch: 16
    embedding_timeout_ms: 5000
    ingestion_workers: 3
    language: chinese
    chinese_terms: bigrams
    fusion: linear
    vector_weight: 0.25
    seal_chunks: true
    seal_key: kb
    index_snapshots: false
    worker_threads: 2
    max_queued_requests: 10
)");
  Result<std::optional<KnowledgeConfig>> loaded = LoadKnowledgeConfig(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_TRUE((*loaded)->vector_stores.has_value());
  const VectorStoresConfig& config = *(*loaded)->vector_stores;
  EXPECT_EQ(config.embedding_target, "text-embedding");
  EXPECT_EQ(config.embedding_batch, 16u);
  EXPECT_EQ(config.embedding_timeout_ms, 5000);
  EXPECT_EQ(config.ingestion_workers, 3u);
  EXPECT_EQ(config.language, "chinese");
  EXPECT_EQ(config.chinese_terms, "bigrams");
  EXPECT_EQ(config.fusion, "linear");
  EXPECT_DOUBLE_EQ(config.vector_weight, 0.25);
  EXPECT_TRUE(config.seal_chunks);
  EXPECT_EQ(config.seal_key, "kb");
  EXPECT_FALSE(config.index_snapshots);
  EXPECT_EQ(config.worker_threads, 2u);
  EXPECT_EQ(config.max_queued_requests, 10u);
  std::filesystem::remove(path);

  // Present and empty: every default; absent or disabled: off.
  Result<std::optional<KnowledgeConfig>> defaults =
      LoadKnowledgeConfig(WriteTemp("knowledge:\n  vector_stores:\n"));
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  ASSERT_TRUE((*defaults)->vector_stores.has_value());
  EXPECT_EQ((*defaults)->vector_stores->embedding_target, "");
  EXPECT_EQ((*defaults)->vector_stores->language, "english");
  EXPECT_EQ((*defaults)->vector_stores->chinese_terms, "both");
  EXPECT_EQ((*defaults)->vector_stores->fusion, "rrf");
  EXPECT_DOUBLE_EQ((*defaults)->vector_stores->vector_weight, 1);
  EXPECT_FALSE((*LoadKnowledgeConfig(WriteTemp("knowledge: {}\n")))->vector_stores);
  EXPECT_FALSE((*LoadKnowledgeConfig(WriteTemp("knowledge:\n  vector_stores: {enabled: false}\n")))
                   ->vector_stores);

  const auto error = [](const std::string& text) {
    Result<std::optional<KnowledgeConfig>> bad = LoadKnowledgeConfig(WriteTemp(text));
    EXPECT_FALSE(bad.ok()) << text;
    return bad.ok() ? std::string() : bad.status().message();
  };
  EXPECT_NE(error("knowledge:\n  vector_stores:\n    language: klingon\n")
                .find("'knowledge.vector_stores.language' must be auto, english or chinese"),
            std::string::npos);
  EXPECT_NE(error("knowledge:\n  vector_stores:\n    chinese_terms: letters\n")
                .find("'knowledge.vector_stores.chinese_terms' must be words, bigrams or both"),
            std::string::npos);
  EXPECT_NE(error("knowledge:\n  vector_stores:\n    fusion: max\n")
                .find("'knowledge.vector_stores.fusion' must be rrf or linear"),
            std::string::npos);
  EXPECT_NE(error("knowledge:\n  vector_stores:\n    vector_weight: -1\n")
                .find("'knowledge.vector_stores.vector_weight' must be in [0, 100]"),
            std::string::npos);
  EXPECT_NE(error("knowledge:\n  vector_stores:\n    workers: 2\n")
                .find("unknown key 'knowledge.vector_stores.workers'"),
            std::string::npos);
  EXPECT_NE(error("knowledge:\n  vector_stores:\n    ingestion_workers: 0\n")
                .find("'knowledge.vector_stores.ingestion_workers' must be in [1, 16]"),
            std::string::npos);
}

}  // namespace
}  // namespace rampart::app
