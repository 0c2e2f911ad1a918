#include "knowledge/hub/vector_store_index.h"

#include <algorithm>
#include <mutex>
#include <string>

#include "knowledge/hub/fusion.h"

namespace rampart::knowledge::hub {
namespace {

constexpr std::string_view kFileKey = "file_id";
constexpr size_t kWriteBatch = 1000;  // the engine's most records or ids per write

// Each list offers this many candidates to fusion, so a chunk second in one list and absent from
// the other's top k can still win.
size_t CandidatesFor(size_t max_results) { return std::max<size_t>(max_results * 4, 40); }

}  // namespace

Result<std::unique_ptr<StoreIndex>> StoreIndex::Create(size_t dimension,
                                                       std::shared_ptr<const Analyzer> analyzer,
                                                       size_t ef_construction) {
  ASSIGN_OR_RETURN(auto bm25, Bm25Index::Create(std::move(analyzer)));
  EngineOptions options;
  options.dimension = dimension;
  options.metric = Metric::kCosine;
  options.ef_construction = ef_construction;
  ASSIGN_OR_RETURN(auto vectors, NewHnswEngine(options));
  return std::unique_ptr<StoreIndex>(
      new StoreIndex(dimension, std::move(bm25), std::move(vectors)));
}

void StoreIndex::RemoveLocked(const std::string& file_id) {
  const auto found = files_.find(file_id);
  if (found == files_.end()) return;
  std::vector<std::string> ids;
  changed_chunks_ += found->second.chunks.size();
  for (const ChunkId id : found->second.chunks) {
    bm25_->Remove(id);
    chunks_.erase(id);
    ids.push_back(std::to_string(id));
    if (ids.size() == kWriteBatch) {
      vectors_->Apply(WriteOp{.name_space = "", .change = DeleteIdsOp{std::move(ids)}});
      ids.clear();
    }
  }
  if (!ids.empty()) vectors_->Apply(WriteOp{.name_space = "", .change = DeleteIdsOp{ids}});
  free_ordinals_.push_back(found->second.ordinal);
  files_.erase(found);
}

Status StoreIndex::ReplaceFile(const VectorStoreFileInfo& info, std::vector<IndexedChunk> chunks) {
  for (const IndexedChunk& chunk : chunks) {
    if (chunk.embedding.size() != dimension_) {
      return InvalidArgument("chunk {} of file '{}' has {} dimensions, the store {}",
                             chunk.chunk_index, info.id, chunk.embedding.size(), dimension_);
    }
  }
  std::unique_lock lock(mutex_);
  RemoveLocked(info.id);
  FileEntry entry;
  entry.info = info;
  if (!free_ordinals_.empty()) {
    entry.ordinal = free_ordinals_.back();
    free_ordinals_.pop_back();
  } else {
    entry.ordinal = next_ordinal_++;
  }
  std::vector<VectorRecord> records;
  const auto flush = [&]() -> Status {
    if (records.empty()) return Status::Ok();
    ASSIGN_OR_RETURN(const WriteOp op, vectors_->ResolveUpsert("", std::move(records)));
    vectors_->Apply(op);
    records.clear();
    return Status::Ok();
  };
  for (IndexedChunk& chunk : chunks) {
    const ChunkId id = next_chunk_++;
    RETURN_IF_ERROR(bm25_->Add(id, chunk.text));
    records.push_back(VectorRecord{.id = std::to_string(id),
                                   .values = std::move(chunk.embedding),
                                   .metadata = {{std::string(kFileKey), info.id}}});
    chunk.embedding.clear();
    entry.chunks.push_back(id);
    chunks_[id] =
        ChunkEntry{entry.ordinal, info.id, std::make_shared<const IndexedChunk>(std::move(chunk))};
    ++changed_chunks_;
    if (records.size() == kWriteBatch) RETURN_IF_ERROR(flush());
  }
  RETURN_IF_ERROR(flush());
  files_[info.id] = std::move(entry);
  return Status::Ok();
}

void StoreIndex::RemoveFile(const std::string& file_id) {
  std::unique_lock lock(mutex_);
  RemoveLocked(file_id);
}

void StoreIndex::UpdateAttributes(const std::string& file_id, const FileAttributes& attributes) {
  std::unique_lock lock(mutex_);
  const auto found = files_.find(file_id);
  if (found != files_.end()) found->second.info.attributes = attributes;
}

size_t StoreIndex::chunk_count() const {
  std::shared_lock lock(mutex_);
  return chunks_.size();
}

size_t StoreIndex::file_count() const {
  std::shared_lock lock(mutex_);
  return files_.size();
}

uint64_t StoreIndex::changed_chunks() const {
  std::shared_lock lock(mutex_);
  return changed_chunks_;
}

StoreIndexState StoreIndex::Capture() const {
  std::shared_lock lock(mutex_);
  StoreIndexState state;
  state.vectors = vectors_->View();
  state.files.reserve(files_.size());
  for (const auto& [id, entry] : files_) state.files.push_back({entry.info, entry.chunks});
  state.chunks.reserve(chunks_.size());
  for (const auto& [id, entry] : chunks_) state.chunks.emplace(id, entry.chunk);
  state.bm25 = bm25_->Export();
  state.next_chunk = next_chunk_;
  state.changes = changed_chunks_;
  return state;
}

Result<std::unique_ptr<StoreIndex>> StoreIndex::Restore(
    size_t dimension, std::shared_ptr<const Analyzer> analyzer,
    std::unique_ptr<IndexEngine> vectors, std::vector<StoreIndexFile> files,
    std::unordered_map<ChunkId, std::shared_ptr<const IndexedChunk>> chunks, Bm25Contents bm25,
    ChunkId next_chunk) {
  if (vectors == nullptr || vectors->options().dimension != dimension) {
    return InvalidArgument("the restored engine is not of dimension {}", dimension);
  }
  ASSIGN_OR_RETURN(const IndexStats stats, vectors->Stats(nullptr));
  if (stats.total_vector_count != chunks.size()) {
    return InvalidArgument("{} vectors for {} chunks", stats.total_vector_count, chunks.size());
  }
  if (bm25.chunks.size() != chunks.size()) {
    return InvalidArgument("{} BM25 chunks for {} chunks", bm25.chunks.size(), chunks.size());
  }
  for (const auto& [id, chunk] : chunks) {
    if (!bm25.chunks.contains(id)) return InvalidArgument("chunk {} is not in BM25", id);
  }
  ASSIGN_OR_RETURN(auto keywords, Bm25Index::Import(std::move(analyzer), std::move(bm25)));
  std::unique_ptr<StoreIndex> index(
      new StoreIndex(dimension, std::move(keywords), std::move(vectors)));
  size_t placed = 0;
  for (StoreIndexFile& file : files) {
    FileEntry entry;
    entry.info = std::move(file.info);
    entry.ordinal = index->next_ordinal_++;
    for (const ChunkId id : file.chunks) {
      auto chunk = chunks.find(id);
      if (chunk == chunks.end() || chunk->second == nullptr || id >= next_chunk) {
        return InvalidArgument("chunk {} of file '{}' is missing or out of range", id,
                               entry.info.id);
      }
      index->chunks_[id] = ChunkEntry{entry.ordinal, entry.info.id, std::move(chunk->second)};
      chunks.erase(chunk);
      ++placed;
    }
    entry.chunks = std::move(file.chunks);
    const std::string id = entry.info.id;
    if (!index->files_.emplace(id, std::move(entry)).second) {
      return InvalidArgument("file '{}' is listed twice", id);
    }
  }
  if (!chunks.empty()) return InvalidArgument("{} chunks belong to no file", chunks.size());
  if (placed != stats.total_vector_count) {
    return InvalidArgument("{} chunks for {} vectors", placed, stats.total_vector_count);
  }
  index->next_chunk_ = next_chunk;
  return index;
}

Result<SearchResults> StoreIndex::Search(const IndexSearch& search) const {
  std::shared_lock lock(mutex_);
  // The files the caller may see and the filter keeps: decided once per file, before ranking.
  std::vector<char> allowed(next_ordinal_, 0);
  std::vector<FilterNode::Scalar> allowed_ids;
  for (const auto& [id, entry] : files_) {
    if (search.filter != nullptr && !FilterMatches(*search.filter, entry.info.attributes)) continue;
    if (search.may_read != nullptr && *search.may_read && !(*search.may_read)(entry.info)) continue;
    allowed[entry.ordinal] = 1;
    allowed_ids.emplace_back(id);
  }
  SearchResults results;
  if (allowed_ids.empty()) return results;
  const bool every_file = allowed_ids.size() == files_.size();
  const size_t candidates = CandidatesFor(search.max_results);

  std::vector<RankedList> lists;
  std::vector<double> weights;  // one per list
  if (search.ranker != Ranker::kVector) {
    Bm25SearchOptions options;
    options.top_k = candidates;
    if (!every_file) {
      options.allowed = [&](ChunkId id) {
        const auto chunk = chunks_.find(id);
        return chunk != chunks_.end() && allowed[chunk->second.file_ordinal] != 0;
      };
    }
    for (const std::string& query : search.queries) {
      ASSIGN_OR_RETURN(const std::vector<Bm25Hit> hits, bm25_->Search(query, options));
      RankedList& list = lists.emplace_back();
      weights.push_back(1);
      for (const Bm25Hit& hit : hits) list.push_back({hit.id, hit.score});
    }
  }
  if (search.ranker != Ranker::kKeyword && !chunks_.empty()) {
    for (const std::vector<float>& vector : search.query_vectors) {
      QueryRequest request;
      request.top_k = std::min(candidates, chunks_.size());
      request.vector = vector;
      if (!every_file) {
        FilterNode in;
        in.op = FilterNode::Op::kIn;
        in.field = std::string(kFileKey);
        in.operands = allowed_ids;
        request.filter = FilterNode{.op = FilterNode::Op::kAnd, .children = {std::move(in)}};
      }
      ASSIGN_OR_RETURN(const QueryResult found, vectors_->Query(request));
      RankedList& list = lists.emplace_back();
      weights.push_back(search.ranker == Ranker::kHybrid ? search.vector_weight : 1);
      for (const Match& match : found.matches) {
        const uint64_t id = std::stoull(match.id);
        const auto chunk = chunks_.find(id);
        // Checked again: the engine's filter is the first guard, the mask the last word.
        if (chunk == chunks_.end() || allowed[chunk->second.file_ordinal] == 0) continue;
        list.push_back({id, std::clamp(static_cast<double>(match.score), 0.0, 1.0)});
      }
    }
  }
  RankedList fused;
  if (lists.size() == 1) {
    fused = std::move(lists.front());
  } else if (!lists.empty()) {
    ASSIGN_OR_RETURN(fused, search.fusion == Fusion::kLinear
                                ? LinearBlend(lists, weights)
                                : ReciprocalRankFusion(lists, weights));
  }
  for (const ScoredId& scored : fused) {
    if (results.hits.size() == search.max_results) break;
    if (scored.score < search.score_threshold) continue;
    const auto chunk = chunks_.find(scored.id);
    if (chunk == chunks_.end()) continue;
    const FileEntry& file = files_.at(chunk->second.file_id);
    const IndexedChunk& c = *chunk->second.chunk;
    results.hits.push_back(SearchHit{.file_id = file.info.id,
                                     .filename = file.info.filename,
                                     .score = scored.score,
                                     .attributes = file.info.attributes,
                                     .text = c.text,
                                     .chunk_index = c.chunk_index,
                                     .heading_path = c.heading_path,
                                     .page = c.page,
                                     .begin = c.begin,
                                     .end = c.end});
  }
  return results;
}

}  // namespace rampart::knowledge::hub
