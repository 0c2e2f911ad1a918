#pragma once

// An in-memory knowledge::hub::VectorStores for the front end's tests: stores and files of each
// tenant, files "completed" at once, a search that returns one hit per readable file (its
// filename as the text) in file order, and the last search request kept for inspection. A gate
// can hold calls, to fill the front end's queue.

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "knowledge/hub/vector_stores.h"

namespace rampart::testing {

namespace hub = knowledge::hub;

class FakeVectorStores final : public hub::VectorStores {
 public:
  // Files the Files API "holds", with their filenames.
  std::map<std::string, std::string> known_files = {
      {"file-a", "a.txt"}, {"file-b", "b.md"}, {"file-c", "c.pdf"}};

  // Holds every call until Open(); counts the calls waiting.
  void Close() {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  void Open() {
    {
      std::lock_guard lock(mutex_);
      closed_ = false;
    }
    changed_.notify_all();
  }
  int waiting() {
    std::lock_guard lock(mutex_);
    return waiting_;
  }
  int may_read_calls() {
    std::lock_guard lock(mutex_);
    return may_read_calls_;
  }
  std::optional<hub::SearchRequest> last_search() {
    std::lock_guard lock(mutex_);
    return last_search_;
  }

  Result<hub::VectorStoreInfo> CreateStore(const std::string& tenant,
                                           const hub::CreateStoreRequest& request) override {
    std::unique_lock lock = Enter();
    hub::VectorStoreInfo store{.id = "vs_" + std::to_string(++next_id_),
                               .tenant = tenant,
                               .name = request.name,
                               .metadata = request.metadata,
                               .created_at = 1700000000 + next_id_,
                               .last_active_at = 1700000000 + next_id_,
                               .expires_after = request.expires_after,
                               .status = "completed"};
    stores_[store.id] = store;
    for (const std::string& id : request.file_ids) {
      RETURN_IF_ERROR(AddLocked(
          tenant, store.id,
          {.file_id = id, .chunking = request.chunking, .redact_pii = request.redact_pii}));
    }
    return Info(store.id);
  }
  Result<hub::VectorStoreInfo> GetStore(const std::string& tenant, const std::string& id) override {
    std::unique_lock lock = Enter();
    RETURN_IF_ERROR(Find(tenant, id));
    return Info(id);
  }
  Result<hub::Page<hub::VectorStoreInfo>> ListStores(const std::string& tenant,
                                                     const hub::PageRequest& page) override {
    std::unique_lock lock = Enter();
    hub::Page<hub::VectorStoreInfo> answer;
    for (const auto& [id, store] : stores_) {
      if (store.tenant != tenant) continue;
      if (static_cast<int>(answer.items.size()) == page.limit) {
        answer.has_more = true;
        break;
      }
      answer.items.push_back(Info(id));
    }
    return answer;
  }
  Result<hub::VectorStoreInfo> ModifyStore(const std::string& tenant, const std::string& id,
                                           const hub::ModifyStoreRequest& request) override {
    std::unique_lock lock = Enter();
    RETURN_IF_ERROR(Find(tenant, id));
    hub::VectorStoreInfo& store = stores_[id];
    if (request.name) store.name = *request.name;
    if (request.metadata) store.metadata = *request.metadata;
    if (request.expires_after) store.expires_after = *request.expires_after;
    return Info(id);
  }
  Status DeleteStore(const std::string& tenant, const std::string& id) override {
    std::unique_lock lock = Enter();
    RETURN_IF_ERROR(Find(tenant, id));
    stores_.erase(id);
    files_.erase(id);
    return Status::Ok();
  }
  Result<hub::VectorStoreFileInfo> AddFile(const std::string& tenant, const std::string& store_id,
                                           const hub::AddFileRequest& request) override {
    std::unique_lock lock = Enter();
    RETURN_IF_ERROR(AddLocked(tenant, store_id, request));
    return files_[store_id][request.file_id];
  }
  Result<hub::VectorStoreFileInfo> GetFile(const std::string& tenant, const std::string& store_id,
                                           const std::string& file_id) override {
    std::unique_lock lock = Enter();
    ASSIGN_OR_RETURN(hub::VectorStoreFileInfo * file, FindFile(tenant, store_id, file_id));
    return *file;
  }
  Result<hub::Page<hub::VectorStoreFileInfo>> ListFiles(const std::string& tenant,
                                                        const std::string& store_id,
                                                        const hub::PageRequest& page,
                                                        std::optional<hub::IngestStatus> status,
                                                        const std::string& batch_id) override {
    std::unique_lock lock = Enter();
    RETURN_IF_ERROR(Find(tenant, store_id));
    if (!batch_id.empty() && !batches_.contains(batch_id)) return NotFound("no batch");
    hub::Page<hub::VectorStoreFileInfo> answer;
    for (const auto& [id, file] : files_[store_id]) {
      if (status && file.status != *status) continue;
      if (static_cast<int>(answer.items.size()) == page.limit) {
        answer.has_more = true;
        break;
      }
      answer.items.push_back(file);
    }
    return answer;
  }
  Result<hub::VectorStoreFileInfo> UpdateFileAttributes(
      const std::string& tenant, const std::string& store_id, const std::string& file_id,
      const hub::FileAttributes& attributes) override {
    std::unique_lock lock = Enter();
    ASSIGN_OR_RETURN(hub::VectorStoreFileInfo * file, FindFile(tenant, store_id, file_id));
    file->attributes = attributes;
    return *file;
  }
  Status RemoveFile(const std::string& tenant, const std::string& store_id,
                    const std::string& file_id) override {
    std::unique_lock lock = Enter();
    RETURN_IF_ERROR(FindFile(tenant, store_id, file_id).status());
    files_[store_id].erase(file_id);
    return Status::Ok();
  }
  Result<std::vector<std::string>> FileContent(const std::string& tenant,
                                               const std::string& store_id,
                                               const std::string& file_id) override {
    std::unique_lock lock = Enter();
    ASSIGN_OR_RETURN(hub::VectorStoreFileInfo * file, FindFile(tenant, store_id, file_id));
    return std::vector<std::string>{"chunk one of " + file->filename, "chunk two"};
  }
  Status ForgetFile(const std::string& tenant, const std::string& file_id) override {
    std::unique_lock lock = Enter();
    for (auto& [store_id, files] : files_) {
      if (stores_[store_id].tenant == tenant) files.erase(file_id);
    }
    forgotten.push_back(file_id);
    return Status::Ok();
  }
  Result<hub::FileBatchInfo> CreateBatch(const std::string& tenant, const std::string& store_id,
                                         const hub::CreateBatchRequest& request) override {
    std::unique_lock lock = Enter();
    RETURN_IF_ERROR(Find(tenant, store_id));
    for (const hub::AddFileRequest& file : request.files) {
      RETURN_IF_ERROR(AddLocked(tenant, store_id, file));
    }
    hub::FileBatchInfo batch{.id = "vsfb_" + std::to_string(++next_id_),
                             .vector_store_id = store_id,
                             .created_at = 1700000100,
                             .status = hub::IngestStatus::kCompleted};
    batch.file_counts.completed = batch.file_counts.total =
        static_cast<int64_t>(request.files.size());
    batches_[batch.id] = batch;
    return batch;
  }
  Result<hub::FileBatchInfo> GetBatch(const std::string& tenant, const std::string& store_id,
                                      const std::string& batch_id) override {
    std::unique_lock lock = Enter();
    RETURN_IF_ERROR(Find(tenant, store_id));
    auto found = batches_.find(batch_id);
    if (found == batches_.end() || found->second.vector_store_id != store_id) {
      return NotFound("No file batch found with id '{}'.", batch_id);
    }
    return found->second;
  }
  Result<hub::FileBatchInfo> CancelBatch(const std::string& tenant, const std::string& store_id,
                                         const std::string& batch_id) override {
    ASSIGN_OR_RETURN(hub::FileBatchInfo batch, GetBatch(tenant, store_id, batch_id));
    std::unique_lock lock = Enter();
    batches_[batch_id].status = hub::IngestStatus::kCancelled;
    return batches_[batch_id];
  }
  Result<hub::SearchResults> Search(const std::string& tenant, const std::string& store_id,
                                    const hub::SearchRequest& request) override {
    std::unique_lock lock = Enter();
    RETURN_IF_ERROR(Find(tenant, store_id));
    last_search_ = request;
    hub::SearchResults results;
    double score = 0.9;
    for (const auto& [id, file] : files_[store_id]) {
      if (request.may_read) {
        ++may_read_calls_;
        // Asked twice, as from both indexes: the front end decides once per file.
        lock.unlock();
        const bool readable = request.may_read(file) && request.may_read(file);
        lock.lock();
        if (!readable) continue;
      }
      results.hits.push_back({.file_id = id,
                              .filename = file.filename,
                              .score = score,
                              .attributes = file.attributes,
                              .text = "about " + file.filename});
      score -= 0.1;
      if (static_cast<int>(results.hits.size()) == request.max_num_results) break;
    }
    return results;
  }

  std::vector<std::string> forgotten;

 private:
  std::unique_lock<std::mutex> Enter() {
    std::unique_lock lock(mutex_);
    ++waiting_;
    changed_.wait(lock, [this] { return !closed_; });
    --waiting_;
    return lock;
  }
  Status Find(const std::string& tenant, const std::string& id) {
    auto found = stores_.find(id);
    if (found == stores_.end() || found->second.tenant != tenant) {
      return NotFound("No vector store found with id '{}'.", id);
    }
    return Status::Ok();
  }
  Result<hub::VectorStoreFileInfo*> FindFile(const std::string& tenant, const std::string& store_id,
                                             const std::string& file_id) {
    RETURN_IF_ERROR(Find(tenant, store_id));
    auto found = files_[store_id].find(file_id);
    if (found == files_[store_id].end()) {
      return NotFound("No file found with id '{}' in vector store '{}'.", file_id, store_id);
    }
    return &found->second;
  }
  Status AddLocked(const std::string& tenant, const std::string& store_id,
                   const hub::AddFileRequest& request) {
    RETURN_IF_ERROR(Find(tenant, store_id));
    auto known = known_files.find(request.file_id);
    if (known == known_files.end()) {
      return FailedPrecondition("No file found with id '{}'.", request.file_id);
    }
    files_[store_id][request.file_id] = {.id = request.file_id,
                                         .vector_store_id = store_id,
                                         .filename = known->second,
                                         .created_at = 1700000050,
                                         .status = hub::IngestStatus::kCompleted,
                                         .attributes = request.attributes,
                                         .chunking = request.chunking,
                                         .usage_bytes = 100,
                                         .redact_pii = request.redact_pii};
    return Status::Ok();
  }
  hub::VectorStoreInfo Info(const std::string& id) {
    hub::VectorStoreInfo info = stores_[id];
    info.file_counts = {};
    for (const auto& [file_id, file] : files_[id]) {
      ++info.file_counts.completed;
      ++info.file_counts.total;
      info.usage_bytes += file.usage_bytes;
    }
    return info;
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  bool closed_ = false;
  int waiting_ = 0;
  int may_read_calls_ = 0;
  int64_t next_id_ = 0;
  std::map<std::string, hub::VectorStoreInfo> stores_;
  std::map<std::string, std::map<std::string, hub::VectorStoreFileInfo>> files_;
  std::map<std::string, hub::FileBatchInfo> batches_;
  std::optional<hub::SearchRequest> last_search_;
};

}  // namespace rampart::testing
