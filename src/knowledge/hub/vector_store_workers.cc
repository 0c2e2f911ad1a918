// The vector store service's threads: Start (indexes built from the Store), the ingestion
// workers, and following the Store's change sequence.

#include <unistd.h>

#include <fmt/format.h>

#include "core/clock.h"
#include "core/logging.h"
#include "crypto/digest.h"
#include "knowledge/hub/vector_store_codec.h"
#include "knowledge/hub/vector_store_ingest.h"
#include "knowledge/hub/vector_store_service_impl.h"

namespace rampart::knowledge::hub {
namespace internal {
namespace {

constexpr int64_t kChangesPerRead = 1000;

std::string DefaultWorkerId() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  std::string suffix;
  for (unsigned char byte : crypto::RandomBytes(4)) suffix += fmt::format("{:02x}", byte);
  return fmt::format("{}:{}:{}", host, ::getpid(), suffix);
}

}  // namespace

VectorStoreServiceImpl::VectorStoreServiceImpl(store::Store* store, FileStorage* files,
                                               Embedder* embedder,
                                               VectorStoreServiceOptions options,
                                               std::shared_ptr<const Analyzer> analyzer)
    : store_(store),
      files_(files),
      embedder_(embedder),
      options_(std::move(options)),
      analyzer_(std::move(analyzer)),
      worker_id_(options_.worker_id.empty() ? DefaultWorkerId() : options_.worker_id) {}

int64_t VectorStoreServiceImpl::Now() const {
  if (options_.now_unix) return options_.now_unix();
  return UnixMillisNow() / 1000;
}

std::shared_ptr<StoreIndex> VectorStoreServiceImpl::FindIndex(const std::string& store_id) const {
  std::shared_lock lock(indexes_mutex_);
  const auto found = indexes_.find(store_id);
  return found != indexes_.end() ? found->second : nullptr;
}

Result<std::shared_ptr<StoreIndex>> VectorStoreServiceImpl::IndexFor(const std::string& store_id) {
  if (auto index = FindIndex(store_id)) return index;
  ASSIGN_OR_RETURN(
      std::unique_ptr<StoreIndex> made,
      StoreIndex::Create(embedder_->dimension(), analyzer_, options_.hnsw_ef_construction));
  std::unique_lock lock(indexes_mutex_);
  auto& slot = indexes_[store_id];
  if (slot == nullptr) slot = std::move(made);
  return slot;
}

Result<std::string> VectorStoreServiceImpl::TenantOf(const std::string& store_id) {
  {
    std::shared_lock lock(indexes_mutex_);
    const auto found = tenants_.find(store_id);
    if (found != tenants_.end()) return found->second;
  }
  ASSIGN_OR_RETURN(const auto stores, store_->ListVectorStores(""));
  std::unique_lock lock(indexes_mutex_);
  for (const store::VectorStoreRow& row : stores) tenants_[row.id] = row.tenant;
  const auto found = tenants_.find(store_id);
  return found != tenants_.end() ? found->second : std::string();
}

Status VectorStoreServiceImpl::LoadFile(const std::string& store_id, const std::string& file_id) {
  ASSIGN_OR_RETURN(const std::string tenant, TenantOf(store_id));
  if (tenant.empty()) return Status::Ok();  // deleted since
  ASSIGN_OR_RETURN(const auto file, store_->GetVectorStoreFile(tenant, store_id, file_id));
  ASSIGN_OR_RETURN(auto index, IndexFor(store_id));
  if (!file.has_value() || file->status != "completed") {
    index->RemoveFile(file_id);
    return Status::Ok();
  }
  ASSIGN_OR_RETURN(const VectorStoreFileInfo info, FileInfoFromRow(*file));
  ASSIGN_OR_RETURN(const auto rows, store_->ReadVectorStoreChunks(store_id, file_id));
  std::vector<IndexedChunk> chunks;
  chunks.reserve(rows.size());
  for (const store::VectorStoreChunkRow& row : rows) {
    auto text = OpenChunkText(options_.envelope, tenant, row);
    if (!text.ok()) {
      LOG_WARN("vector store {}: file {} is left out of search: {}", store_id, file_id,
               text.status().message());
      index->RemoveFile(file_id);
      return Status::Ok();
    }
    chunks.push_back(IndexedChunk{.chunk_index = static_cast<int>(row.chunk_index),
                                  .text = std::move(*text),
                                  .heading_path = row.heading_path,
                                  .page = static_cast<int>(row.page),
                                  .begin = static_cast<size_t>(row.begin),
                                  .end = static_cast<size_t>(row.end),
                                  .embedding = DecodeEmbedding(row.embedding)});
  }
  return index->ReplaceFile(info, std::move(chunks));
}

Status VectorStoreServiceImpl::Start() {
  if (started_) return FailedPrecondition("the vector store service was started already");
  started_ = true;
  std::lock_guard sync(sync_mutex_);
  // Changes after this point are replayed by the first sync; replaying is idempotent.
  ASSIGN_OR_RETURN(synced_, store_->LastVectorStoreChange());
  ASSIGN_OR_RETURN(const auto stores, store_->ListVectorStores(""));
  for (const store::VectorStoreRow& row : stores) {
    {
      std::unique_lock lock(indexes_mutex_);
      tenants_[row.id] = row.tenant;
    }
    ASSIGN_OR_RETURN(auto index, IndexFor(row.id));
    (void)index;
    ASSIGN_OR_RETURN(const auto files, store_->ListVectorStoreFiles(row.tenant, row.id));
    for (const store::VectorStoreFileRow& file : files) {
      if (file.status == "completed") RETURN_IF_ERROR(LoadFile(row.id, file.file_id));
    }
  }
  for (size_t i = 0; i < options_.workers; ++i) threads_.emplace_back([this] { WorkerLoop(); });
  threads_.emplace_back([this] { SyncLoop(); });
  return Status::Ok();
}

void VectorStoreServiceImpl::Stop() {
  if (stopping_.exchange(true)) return;
  WakeWorkers();
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
}

void VectorStoreServiceImpl::WakeWorkers() {
  {
    std::lock_guard lock(wake_mutex_);
    ++wakes_;
  }
  wake_.notify_all();
}

Status VectorStoreServiceImpl::SyncNow() {
  std::lock_guard sync(sync_mutex_);
  while (true) {
    ASSIGN_OR_RETURN(const auto changes, store_->ReadVectorStoreChanges(synced_, kChangesPerRead));
    for (const store::VectorStoreChange& change : changes) {
      if (change.kind == "store_removed") {
        std::unique_lock lock(indexes_mutex_);
        indexes_.erase(change.store_id);
        tenants_.erase(change.store_id);
      } else if (change.kind == "removed") {
        if (auto index = FindIndex(change.store_id)) index->RemoveFile(change.file_id);
      } else {  // "chunks", "attributes": the file as the Store holds it now
        RETURN_IF_ERROR(LoadFile(change.store_id, change.file_id));
      }
      synced_ = change.sequence;
    }
    if (changes.size() < static_cast<size_t>(kChangesPerRead)) return Status::Ok();
  }
}

void VectorStoreServiceImpl::SyncLoop() {
  uint64_t seen = 0;
  while (!stopping_) {
    if (Status synced = SyncNow(); !synced.ok()) {
      LOG_WARN("vector stores: following the store's changes failed: {}", synced.message());
    }
    std::unique_lock lock(wake_mutex_);
    wake_.wait_for(lock, options_.sync_interval, [&] { return stopping_ || wakes_ != seen; });
    seen = wakes_;
  }
}

void VectorStoreServiceImpl::WorkerLoop() {
  const IngestContext context{.store = store_,
                              .files = files_,
                              .embedder = embedder_,
                              .envelope = options_.envelope,
                              .seal_key = options_.seal_key,
                              .embed_batch = options_.embed_batch,
                              .extract = options_.extract,
                              .stopping = &stopping_,
                              .redact = options_.redact};
  while (!stopping_) {
    uint64_t seen = 0;
    {
      std::lock_guard lock(wake_mutex_);
      seen = wakes_;
    }
    const int64_t now = Now();
    auto claimed = store_->ClaimVectorStoreFile(worker_id_, now, now + options_.lease.count());
    if (!claimed.ok())
      LOG_WARN("vector stores: claiming a file failed: {}", claimed.status().message());
    if (!claimed.ok() || !claimed->has_value()) {
      std::unique_lock lock(wake_mutex_);
      wake_.wait_for(lock, options_.sync_interval, [&] { return stopping_ || wakes_ != seen; });
      continue;
    }
    store::VectorStoreFileRow file = std::move(**claimed);
    auto outcome = IngestFile(context, file);
    if (!outcome.ok()) {  // stopping: the next start (here or on a replica) takes it over
      (void)store_->ReleaseVectorStoreFile(file.store_id, file.file_id, worker_id_);
      continue;
    }
    if (outcome->error.has_value()) {
      file.status = "failed";
      file.error_code = outcome->error->code;
      file.error_message = outcome->error->message;
      outcome->rows.clear();
    } else {
      file.status = "completed";
      file.usage_bytes = outcome->usage_bytes;
    }
    std::unique_lock visible(visible_mutex_);
    Status finished = store_->FinishVectorStoreFile(file, worker_id_, outcome->rows);
    if (!finished.ok() && finished.code() != StatusCode::kFailedPrecondition) {
      LOG_WARN("vector stores: recording file {} failed: {}", file.file_id, finished.message());
      (void)store_->ReleaseVectorStoreFile(file.store_id, file.file_id, worker_id_);
    }
    if (Status synced = SyncNow(); !synced.ok()) {
      LOG_WARN("vector stores: following the store's changes failed: {}", synced.message());
    }
  }
}

}  // namespace internal

