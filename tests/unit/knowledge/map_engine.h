#pragma once

// MapEngine: a plain IndexEngine for the durable layer's tests (records in ordered maps, exact
// scoring by dot product, no filters), so the log, snapshots and DurableIndex are tested apart
// from the HNSW engine. Thread-safe as IndexEngine requires (one writer, many readers).

#include <map>
#include <memory>
#include <shared_mutex>
#include <string>

#include "knowledge/index/engine.h"

namespace rampart::knowledge::testing {

class MapEngine : public IndexEngine {
 public:
  using Namespaces = std::map<std::string, std::map<std::string, VectorRecord>, std::less<>>;

  explicit MapEngine(const EngineOptions& options) : options_(options) {}
  static Result<std::unique_ptr<IndexEngine>> Make(const EngineOptions& options) {
    return std::unique_ptr<IndexEngine>(new MapEngine(options));
  }

  const EngineOptions& options() const override { return options_; }

  Result<WriteOp> ResolveUpsert(std::string_view name_space,
                                std::vector<VectorRecord> records) const override {
    for (const VectorRecord& record : records) {
      if (record.values.size() != options_.dimension) {
        return InvalidArgument("vector '{}' has dimension {}, the index {}", record.id,
                               record.values.size(), options_.dimension);
      }
    }
    return WriteOp{std::string(name_space), UpsertOp{std::move(records)}};
  }
  Result<std::optional<WriteOp>> ResolveUpdate(const UpdateRequest& request) const override {
    std::shared_lock lock(mutex_);
    const auto space = namespaces_.find(request.name_space);
    if (space == namespaces_.end()) return std::optional<WriteOp>();
    const auto found = space->second.find(request.id);
    if (found == space->second.end()) return std::optional<WriteOp>();
    VectorRecord record = found->second;
    if (request.values) record.values = *request.values;
    if (request.set_metadata) {
      for (const auto& [key, value] : *request.set_metadata) {
        auto it = std::find_if(record.metadata.begin(), record.metadata.end(),
                               [&](const auto& field) { return field.first == key; });
        if (it != record.metadata.end()) {
          it->second = value;
        } else {
          record.metadata.emplace_back(key, value);
        }
      }
      std::sort(record.metadata.begin(), record.metadata.end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
    }
    return std::optional<WriteOp>(WriteOp{request.name_space, UpsertOp{{std::move(record)}}});
  }
  Result<WriteOp> ResolveDelete(const DeleteRequest& request) const override {
    if (request.filter) return Unimplemented("MapEngine has no filters");
    if (request.delete_all) return WriteOp{request.name_space, DeleteAllOp{}};
    return WriteOp{request.name_space, DeleteIdsOp{request.ids}};
  }
  void Apply(const WriteOp& op) override {
    std::unique_lock lock(mutex_);
    auto& space = namespaces_[op.name_space];
    if (const auto* upsert = std::get_if<UpsertOp>(&op.change)) {
      for (const VectorRecord& record : upsert->records) space[record.id] = record;
    } else if (const auto* deletion = std::get_if<DeleteIdsOp>(&op.change)) {
      for (const std::string& id : deletion->ids) space.erase(id);
    } else {
      space.clear();
    }
    if (space.empty()) namespaces_.erase(op.name_space);
  }

  Result<QueryResult> Query(const QueryRequest& request) const override {
    std::shared_lock lock(mutex_);
    QueryResult result;
    result.plan = "exact";
    const auto space = namespaces_.find(request.name_space);
    if (space == namespaces_.end()) return result;
    for (const auto& [id, record] : space->second) {
      float score = 0;
      for (size_t i = 0; i < record.values.size() && i < request.vector.size(); ++i) {
        score += record.values[i] * request.vector[i];
      }
      result.matches.push_back({id, score, std::nullopt, std::nullopt, std::nullopt});
    }
    std::sort(result.matches.begin(), result.matches.end(),
              [](const Match& a, const Match& b) { return a.score > b.score; });
    if (result.matches.size() > request.top_k) result.matches.resize(request.top_k);
    return result;
  }
  std::vector<VectorRecord> Fetch(std::string_view name_space,
                                  std::span<const std::string> ids) const override {
    std::shared_lock lock(mutex_);
    std::vector<VectorRecord> records;
    const auto space = namespaces_.find(name_space);
    if (space == namespaces_.end()) return records;
    for (const std::string& id : ids) {
      if (auto found = space->second.find(id); found != space->second.end()) {
        records.push_back(found->second);
      }
    }
    return records;
  }
  Result<ListPage> List(std::string_view name_space, std::string_view prefix, size_t limit,
                        std::string_view) const override {
    std::shared_lock lock(mutex_);
    ListPage page;
    const auto space = namespaces_.find(name_space);
    if (space == namespaces_.end()) return page;
    for (const auto& [id, record] : space->second) {
      if (id.starts_with(prefix) && page.ids.size() < limit) page.ids.push_back(id);
    }
    return page;
  }
  Result<IndexStats> Stats(const FilterNode*) const override {
    std::shared_lock lock(mutex_);
    IndexStats stats;
    stats.dimension = options_.dimension;
    stats.metric = options_.metric;
    for (const auto& [name, space] : namespaces_) {
      stats.namespaces.push_back({name, space.size()});
      stats.total_vector_count += space.size();
    }
    return stats;
  }

  class MapView final : public EngineView {
   public:
    explicit MapView(Namespaces copy) : copy_(std::move(copy)) {}
    Status ForEach(
        const std::function<Status(std::string_view, const VectorRecord&)>& visit) const override {
      for (const auto& [name, space] : copy_) {
        for (const auto& [id, record] : space) RETURN_IF_ERROR(visit(name, record));
      }
      return Status::Ok();
    }
    uint64_t record_count() const override {
      uint64_t count = 0;
      for (const auto& [name, space] : copy_) count += space.size();
      return count;
    }

   private:
    Namespaces copy_;
  };
  std::unique_ptr<EngineView> View() const override {
    std::shared_lock lock(mutex_);
    return std::make_unique<MapView>(namespaces_);
  }
  size_t MemoryBytes() const override { return 0; }

  Namespaces Contents() const {
    std::shared_lock lock(mutex_);
    return namespaces_;
  }

 private:
  const EngineOptions options_;
  mutable std::shared_mutex mutex_;
  Namespaces namespaces_;
};

// Field-by-field equality for records (VectorRecord has no operator==).
inline bool SameRecord(const VectorRecord& a, const VectorRecord& b) {
  return a.id == b.id && a.values == b.values && a.sparse.indices == b.sparse.indices &&
         a.sparse.values == b.sparse.values && a.metadata == b.metadata;
}

}  // namespace rampart::knowledge::testing
