#include "app/knowledge_config.h"

#include "app/yaml_fields.h"

namespace rampart::app {
namespace {

using yaml::CheckKeys;
using yaml::Read;

// A number at `key` within [low, high], when present.
template <typename T>
Status ReadRange(const YAML::Node& node, std::string_view key, std::string_view where, T low,
                 T high, T& into) {
  T value = into;
  RETURN_IF_ERROR(Read(node, key, where, value));
  if (value < low || value > high) {
    return InvalidArgument("'{}.{}' must be in [{}, {}], got {} (line {})", where, key, low, high,
                           value, node[std::string(key)].Mark().line + 1);
  }
  into = value;
  return Status::Ok();
}

Status ReadVectorStores(const YAML::Node& node, VectorStoresConfig& config) {
  constexpr std::string_view where = "knowledge.vector_stores";
  if (node.IsNull()) return Status::Ok();
  RETURN_IF_ERROR(CheckKeys(
      node, where,
      {"enabled", "embedding_target", "embedding_batch", "embedding_timeout_ms",
       "ingestion_workers", "language", "chinese_terms", "fusion", "vector_weight", "seal_chunks",
       "seal_key", "index_snapshots", "worker_threads", "max_queued_requests"}));
  RETURN_IF_ERROR(Read(node, "enabled", where, config.enabled));
  RETURN_IF_ERROR(Read(node, "embedding_target", where, config.embedding_target));
  RETURN_IF_ERROR(
      ReadRange<size_t>(node, "embedding_batch", where, 1, 2048, config.embedding_batch));
  RETURN_IF_ERROR(ReadRange<int64_t>(node, "embedding_timeout_ms", where, 100, 3600 * 1000,
                                     config.embedding_timeout_ms));
  RETURN_IF_ERROR(
      ReadRange<size_t>(node, "ingestion_workers", where, 1, 16, config.ingestion_workers));
  RETURN_IF_ERROR(Read(node, "language", where, config.language));
  if (config.language != "auto" && config.language != "english" && config.language != "chinese") {
    return InvalidArgument("'{}.language' must be auto, english or chinese, got '{}' (line {})",
                           where, config.language, node["language"].Mark().line + 1);
  }
  RETURN_IF_ERROR(Read(node, "chinese_terms", where, config.chinese_terms));
  if (config.chinese_terms != "words" && config.chinese_terms != "bigrams" &&
      config.chinese_terms != "both") {
    return InvalidArgument("'{}.chinese_terms' must be words, bigrams or both, got '{}' (line {})",
                           where, config.chinese_terms, node["chinese_terms"].Mark().line + 1);
  }
  RETURN_IF_ERROR(Read(node, "fusion", where, config.fusion));
  if (config.fusion != "rrf" && config.fusion != "linear") {
    return InvalidArgument("'{}.fusion' must be rrf or linear, got '{}' (line {})", where,
                           config.fusion, node["fusion"].Mark().line + 1);
  }
  RETURN_IF_ERROR(ReadRange<double>(node, "vector_weight", where, 0, 100, config.vector_weight));
  RETURN_IF_ERROR(Read(node, "seal_chunks", where, config.seal_chunks));
  RETURN_IF_ERROR(Read(node, "seal_key", where, config.seal_key));
  if (config.seal_key.empty()) {
    return InvalidArgument("'{}.seal_key' must not be empty (line {})", where,
                           node["seal_key"].Mark().line + 1);
  }
  RETURN_IF_ERROR(Read(node, "index_snapshots", where, config.index_snapshots));
  RETURN_IF_ERROR(ReadRange<size_t>(node, "worker_threads", where, 1, 256, config.worker_threads));
  RETURN_IF_ERROR(ReadRange<size_t>(node, "max_queued_requests", where, 1, 1 << 20,
                                    config.max_queued_requests));
  return Status::Ok();
}

Status ReadKnowledge(const YAML::Node& node, KnowledgeConfig& config) {
  constexpr std::string_view where = "knowledge";
  if (node.IsNull()) return Status::Ok();  // `knowledge:` alone: every default
  RETURN_IF_ERROR(
      CheckKeys(node, where,
                {"enabled", "indexes_dir", "read_only", "public_url", "max_memory_mb", "hnsw_m",
                 "ef_construction", "default_ef", "compaction_ratio", "snapshot_every_records",
                 "snapshot_every_mb", "segment_mb", "max_pending_writes", "replica_poll_ms",
                 "seal_snapshots", "worker_threads", "max_queued_requests", "vector_stores"}));
  RETURN_IF_ERROR(Read(node, "enabled", where, config.enabled));
  RETURN_IF_ERROR(Read(node, "indexes_dir", where, config.indexes_dir));
  RETURN_IF_ERROR(Read(node, "read_only", where, config.read_only));
  RETURN_IF_ERROR(Read(node, "public_url", where, config.public_url));
  if (!config.public_url.empty() && !config.public_url.starts_with("http://") &&
      !config.public_url.starts_with("https://")) {
    return InvalidArgument(
        "'{}.public_url' must start with http:// or https://, got '{}' (line {})", where,
        config.public_url, node["public_url"].Mark().line + 1);
  }
  uint64_t memory_mb = config.engine.max_memory_bytes >> 20;
  RETURN_IF_ERROR(
      ReadRange<uint64_t>(node, "max_memory_mb", where, 0, uint64_t{1} << 30, memory_mb));
  config.engine.max_memory_bytes = static_cast<size_t>(memory_mb << 20);
  RETURN_IF_ERROR(ReadRange<size_t>(node, "hnsw_m", where, 2, 128, config.engine.hnsw_m));
  RETURN_IF_ERROR(
      ReadRange<size_t>(node, "ef_construction", where, 8, 4096, config.engine.ef_construction));
  RETURN_IF_ERROR(ReadRange<size_t>(node, "default_ef", where, 1, knowledge::kMaxTopK,
                                    config.engine.default_ef));
  RETURN_IF_ERROR(ReadRange<double>(node, "compaction_ratio", where, 0.01, 1.0,
                                    config.engine.compaction_ratio));
  RETURN_IF_ERROR(ReadRange<uint64_t>(node, "snapshot_every_records", where, 1, uint64_t{1} << 40,
                                      config.durability.snapshot_every_records));
  uint64_t snapshot_mb = config.durability.snapshot_every_bytes >> 20;
  RETURN_IF_ERROR(
      ReadRange<uint64_t>(node, "snapshot_every_mb", where, 1, uint64_t{1} << 20, snapshot_mb));
  config.durability.snapshot_every_bytes = snapshot_mb << 20;
  uint64_t segment_mb = config.durability.segment_bytes >> 20;
  RETURN_IF_ERROR(ReadRange<uint64_t>(node, "segment_mb", where, 1, 4096, segment_mb));
  config.durability.segment_bytes = static_cast<size_t>(segment_mb << 20);
  RETURN_IF_ERROR(ReadRange<size_t>(node, "max_pending_writes", where, 1, size_t{1} << 30,
                                    config.durability.max_pending_writes));
  RETURN_IF_ERROR(ReadRange<uint32_t>(node, "replica_poll_ms", where, 10, 3600 * 1000,
                                      config.durability.replica_poll_milliseconds));
  RETURN_IF_ERROR(Read(node, "seal_snapshots", where, config.seal_snapshots));
  RETURN_IF_ERROR(ReadRange<size_t>(node, "worker_threads", where, 1, 256, config.worker_threads));
  RETURN_IF_ERROR(ReadRange<size_t>(node, "max_queued_requests", where, 1, 1 << 20,
                                    config.max_queued_requests));
  if (node["vector_stores"]) {
    VectorStoresConfig vector_stores;
    RETURN_IF_ERROR(ReadVectorStores(node["vector_stores"], vector_stores));
    if (vector_stores.enabled) config.vector_stores = std::move(vector_stores);
  }
  return Status::Ok();
}

}  // namespace

Result<std::optional<KnowledgeConfig>> LoadKnowledgeConfig(const std::string& path) {
  if (path.empty()) return std::optional<KnowledgeConfig>();
  KnowledgeConfig config;
  try {
    const YAML::Node root = YAML::LoadFile(path);
    if (!root.IsMap() || !root["knowledge"]) return std::optional<KnowledgeConfig>();
    RETURN_IF_ERROR(ReadKnowledge(root["knowledge"], config)
                        .WithContext(fmt::format("config file '{}'", path)));
  } catch (const YAML::BadFile&) {
    return NotFound("config file '{}' cannot be read", path);
  } catch (const YAML::Exception& error) {
    return InvalidArgument("config file '{}' (line {}): {}", path, error.mark.line + 1, error.msg);
  }
  return std::optional<KnowledgeConfig>(std::move(config));
}

}  // namespace rampart::app
