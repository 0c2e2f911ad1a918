#pragma once

// An in-memory IndexCatalog for the Pinecone front end's tests: records kept in maps, queries
// answered by a brute-force dot product (filters are recorded, not evaluated), and writes either
// applied at once or held until the test releases them (to show that an answer waits for its
// write to be durable).

#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

#include "knowledge/index/backend.h"

namespace rampart::testing {

class FakeIndex : public knowledge::IndexBackend {
 public:
  explicit FakeIndex(knowledge::IndexSpec spec) : spec_(std::move(spec)) {}
  const knowledge::IndexSpec& spec() const override { return spec_; }
  bool read_only() const override { return false; }

  void Upsert(std::string name_space, std::vector<knowledge::VectorRecord> records,
              knowledge::WriteDone done) override {
    Write(
        [this, name_space = std::move(name_space), records = std::move(records)]() mutable {
          for (auto& record : records) records_[name_space][record.id] = std::move(record);
        },
        std::move(done));
  }
  void Update(knowledge::UpdateRequest request, knowledge::WriteDone done) override {
    Write(
        [this, request = std::move(request)] {
          auto found = records_[request.name_space].find(request.id);
          if (found == records_[request.name_space].end()) return;
          if (request.values) found->second.values = *request.values;
          if (request.set_metadata) {
            for (auto& field : *request.set_metadata) found->second.metadata.push_back(field);
          }
        },
        std::move(done));
  }
  void Delete(knowledge::DeleteRequest request, knowledge::WriteDone done) override {
    Write(
        [this, request = std::move(request)] {
          if (request.delete_all || request.filter) records_[request.name_space].clear();
          for (const std::string& id : request.ids) records_[request.name_space].erase(id);
        },
        std::move(done));
  }

  Result<knowledge::QueryResult> Query(const knowledge::QueryRequest& request) const override {
    std::lock_guard lock(mutex_);
    last_query_ = request;
    const auto& space = Space(request.name_space);
    std::vector<float> vector = request.vector;
    if (request.id) {
      auto found = space.find(*request.id);
      if (found == space.end()) return NotFound("no record '{}'", *request.id);
      vector = found->second.values;
    }
    knowledge::QueryResult result;
    for (const auto& [id, record] : space) {
      float score = 0;
      for (size_t i = 0; i < vector.size(); ++i) score += vector[i] * record.values[i];
      knowledge::Match match{.id = id, .score = score};
      if (request.include_values) match.values = record.values;
      if (request.include_metadata) match.metadata = record.metadata;
      result.matches.push_back(std::move(match));
    }
    std::sort(result.matches.begin(), result.matches.end(),
              [](const auto& a, const auto& b) { return a.score > b.score; });
    if (result.matches.size() > request.top_k) result.matches.resize(request.top_k);
    result.plan = "exact";
    return result;
  }
  std::vector<knowledge::VectorRecord> Fetch(std::string_view name_space,
                                             std::span<const std::string> ids) const override {
    std::lock_guard lock(mutex_);
    std::vector<knowledge::VectorRecord> records;
    const auto& space = Space(name_space);
    for (const std::string& id : ids) {
      if (auto found = space.find(id); found != space.end()) records.push_back(found->second);
    }
    return records;
  }
  Result<knowledge::ListPage> List(std::string_view name_space, std::string_view prefix,
                                   size_t limit, std::string_view token) const override {
    std::lock_guard lock(mutex_);
    knowledge::ListPage page;
    for (const auto& [id, record] : Space(name_space)) {
      if (!id.starts_with(prefix) || (!token.empty() && id <= token)) continue;
      if (page.ids.size() == limit) {
        page.next_token = page.ids.back();
        break;
      }
      page.ids.push_back(id);
    }
    return page;
  }
  Result<knowledge::IndexStats> Stats(const knowledge::FilterNode* filter) const override {
    std::lock_guard lock(mutex_);
    stats_filtered_ = filter != nullptr;
    knowledge::IndexStats stats{.dimension = spec_.engine.dimension, .metric = spec_.engine.metric};
    for (const auto& [name, space] : records_) {
      if (space.empty()) continue;
      stats.namespaces.push_back({.name_space = name, .vector_count = space.size()});
      stats.total_vector_count += space.size();
    }
    return stats;
  }

