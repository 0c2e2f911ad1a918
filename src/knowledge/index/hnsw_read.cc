// The engine's reads other than Query: Fetch, List, Stats and View.

#include <algorithm>
#include <utility>

#include "knowledge/index/filter.h"
#include "knowledge/index/hnsw_engine.h"
#include "knowledge/index/hnsw_namespace.h"

namespace rampart::knowledge {
namespace {

constexpr char kHexDigits[] = "0123456789abcdef";

// List's pagination token: the last id of the page, in hex (opaque to clients).
std::string EncodeToken(std::string_view id) {
  std::string token;
  token.reserve(2 * id.size());
  for (unsigned char c : id) {
    token.push_back(kHexDigits[c >> 4]);
    token.push_back(kHexDigits[c & 15]);
  }
  return token;
}

Result<std::string> DecodeToken(std::string_view token) {
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (token.size() % 2 != 0 || token.size() > 2 * kMaxIdBytes) {
    return InvalidArgument("paginationToken: not a token this index gave");
  }
  std::string id;
  for (size_t i = 0; i < token.size(); i += 2) {
    int high = digit(token[i]);
    int low = digit(token[i + 1]);
    if (high < 0 || low < 0) return InvalidArgument("paginationToken: not a token this index gave");
    id.push_back(static_cast<char>(high * 16 + low));
  }
  return id;
}

// The records of each namespace at the moment View was called.
class HnswView final : public EngineView {
 public:
  struct Part {
    std::string name_space;
    std::vector<std::shared_ptr<const Slot>> slots;  // in id order
  };
  HnswView(std::vector<Part> parts, std::vector<NamespaceGraph> graphs)
      : parts_(std::move(parts)), graphs_(std::move(graphs)) {
    for (const Part& part : parts_) count_ += part.slots.size();
  }
  Status ForEach(const std::function<Status(std::string_view name_space,
                                            const VectorRecord& record)>& visit) const override {
    for (const Part& part : parts_) {
      for (const auto& slot : part.slots) RETURN_IF_ERROR(visit(part.name_space, slot->record));
    }
    return Status::Ok();
  }
  uint64_t record_count() const override { return count_; }
  const std::vector<NamespaceGraph>& graphs() const override { return graphs_; }

 private:
  std::vector<Part> parts_;
  std::vector<NamespaceGraph> graphs_;
  uint64_t count_ = 0;
};

}  // namespace

std::vector<VectorRecord> HnswEngine::Fetch(std::string_view name_space,
                                            std::span<const std::string> ids) const {
  std::vector<VectorRecord> records;
  std::shared_lock lock(state_lock_);
  std::shared_ptr<Namespace> ns = FindNamespace(CanonicalNamespace(name_space));
  if (ns == nullptr) return records;
  for (const std::string& id : ids) {
    auto it = ns->ids.find(id);
    if (it != ns->ids.end()) records.push_back(ns->slots[it->second]->record);
  }
  return records;
}

Result<ListPage> HnswEngine::List(std::string_view name_space, std::string_view prefix,
                                  size_t limit, std::string_view token) const {
  if (limit == 0 || limit > kMaxListLimit) {
    return InvalidArgument("limit must be 1..{} (got {})", kMaxListLimit, limit);
  }
  std::string after;
  if (!token.empty()) {
    ASSIGN_OR_RETURN(after, DecodeToken(token));
  }
  ListPage page;
  std::shared_lock lock(state_lock_);
  std::shared_ptr<Namespace> ns = FindNamespace(CanonicalNamespace(name_space));
  if (ns == nullptr) return page;
  auto it = token.empty() ? ns->ids.lower_bound(prefix) : ns->ids.upper_bound(after);
  if (!token.empty() && after < prefix) it = ns->ids.lower_bound(prefix);
  for (; it != ns->ids.end() && it->first.starts_with(prefix); ++it) {
    if (page.ids.size() == limit) {
      page.next_token = EncodeToken(page.ids.back());
      break;
    }
    page.ids.push_back(it->first);
  }
  return page;
}

Result<IndexStats> HnswEngine::Stats(const FilterNode* filter) const {
  IndexStats stats;
  stats.dimension = options_.dimension;
  stats.metric = options_.metric;
  std::shared_lock lock(state_lock_);
  for (const auto& [name, ns] : namespaces_) {
    uint64_t count = 0;
    if (filter == nullptr || MatchesAll(*filter)) {
      count = ns->ids.size();
    } else {
      for (const auto& [id, slot] : ns->ids) {
        count += FilterMatches(*filter, ns->slots[slot]->record.metadata);
      }
    }
    if (count == 0) continue;
    stats.namespaces.push_back({name, count});
    stats.total_vector_count += count;
  }
  if (options_.max_memory_bytes > 0) {
    stats.fullness = std::min(
        1.0, static_cast<double>(memory_bytes_) / static_cast<double>(options_.max_memory_bytes));
  }
  return stats;
}

std::unique_ptr<EngineView> HnswEngine::View() const {
  std::vector<HnswView::Part> parts;
  std::vector<NamespaceGraph> graphs;
  // The writer mutex keeps the graphs still (the writer adds nodes outside the state lock, and
  // compaction swaps graphs under it); the shared lock is then only for form's sake.
  std::lock_guard writer(writer_mutex_);
  std::shared_lock lock(state_lock_);
  for (const auto& [name, ns] : namespaces_) {
    if (ns->ids.empty()) continue;
    HnswView::Part part;
    NamespaceGraph graph;
    part.name_space = name;
    graph.name_space = name;
    part.slots.reserve(ns->ids.size());
    graph.labels.reserve(ns->ids.size());
    for (const auto& [id, slot] : ns->ids) {
      part.slots.push_back(ns->slots[slot]);
      graph.labels.push_back(slot);
    }
    graph.graph = ns->graph->Export();
    parts.push_back(std::move(part));
    graphs.push_back(std::move(graph));
  }
  return std::make_unique<HnswView>(std::move(parts), std::move(graphs));
}

}  // namespace rampart::knowledge
