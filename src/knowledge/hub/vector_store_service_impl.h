#pragma once

// The vector store service's class, shared by its two source files: vector_store_service.cc
// (the VectorStores calls) and vector_store_workers.cc (start, ingestion workers, following the
// change sequence). Internal to the knowledge hub.

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "knowledge/hub/vector_store_service.h"
#include "knowledge/hub/vector_store_snapshot.h"

namespace rampart::knowledge::hub::internal {

class VectorStoreServiceImpl final : public VectorStoreService {
 public:
  VectorStoreServiceImpl(store::Store* store, FileStorage* files, Embedder* embedder,
                         VectorStoreServiceOptions options,
                         std::shared_ptr<const Analyzer> analyzer);
  ~VectorStoreServiceImpl() override { Stop(); }

  Status Start() override;
  void Stop() override;
  bool stopping() const override { return stopping_; }
  Status SyncNow() override;
  Status SnapshotNow() override { return WriteSnapshots(/*every_change=*/true); }
  StartSummary start_summary() const override { return start_summary_; }

  Result<VectorStoreInfo> CreateStore(const std::string& tenant,
                                      const CreateStoreRequest& request) override;
  Result<VectorStoreInfo> GetStore(const std::string& tenant, const std::string& id) override;
  Result<Page<VectorStoreInfo>> ListStores(const std::string& tenant,
                                           const PageRequest& page) override;
  Result<VectorStoreInfo> ModifyStore(const std::string& tenant, const std::string& id,
                                      const ModifyStoreRequest& request) override;
  Status DeleteStore(const std::string& tenant, const std::string& id) override;
  Result<VectorStoreFileInfo> AddFile(const std::string& tenant, const std::string& store_id,
                                      const AddFileRequest& request) override;
  Result<VectorStoreFileInfo> GetFile(const std::string& tenant, const std::string& store_id,
                                      const std::string& file_id) override;
  Result<Page<VectorStoreFileInfo>> ListFiles(const std::string& tenant,
                                              const std::string& store_id, const PageRequest& page,
                                              std::optional<IngestStatus> status,
                                              const std::string& batch_id) override;
  Result<VectorStoreFileInfo> UpdateFileAttributes(const std::string& tenant,
                                                   const std::string& store_id,
                                                   const std::string& file_id,
                                                   const FileAttributes& attributes) override;
  Status RemoveFile(const std::string& tenant, const std::string& store_id,
                    const std::string& file_id) override;
  Result<std::vector<std::string>> FileContent(const std::string& tenant,
                                               const std::string& store_id,
                                               const std::string& file_id) override;
  Status ForgetFile(const std::string& tenant, const std::string& file_id) override;
  Result<FileBatchInfo> CreateBatch(const std::string& tenant, const std::string& store_id,
                                    const CreateBatchRequest& request) override;
  Result<FileBatchInfo> GetBatch(const std::string& tenant, const std::string& store_id,
                                 const std::string& batch_id) override;
  Result<FileBatchInfo> CancelBatch(const std::string& tenant, const std::string& store_id,
                                    const std::string& batch_id) override;
  Result<SearchResults> Search(const std::string& tenant, const std::string& store_id,
                               const SearchRequest& request) override;

 private:
  int64_t Now() const;
  // The store's row, NotFound when absent or another tenant's.
  Result<store::VectorStoreRow> StoreRow(const std::string& tenant, const std::string& id);
  Result<VectorStoreInfo> StoreInfo(const store::VectorStoreRow& row);
  // The file row to add (FailedPrecondition when the Files API does not hold the file).
  Result<store::VectorStoreFileRow> NewFileRow(const std::string& tenant,
                                               const std::string& store_id,
                                               const AddFileRequest& request,
                                               const std::string& batch_id);
  Result<FileBatchInfo> BatchInfo(const store::VectorStoreBatchRow& row);
  bool Expired(const store::VectorStoreRow& row) const;

  // The store's index (made empty when absent).
  Result<std::shared_ptr<StoreIndex>> IndexFor(const std::string& store_id);
  std::shared_ptr<StoreIndex> FindIndex(const std::string& store_id) const;
  // The store's tenant; "" when the store is gone.
  Result<std::string> TenantOf(const std::string& store_id);
  // Reloads one file into its store's index from the Store (removes it when not completed).
  Status LoadFile(const std::string& store_id, const std::string& file_id);
  // SyncNow with sync_mutex_ held; counts the changes it applies into `applied` when given.
  Status SyncLocked(size_t* applied = nullptr);
  // Start's load of one store's index: its snapshot, or a rebuild from the Store.
  Status LoadStore(const store::VectorStoreRow& row, int64_t last_change, int64_t& replay_from);
  // Writes the snapshots that are due (every_change: of every store changed since its last).
  Status WriteSnapshots(bool every_change);
  void WorkerLoop();
  void SyncLoop();
  void SnapshotLoop();
  void WakeWorkers();

  store::Store* const store_;
  FileStorage* const files_;
  Embedder* const embedder_;
  const VectorStoreServiceOptions options_;
  const std::shared_ptr<const Analyzer> analyzer_;
  std::string worker_id_;
  StoreSnapshotSettings snapshot_settings_;

  mutable std::shared_mutex indexes_mutex_;
  std::map<std::string, std::shared_ptr<StoreIndex>> indexes_;  // guarded by indexes_mutex_
  std::map<std::string, std::string> tenants_;  // store id -> tenant; guarded by indexes_mutex_

  // Held exclusively by a worker from recording a file's outcome until its index shows it, and
  // shared by the calls that report ingestion state or search, so that a file reported
  // completed here is also found here.
  std::shared_mutex visible_mutex_;
  std::mutex sync_mutex_;  // one follower at a time
  int64_t synced_ = 0;     // guarded by sync_mutex_
  // Store id -> the sequence its loaded snapshot reflects: earlier changes of it are skipped.
  std::map<std::string, int64_t> replay_after_;  // guarded by sync_mutex_

  std::mutex snapshot_mutex_;  // one WriteSnapshots at a time
  // Store id -> its changed_chunks() as of its last snapshot; absent: none written or loaded.
  std::map<std::string, uint64_t> snapshot_changes_;  // guarded by snapshot_mutex_

  std::mutex wake_mutex_;
  std::condition_variable wake_;
  uint64_t wakes_ = 0;  // guarded by wake_mutex_
  std::atomic<bool> stopping_{false};
  bool started_ = false;
  StartSummary start_summary_;  // written by Start only
  std::vector<std::thread> threads_;
};

}  // namespace rampart::knowledge::hub::internal