  // Writes wait (unanswered) until ReleaseWrites while held.
  void HoldWrites() {
    std::lock_guard lock(mutex_);
    hold_ = true;
  }
  // Applies the held writes and answers them.
  void ReleaseWrites() {
    std::vector<std::pair<UniqueFunction<void()>, knowledge::WriteDone>> held;
    {
      std::lock_guard lock(mutex_);
      hold_ = false;
      held.swap(held_);
      for (auto& [apply, done] : held) apply();
    }
    for (auto& [apply, done] : held) done(Status::Ok());
  }
  size_t held_writes() const {
    std::lock_guard lock(mutex_);
    return held_.size();
  }
  knowledge::QueryRequest last_query() const {
    std::lock_guard lock(mutex_);
    return last_query_;
  }
  bool stats_filtered() const {
    std::lock_guard lock(mutex_);
    return stats_filtered_;
  }

 private:
  using Records = std::map<std::string, knowledge::VectorRecord, std::less<>>;
  const Records& Space(std::string_view name_space) const {
    static const Records kEmpty;
    auto found = records_.find(name_space);
    return found == records_.end() ? kEmpty : found->second;
  }
  void Write(UniqueFunction<void()> apply, knowledge::WriteDone done) {
    {
      std::lock_guard lock(mutex_);
      if (hold_) {
        held_.emplace_back(std::move(apply), std::move(done));
        return;
      }
      apply();
    }
    done(Status::Ok());
  }

  knowledge::IndexSpec spec_;
  mutable std::mutex mutex_;
  std::map<std::string, Records, std::less<>> records_;
  bool hold_ = false;
  std::vector<std::pair<UniqueFunction<void()>, knowledge::WriteDone>> held_;
  mutable knowledge::QueryRequest last_query_;
  mutable bool stats_filtered_ = false;
};

class FakeCatalog final : public knowledge::IndexCatalog {
 public:
  Result<std::shared_ptr<knowledge::IndexBackend>> Create(
      const knowledge::IndexSpec& spec) override {
    std::lock_guard lock(mutex_);
    if (indexes_.contains(spec.name)) return AlreadyExists("index '{}' exists", spec.name);
    auto index = std::make_shared<FakeIndex>(spec);
    indexes_[spec.name] = index;
    return std::shared_ptr<knowledge::IndexBackend>(index);
  }
  Status Delete(std::string_view name) override {
    std::lock_guard lock(mutex_);
    auto found = indexes_.find(name);
    if (found == indexes_.end()) return NotFound("index '{}' does not exist", name);
    indexes_.erase(found);
    return Status::Ok();
  }
  Result<std::shared_ptr<knowledge::IndexBackend>> Get(std::string_view name) const override {
    std::lock_guard lock(mutex_);
    auto found = indexes_.find(name);
    if (found == indexes_.end()) return NotFound("index '{}' does not exist", name);
    return std::shared_ptr<knowledge::IndexBackend>(found->second);
  }
  std::vector<knowledge::IndexSpec> List() const override {
    std::lock_guard lock(mutex_);
    std::vector<knowledge::IndexSpec> specs;
    for (const auto& [name, index] : indexes_) specs.push_back(index->spec());
    return specs;
  }
  std::shared_ptr<FakeIndex> index(std::string_view name) const {
    std::lock_guard lock(mutex_);
    auto found = indexes_.find(name);
    return found == indexes_.end() ? nullptr : found->second;
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<FakeIndex>, std::less<>> indexes_;
};

}  // namespace rampart::testing