Result<std::unique_ptr<VectorStoreService>> NewVectorStoreService(
    store::Store* store, FileStorage* files, Embedder* embedder,
    const VectorStoreServiceOptions& options) {
  if (store == nullptr || files == nullptr || embedder == nullptr) {
    return InvalidArgument("the vector store service needs a store, file storage and embedder");
  }
  if (!(options.vector_weight >= 0 && options.vector_weight <= 100)) {
    return InvalidArgument("vector stores: vector_weight must be 0 to 100, not {}",
                           options.vector_weight);
  }
  if (options.workers < 1 || options.workers > 16) {
    return InvalidArgument("vector stores: workers must be 1 to 16, not {}", options.workers);
  }
  if (options.embed_batch < 1 || options.embed_batch > 2048) {
    return InvalidArgument("vector stores: embed_batch must be 1 to 2048, not {}",
                           options.embed_batch);
  }
  if (options.sync_interval.count() <= 0 || options.lease.count() <= 0) {
    return InvalidArgument("vector stores: sync_interval and lease must be positive");
  }
  if (embedder->dimension() == 0)
    return InvalidArgument("vector stores: the embedder has no dimension");
  if (options.envelope != nullptr && options.seal_key.empty()) {
    return InvalidArgument("vector stores: sealing needs a key name");
  }
  AnalyzerOptions analyzer_options;
  analyzer_options.language = options.language;
  analyzer_options.chinese_terms = options.chinese_terms;
  ASSIGN_OR_RETURN(std::unique_ptr<Analyzer> analyzer, Analyzer::Create(analyzer_options));
  return std::unique_ptr<VectorStoreService>(std::make_unique<internal::VectorStoreServiceImpl>(
      store, files, embedder, options, std::shared_ptr<const Analyzer>(std::move(analyzer))));
}

}  // namespace rampart::knowledge::hub
