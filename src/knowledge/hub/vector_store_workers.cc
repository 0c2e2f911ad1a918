// The vector store service's threads: Start (indexes loaded from snapshots or built from the
// Store), the ingestion workers, following the Store's change sequence, and snapshots.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

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
      worker_id_(options_.worker_id.empty() ? DefaultWorkerId() : options_.worker_id) {
  snapshot_settings_.dimension = embedder_->dimension();
  snapshot_settings_.analyzer = analyzer_;
  snapshot_settings_.ef_construction = options_.hnsw_ef_construction;
  snapshot_settings_.tag = StoreSnapshotTag(
      embedder_->dimension(), embedder_->name(), options_.language, options_.chinese_terms,
      options_.hnsw_ef_construction, options_.envelope != nullptr);
  if (options_.envelope != nullptr) {
    snapshot_settings_.keyring = &options_.envelope->keyring();
    snapshot_settings_.key_name = options_.seal_key;
  }
}

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

Status VectorStoreServiceImpl::LoadStore(const store::VectorStoreRow& row, int64_t last_change,
                                         int64_t& replay_from) {
  {
    std::unique_lock lock(indexes_mutex_);
    tenants_[row.id] = row.tenant;
  }
  if (!options_.snapshot_directory.empty()) {
    const auto started = std::chrono::steady_clock::now();
    Result<LoadedStoreSnapshot> loaded =
        LoadStoreSnapshot(options_.snapshot_directory + "/" + row.id, row.id, snapshot_settings_);
    if (loaded.ok() && loaded->info.sequence > static_cast<uint64_t>(last_change)) {
      loaded = FailedPrecondition(
          "snapshot '{}' reflects change {}, past the store's last change {} (another store?)",
          loaded->info.path, loaded->info.sequence, last_change);
    }
    if (loaded.ok()) {
      const auto sequence = static_cast<int64_t>(loaded->info.sequence);
      LOG_INFO("vector store {}: loaded snapshot '{}' ({} chunks, through change {}) in {} ms",
               row.id, loaded->info.path, loaded->index->chunk_count(), sequence,
               std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - started)
                   .count());
      {
        std::lock_guard lock(snapshot_mutex_);
        snapshot_changes_[row.id] = loaded->index->changed_chunks();
      }
      replay_after_[row.id] = sequence;
      ++start_summary_.stores_loaded;
      replay_from = std::min(replay_from, sequence);
      std::unique_lock lock(indexes_mutex_);
      indexes_[row.id] = std::move(loaded->index);
      return Status::Ok();
    }
    if (loaded.status().code() != StatusCode::kNotFound) {
      LOG_WARN("vector store {}: rebuilding its index from the store: {}", row.id,
               loaded.status().message());
    }
  }
  ++start_summary_.stores_rebuilt;
  replay_after_[row.id] = last_change;  // built from the store as of `last_change` or later
  ASSIGN_OR_RETURN(auto index, IndexFor(row.id));
  (void)index;
  ASSIGN_OR_RETURN(const auto files, store_->ListVectorStoreFiles(row.tenant, row.id));
  for (const store::VectorStoreFileRow& file : files) {
    if (file.status == "completed") RETURN_IF_ERROR(LoadFile(row.id, file.file_id));
  }
  return Status::Ok();
}

Status VectorStoreServiceImpl::Start() {
  if (started_) return FailedPrecondition("the vector store service was started already");
  started_ = true;
  std::lock_guard sync(sync_mutex_);
  // Changes after this point are replayed below; replaying is idempotent.
  ASSIGN_OR_RETURN(const int64_t last_change, store_->LastVectorStoreChange());
  ASSIGN_OR_RETURN(const auto stores, store_->ListVectorStores(""));
  if (!options_.snapshot_directory.empty()) {
    std::error_code error;
    std::filesystem::create_directories(options_.snapshot_directory, error);
    if (error) {
      return Unavailable("cannot make the snapshot folder '{}': {}", options_.snapshot_directory,
                         error.message());
    }
  }
  int64_t replay_from = last_change;
  for (const store::VectorStoreRow& row : stores) {
    RETURN_IF_ERROR(LoadStore(row, last_change, replay_from));
  }
  // The changes after the oldest snapshot, as a running instance follows them (each store's own
  // from its snapshot on), so that Start returns with every index as of `last_change` or later.
  synced_ = replay_from;
  RETURN_IF_ERROR(SyncLocked(&start_summary_.changes_replayed));
  LOG_INFO(
      "vector stores: {} loaded from snapshots, {} rebuilt from the store, {} changes replayed",
      start_summary_.stores_loaded, start_summary_.stores_rebuilt, start_summary_.changes_replayed);
  replay_after_.clear();
  for (size_t i = 0; i < options_.workers; ++i) threads_.emplace_back([this] { WorkerLoop(); });
  threads_.emplace_back([this] { SyncLoop(); });
  if (!options_.snapshot_directory.empty()) threads_.emplace_back([this] { SnapshotLoop(); });
  return Status::Ok();
}

