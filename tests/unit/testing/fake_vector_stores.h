#pragma once

// FakeVectorStores: knowledge::hub::VectorStores for tests of what is built on Search. It holds
// canned passages per (tenant, store) and answers Search with those scoring at least the
// request's threshold whose file the request's may_read admits (as the real service does, before
// ranking), best first, at most max_num_results. Every other method answers Unimplemented.
// Records the last search; FailWith makes searches fail, Hold makes them wait. Thread-safe.

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "knowledge/hub/vector_stores.h"

namespace rampart::testing {

class FakeVectorStores final : public knowledge::hub::VectorStores {
 public:
  struct Searched {
    std::string tenant;
    std::string store;
    std::vector<std::string> queries;
    int max_num_results = 0;
    double score_threshold = 0;
    bool had_may_read = false;
  };

  void Put(const std::string& tenant, const std::string& store,
           std::vector<knowledge::hub::SearchHit> hits) {
    std::lock_guard lock(mutex_);
    stores_[{tenant, store}] = std::move(hits);
  }
  // Every search answers `status` from now on (OK: the canned passages again).
  void FailWith(Status status) {
    std::lock_guard lock(mutex_);
    fail_ = std::move(status);
  }
  // While held, searches wait (after being counted) until Release.
  void Hold() {
    std::lock_guard lock(mutex_);
    held_ = true;
  }
  void Release() {
    {
      std::lock_guard lock(mutex_);
      held_ = false;
    }
    released_.notify_all();
  }
  // Searches that have returned.
  int finished() const {
    std::lock_guard lock(mutex_);
    return finished_;
  }
  std::optional<Searched> last_search() const {
    std::lock_guard lock(mutex_);
    return last_;
  }
  int searches() const {
    std::lock_guard lock(mutex_);
    return searches_;
  }

  Result<knowledge::hub::SearchResults> Search(
      const std::string& tenant, const std::string& store_id,
      const knowledge::hub::SearchRequest& request) override {
    std::vector<knowledge::hub::SearchHit> hits;
    struct Finished {
      FakeVectorStores* self;
      ~Finished() {
        std::lock_guard lock(self->mutex_);
        ++self->finished_;
      }
    } finished{this};
    {
      std::unique_lock lock(mutex_);
      ++searches_;
      released_.wait(lock, [this] { return !held_; });
      last_ = Searched{.tenant = tenant,
                       .store = store_id,
                       .queries = request.queries,
                       .max_num_results = request.max_num_results,
                       .score_threshold = request.score_threshold,
                       .had_may_read = static_cast<bool>(request.may_read)};
      if (!fail_.ok()) return fail_;
      auto found = stores_.find({tenant, store_id});
      if (found == stores_.end()) return NotFound("no vector store '{}'", store_id);
      hits = found->second;
    }
    knowledge::hub::SearchResults results;
    for (knowledge::hub::SearchHit& hit : hits) {
      if (hit.score < request.score_threshold) continue;
      if (request.may_read) {
        knowledge::hub::VectorStoreFileInfo file;
        file.id = hit.file_id;
        file.vector_store_id = store_id;
        file.filename = hit.filename;
        file.attributes = hit.attributes;
        if (!request.may_read(file)) continue;
      }
      results.hits.push_back(std::move(hit));
    }
    std::stable_sort(results.hits.begin(), results.hits.end(),
                     [](const auto& a, const auto& b) { return a.score > b.score; });
    if (results.hits.size() > static_cast<size_t>(request.max_num_results)) {
      results.hits.resize(static_cast<size_t>(request.max_num_results));
    }
    return results;
  }

  Result<knowledge::hub::VectorStoreInfo> CreateStore(
      const std::string&, const knowledge::hub::CreateStoreRequest&) override {
    return Unimplemented("fake");
  }
  Result<knowledge::hub::VectorStoreInfo> GetStore(const std::string&,
                                                   const std::string&) override {
    return Unimplemented("fake");
  }
  Result<knowledge::hub::Page<knowledge::hub::VectorStoreInfo>> ListStores(
      const std::string&, const knowledge::hub::PageRequest&) override {
    return Unimplemented("fake");
  }
  Result<knowledge::hub::VectorStoreInfo> ModifyStore(
      const std::string&, const std::string&, const knowledge::hub::ModifyStoreRequest&) override {
    return Unimplemented("fake");
  }
  Status DeleteStore(const std::string&, const std::string&) override {
    return Unimplemented("fake");
  }
  Result<knowledge::hub::VectorStoreFileInfo> AddFile(
      const std::string&, const std::string&, const knowledge::hub::AddFileRequest&) override {
    return Unimplemented("fake");
  }
  Result<knowledge::hub::VectorStoreFileInfo> GetFile(const std::string&, const std::string&,
                                                      const std::string&) override {
    return Unimplemented("fake");
  }
  Result<knowledge::hub::Page<knowledge::hub::VectorStoreFileInfo>> ListFiles(
      const std::string&, const std::string&, const knowledge::hub::PageRequest&,
      std::optional<knowledge::hub::IngestStatus>, const std::string&) override {
    return Unimplemented("fake");
  }
  Result<knowledge::hub::VectorStoreFileInfo> UpdateFileAttributes(
      const std::string&, const std::string&, const std::string&,
      const knowledge::hub::FileAttributes&) override {
    return Unimplemented("fake");
  }
  Status RemoveFile(const std::string&, const std::string&, const std::string&) override {
    return Unimplemented("fake");
  }
  Result<std::vector<std::string>> FileContent(const std::string&, const std::string&,
                                               const std::string&) override {
    return Unimplemented("fake");
  }
  Status ForgetFile(const std::string&, const std::string&) override {
    return Unimplemented("fake");
  }
  Result<knowledge::hub::FileBatchInfo> CreateBatch(
      const std::string&, const std::string&, const knowledge::hub::CreateBatchRequest&) override {
    return Unimplemented("fake");
  }
  Result<knowledge::hub::FileBatchInfo> GetBatch(const std::string&, const std::string&,
                                                 const std::string&) override {
    return Unimplemented("fake");
  }
  Result<knowledge::hub::FileBatchInfo> CancelBatch(const std::string&, const std::string&,
                                                    const std::string&) override {
    return Unimplemented("fake");
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, std::vector<knowledge::hub::SearchHit>> stores_;
  std::optional<Searched> last_;
  int searches_ = 0;
  Status fail_ = Status::Ok();
  bool held_ = false;
  int finished_ = 0;
  std::condition_variable released_;
};

}  // namespace rampart::testing