void VectorStoreServiceImpl::Stop() {
  if (stopping_.exchange(true)) return;
  WakeWorkers();
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
  if (started_ && !options_.snapshot_directory.empty()) {
    if (Status written = WriteSnapshots(/*every_change=*/true); !written.ok()) {
      LOG_WARN("vector stores: the snapshots at stop: {}", written.message());
    }
  }
}

Status VectorStoreServiceImpl::WriteSnapshots(bool every_change) {
  if (options_.snapshot_directory.empty()) return Status::Ok();
  std::lock_guard lock(snapshot_mutex_);
  int64_t sequence = 0;
  {
    // Each index reflects every change up to `sequence` (and maybe later ones: replaying those
    // again at the next start is harmless).
    std::lock_guard sync(sync_mutex_);
    sequence = synced_;
  }
  std::vector<std::pair<std::string, std::shared_ptr<StoreIndex>>> indexes;
  {
    std::shared_lock read(indexes_mutex_);
    indexes.assign(indexes_.begin(), indexes_.end());
  }
  Status first_error;
  for (const auto& [store_id, index] : indexes) {
    const uint64_t changes = index->changed_chunks();
    const auto last = snapshot_changes_.find(store_id);
    if (last != snapshot_changes_.end()) {
      const uint64_t changed = changes - last->second;
      const uint64_t due =
          std::max<uint64_t>(options_.snapshot_min_changes, index->chunk_count() / 4);
      if (changed == 0 || (!every_change && changed < due)) continue;
    }
    const auto started = std::chrono::steady_clock::now();
    const StoreIndexState state = index->Capture();
    const auto captured = std::chrono::steady_clock::now();
    Result<SnapshotInfo> written =
        WriteStoreSnapshot(options_.snapshot_directory + "/" + store_id, store_id, state,
                           static_cast<uint64_t>(sequence), snapshot_settings_);
    if (!written.ok()) {
      LOG_WARN("vector store {}: writing its snapshot failed: {}", store_id,
               written.status().message());
      if (first_error.ok()) first_error = written.status();
      continue;
    }
    snapshot_changes_[store_id] = state.changes;
    const auto millis = [](auto duration) {
      return std::chrono::duration_cast<std::chrono::milliseconds>(duration).count();
    };
    LOG_INFO(
        "vector store {}: snapshot '{}' ({} chunks, through change {}) in {} ms ({} ms "
        "copying the index, while its writers waited)",
        store_id, written->path, state.chunks.size(), sequence,
        millis(std::chrono::steady_clock::now() - started), millis(captured - started));
  }
  // The snapshots of stores deleted since (here or by another instance).
  std::error_code error;
  for (const auto& entry :
       std::filesystem::directory_iterator(options_.snapshot_directory, error)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("vs_") || FindIndex(name) != nullptr) continue;
    std::error_code removing;
    std::filesystem::remove_all(entry.path(), removing);
    if (removing) LOG_WARN("vector stores: cannot delete '{}': {}", name, removing.message());
    snapshot_changes_.erase(name);
  }
  return first_error;
}

void VectorStoreServiceImpl::SnapshotLoop() {
  while (!stopping_) {
    {
      std::unique_lock lock(wake_mutex_);
      wake_.wait_for(lock, options_.snapshot_interval, [&] { return stopping_.load(); });
    }
    if (stopping_) return;
    if (Status written = WriteSnapshots(/*every_change=*/false); !written.ok()) {
      LOG_WARN("vector stores: snapshots: {}", written.message());
    }
  }
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
  return SyncLocked();
}

Status VectorStoreServiceImpl::SyncLocked(size_t* applied) {
  while (true) {
    ASSIGN_OR_RETURN(const auto changes, store_->ReadVectorStoreChanges(synced_, kChangesPerRead));
    for (const store::VectorStoreChange& change : changes) {
      const auto loaded = replay_after_.find(change.store_id);
      if (loaded != replay_after_.end() && change.sequence <= loaded->second) {
        synced_ = change.sequence;  // its snapshot has it
        continue;
      }
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
      if (applied != nullptr) ++*applied;
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
