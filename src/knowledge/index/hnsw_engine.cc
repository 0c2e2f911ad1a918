#include "knowledge/index/hnsw_engine.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/logging.h"
#include "knowledge/index/distance.h"
#include "knowledge/index/filter.h"
#include "knowledge/index/hnsw_namespace.h"
#include "knowledge/index/metadata.h"

namespace rampart::knowledge {
namespace {

constexpr size_t kInitialCapacity = 1024;
// Fewer tombstones than this never trigger a compaction (a small namespace would otherwise be
// rebuilt after every few deletes).
constexpr size_t kMinTombstonesToCompact = 64;

template <typename... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <typename... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

}  // namespace

WriterPreferringMutex::WriterPreferringMutex() {
  pthread_rwlockattr_t attributes;
  pthread_rwlockattr_init(&attributes);
  pthread_rwlockattr_setkind_np(&attributes, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  pthread_rwlock_init(&lock_, &attributes);
  pthread_rwlockattr_destroy(&attributes);
}
WriterPreferringMutex::~WriterPreferringMutex() { pthread_rwlock_destroy(&lock_); }
void WriterPreferringMutex::lock() { pthread_rwlock_wrlock(&lock_); }
void WriterPreferringMutex::unlock() { pthread_rwlock_unlock(&lock_); }
void WriterPreferringMutex::lock_shared() { pthread_rwlock_rdlock(&lock_); }
void WriterPreferringMutex::unlock_shared() { pthread_rwlock_unlock(&lock_); }

Result<std::unique_ptr<IndexEngine>> NewHnswEngine(const EngineOptions& options) {
  if (options.dimension == 0 || options.dimension > kMaxDimension) {
    return InvalidArgument("dimension must be 1..{} (got {})", kMaxDimension, options.dimension);
  }
  if (options.hnsw_m < 2 || options.hnsw_m > 128) {
    return InvalidArgument("hnsw_m must be 2..128 (got {})", options.hnsw_m);
  }
  if (options.ef_construction == 0 || options.ef_construction > 4096) {
    return InvalidArgument("ef_construction must be 1..4096 (got {})", options.ef_construction);
  }
  if (options.default_ef == 0 || options.default_ef > kMaxTopK) {
    return InvalidArgument("default_ef must be 1..{} (got {})", kMaxTopK, options.default_ef);
  }
  if (!(options.compaction_ratio > 0 && options.compaction_ratio <= 1)) {
    return InvalidArgument("compaction_ratio must be in (0, 1] (got {})", options.compaction_ratio);
  }
  return std::unique_ptr<IndexEngine>(std::make_unique<HnswEngine>(options));
}

HnswEngine::HnswEngine(const EngineOptions& options) : options_(options) {
  compactor_ = std::thread([this] { CompactionLoop(); });
}

HnswEngine::~HnswEngine() {
  {
    std::lock_guard lock(compaction_mutex_);
    stopping_ = true;
  }
  compaction_changed_.notify_all();
  compactor_.join();
}

std::unique_ptr<HnswGraph> HnswEngine::NewGraph(size_t capacity) const {
  return std::make_unique<HnswGraph>(options_.metric, options_.dimension, capacity, options_.hnsw_m,
                                     options_.ef_construction);
}

std::shared_ptr<Namespace> HnswEngine::FindNamespace(std::string_view name) const {
  auto it = namespaces_.find(name);
  return it == namespaces_.end() ? nullptr : it->second;
}

size_t HnswEngine::RecordBytes(const VectorRecord& record) const {
  size_t bytes = sizeof(Slot) + 32;  // the slot, its control block and pointer
  bytes += record.values.size() * sizeof(float);
  if (options_.metric == Metric::kCosine) bytes += record.values.size() * sizeof(float);
  bytes += record.sparse.indices.size() * (sizeof(uint32_t) + sizeof(float));
  bytes += 2 * record.id.size() + 64;  // the record's id and the id map's node
  for (const auto& [key, value] : record.metadata) {
    bytes += key.size() + sizeof(std::pair<std::string, MetadataValue>);
    if (const auto* text = std::get_if<std::string>(&value)) bytes += text->size();
    if (const auto* list = std::get_if<std::vector<std::string>>(&value)) {
      for (const std::string& item : *list) bytes += item.size() + sizeof(std::string);
    }
  }
  return bytes;
}

size_t HnswEngine::GraphBytesPerNode() const {
  // hnswlib's level-0 block (links, data, label), a lock and level per node, upper levels'
  // links (1/(M-1) levels per node on average) and its label map.
  size_t m = options_.hnsw_m;
  size_t level0 = options_.dimension * sizeof(float) + 2 * m * 4 + 4 + sizeof(size_t);
  size_t upper = (m * 4 + 4) / (m - 1) + sizeof(void*);
  return level0 + upper + sizeof(std::mutex) + sizeof(int) + 32;
}

Status HnswEngine::CheckMemory(size_t added_bytes) const {
  if (options_.max_memory_bytes == 0) return Status::Ok();
  size_t now = MemoryBytes();
  if (now + added_bytes > options_.max_memory_bytes) {
    return Status(StatusCode::kResourceExhausted,
                  fmt::format("the index would use {} bytes, over its memory limit of {} bytes",
                              now + added_bytes, options_.max_memory_bytes));
  }
  return Status::Ok();
}

size_t HnswEngine::MemoryBytes() const {
  std::shared_lock lock(state_lock_);
  return memory_bytes_;
}

// ---- resolving writes ---------------------------------------------------------------------

Result<WriteOp> HnswEngine::ResolveUpsert(std::string_view name_space,
                                          std::vector<VectorRecord> records) const {
  name_space = CanonicalNamespace(name_space);
  if (name_space.size() > kMaxNamespaceBytes) {
    return InvalidArgument("namespace: {} bytes, over the limit of {}", name_space.size(),
                           kMaxNamespaceBytes);
  }
  if (records.empty()) return InvalidArgument("vectors: at least one vector is needed");
  if (records.size() > kMaxUpsertRecords) {
    return InvalidArgument("vectors: {} vectors, over the limit of {} per upsert", records.size(),
                           kMaxUpsertRecords);
  }
  size_t added = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    Status valid = ValidateRecord(records[i], options_.dimension, options_.metric);
    if (!valid.ok()) return valid.WithContext(fmt::format("vectors[{}]", i));
    added += RecordBytes(records[i]) + GraphBytesPerNode();
  }
  RETURN_IF_ERROR(CheckMemory(added));
  return WriteOp{std::string(name_space), UpsertOp{std::move(records)}};
}

Result<std::optional<WriteOp>> HnswEngine::ResolveUpdate(const UpdateRequest& request) const {
  std::string_view name_space = CanonicalNamespace(request.name_space);
  if (request.id.empty()) return InvalidArgument("id: must not be empty");
  VectorRecord record;
  {
    std::shared_lock lock(state_lock_);
    std::shared_ptr<Namespace> ns = FindNamespace(name_space);
    if (ns == nullptr) return std::optional<WriteOp>();
    auto it = ns->ids.find(request.id);
    if (it == ns->ids.end()) return std::optional<WriteOp>();
    record = ns->slots[it->second]->record;
  }
  if (request.values) record.values = *request.values;
  if (request.sparse) record.sparse = *request.sparse;
  if (request.set_metadata) {
    for (const auto& [key, value] : *request.set_metadata) {
      auto it = std::lower_bound(
          record.metadata.begin(), record.metadata.end(), key,
          [](const auto& entry, const std::string& wanted) { return entry.first < wanted; });
      if (it != record.metadata.end() && it->first == key) {
        it->second = value;
      } else {
        record.metadata.insert(it, {key, value});
      }
    }
  }
  RETURN_IF_ERROR(ValidateRecord(record, options_.dimension, options_.metric));
  RETURN_IF_ERROR(CheckMemory(RecordBytes(record) + GraphBytesPerNode()));
  std::vector<VectorRecord> records;
  records.push_back(std::move(record));
  return std::optional<WriteOp>(WriteOp{std::string(name_space), UpsertOp{std::move(records)}});
}

Result<WriteOp> HnswEngine::ResolveDelete(const DeleteRequest& request) const {
  std::string name_space(CanonicalNamespace(request.name_space));
  int ways =
      (request.ids.empty() ? 0 : 1) + (request.delete_all ? 1 : 0) + (request.filter ? 1 : 0);
  if (ways != 1) {
    return InvalidArgument("delete needs exactly one of ids, deleteAll and filter");
  }
  if (request.delete_all) return WriteOp{name_space, DeleteAllOp{}};
  if (!request.ids.empty()) {
    if (request.ids.size() > kMaxIdsPerCall) {
      return InvalidArgument("ids: {} ids, over the limit of {} per call", request.ids.size(),
                             kMaxIdsPerCall);
    }
    return WriteOp{name_space, DeleteIdsOp{request.ids}};
  }
  DeleteIdsOp matched;
  std::shared_lock lock(state_lock_);
  if (std::shared_ptr<Namespace> ns = FindNamespace(name_space)) {
    for (const auto& [id, slot] : ns->ids) {
      if (FilterMatches(*request.filter, ns->slots[slot]->record.metadata)) {
        matched.ids.push_back(id);
      }
    }
  }
  return WriteOp{name_space, std::move(matched)};
}

// ---- applying writes ----------------------------------------------------------------------

void HnswEngine::Apply(const WriteOp& op) {
  std::lock_guard writer(writer_mutex_);
  std::string name(CanonicalNamespace(op.name_space));
  std::visit(Overloaded{
                 [&](const UpsertOp& upsert) { ApplyUpsert(name, upsert.records); },
                 [&](const DeleteIdsOp& remove) { ApplyDeleteIds(name, remove.ids); },
                 [&](const DeleteAllOp&) { ApplyDeleteAll(name); },
             },
             op.change);
}

void HnswEngine::AddNode(Namespace& ns, const Slot& slot, uint32_t label) {
  HnswGraph& graph = *ns.graph;
  Status added;
  if (graph.AddMovesEntryPoint()) {
    std::unique_lock lock(state_lock_);
    added = graph.Add(slot.vector(), label);
  } else {
    added = graph.Add(slot.vector(), label);
  }
  // Only an allocation failure gets here (capacity is ensured first); the record stays findable
  // by the exact scan, which the planner falls back to when the graph gives too few results.
  if (!added.ok()) LOG_ERROR("knowledge index: namespace '{}': {}", ns.name, added.ToString());
}

void HnswEngine::ApplyUpsert(const std::string& name, const std::vector<VectorRecord>& records) {
  if (records.empty()) return;
  std::shared_ptr<Namespace> ns = FindNamespace(name);  // only this thread changes the map
  if (ns == nullptr) {
    ns = std::make_shared<Namespace>();
    ns->name = name;
    ns->graph = NewGraph(std::max(kInitialCapacity, records.size()));
    std::unique_lock lock(state_lock_);
    namespaces_.emplace(name, ns);
  }
  size_t needed = ns->graph->size() + records.size();
  if (needed > ns->graph->capacity()) {
    std::unique_lock lock(state_lock_);
    ns->graph->Resize(std::max(needed, 2 * ns->graph->capacity()));
  }
  uint32_t first = static_cast<uint32_t>(ns->slots.size());
  std::vector<std::shared_ptr<Slot>> fresh;
  fresh.reserve(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    auto slot = std::make_shared<Slot>();
    slot->record = records[i];
    if (options_.metric == Metric::kCosine) {
      slot->normalized = slot->record.values;
      Normalize(slot->normalized);
    }
    AddNode(*ns, *slot, first + static_cast<uint32_t>(i));
    fresh.push_back(std::move(slot));
  }
  {
    std::unique_lock lock(state_lock_);
    for (size_t i = 0; i < fresh.size(); ++i) {
      uint32_t slot = first + static_cast<uint32_t>(i);
      ns->slots.push_back(fresh[i]);
      auto [it, inserted] = ns->ids.try_emplace(fresh[i]->record.id, slot);
      if (!inserted) {
        Tombstone(*ns, it->second);
        it->second = slot;
      }
      ns->metadata.Add(slot, fresh[i]->record.metadata);
      ns->record_bytes += RecordBytes(fresh[i]->record);
    }
    Account(*ns);
  }
  MaybeQueueCompaction(ns);
}

void HnswEngine::ApplyDeleteIds(const std::string& name, const std::vector<std::string>& ids) {
  std::shared_ptr<Namespace> ns = FindNamespace(name);
  if (ns == nullptr) return;
  {
    std::unique_lock lock(state_lock_);
    for (const std::string& id : ids) {
      auto it = ns->ids.find(id);
      if (it == ns->ids.end()) continue;
      Tombstone(*ns, it->second);
      ns->ids.erase(it);
    }
    Account(*ns);
  }
  MaybeQueueCompaction(ns);
}

void HnswEngine::ApplyDeleteAll(const std::string& name) {
  std::unique_lock lock(state_lock_);
  auto it = namespaces_.find(name);
  if (it == namespaces_.end()) return;
  memory_bytes_ -= std::min(memory_bytes_, it->second->accounted_bytes);
  it->second->accounted_bytes = 0;
  // Views and a running compaction may still hold the namespace; it is freed after them.
  namespaces_.erase(it);
}

void HnswEngine::Tombstone(Namespace& ns, uint32_t slot) {
  const std::shared_ptr<const Slot>& held = ns.slots[slot];
  if (held == nullptr) return;
  ns.metadata.Remove(slot, held->record.metadata);
  ns.record_bytes -= std::min(ns.record_bytes, RecordBytes(held->record));
  ns.slots[slot].reset();
  ns.graph->MarkDeleted(slot);  // false only when its addition failed: nothing to hide
}

void HnswEngine::Account(Namespace& ns) {
  size_t bytes = ns.record_bytes + ns.graph->MemoryBytes() + ns.metadata.MemoryBytes() +
                 ns.slots.size() * sizeof(std::shared_ptr<const Slot>);
  memory_bytes_ = memory_bytes_ - std::min(memory_bytes_, ns.accounted_bytes) + bytes;
  ns.accounted_bytes = bytes;
}

// ---- loading a snapshot -------------------------------------------------------------------

Status HnswEngine::ImportNamespace(std::vector<VectorRecord>& records,
                                   const NamespaceGraph& exported) {
  std::lock_guard writer(writer_mutex_);
  const std::string name(CanonicalNamespace(exported.name_space));
  if (FindNamespace(name) != nullptr) {
    return FailedPrecondition("namespace '{}' exists already", name);
  }
  if (records.empty() || exported.labels.size() != records.size()) {
    return InvalidArgument("namespace '{}': {} graph labels for {} records", name,
                           exported.labels.size(), records.size());
  }
  ASSIGN_OR_RETURN(std::unique_ptr<HnswGraph> graph,
                   HnswGraph::Import(options_.metric, options_.dimension, options_.hnsw_m,
                                     options_.ef_construction, exported.graph));
  for (const VectorRecord& record : records) {
    if (record.values.size() != options_.dimension) {
      return InvalidArgument("record '{}' has {} values", record.id, record.values.size());
    }
  }
  auto ns = std::make_shared<Namespace>();
  ns->name = name;
  std::vector<std::shared_ptr<Slot>> fresh;
  fresh.reserve(records.size());
  for (VectorRecord& record : records) {
    auto slot = std::make_shared<Slot>();
    slot->record = std::move(record);
    if (options_.metric == Metric::kCosine) {
      slot->normalized = slot->record.values;
      Normalize(slot->normalized);
    }
    fresh.push_back(std::move(slot));
  }
  const auto give_back = [&] {
    for (size_t i = 0; i < fresh.size(); ++i) records[i] = std::move(fresh[i]->record);
  };
  // Record i gets slot i; the graph's hidden nodes get the slots after them, left empty.
  Status adopted =
      graph->AdoptLabels(exported.labels, [&](size_t record) { return fresh[record]->vector(); });
  for (size_t i = 0; adopted.ok() && i < fresh.size(); ++i) {
    if (!ns->ids.try_emplace(fresh[i]->record.id, static_cast<uint32_t>(i)).second) {
      adopted = InvalidArgument("record id '{}' twice", fresh[i]->record.id);
    }
  }
  if (!adopted.ok()) {
    give_back();
    return adopted.WithContext(fmt::format("namespace '{}'", name));
  }
  ns->slots.assign(fresh.begin(), fresh.end());
  ns->slots.resize(fresh.size() + graph->hidden());
  for (size_t i = 0; i < fresh.size(); ++i) {
    ns->metadata.Add(static_cast<uint32_t>(i), fresh[i]->record.metadata);
    ns->record_bytes += RecordBytes(fresh[i]->record);
  }
  const size_t wanted = std::max(kInitialCapacity, graph->size() + graph->size() / 4);
  if (graph->capacity() < wanted) graph->Resize(wanted);
  ns->graph = std::move(graph);
  records.clear();
  {
    std::unique_lock lock(state_lock_);
    namespaces_.emplace(name, ns);
    Account(*ns);
  }
  MaybeQueueCompaction(ns);
  return Status::Ok();
}

// ---- compaction ---------------------------------------------------------------------------

void HnswEngine::MaybeQueueCompaction(const std::shared_ptr<Namespace>& ns) {
  size_t hidden = ns->graph->hidden();
  if (ns->compaction_pending || hidden < kMinTombstonesToCompact) return;
  if (static_cast<double>(hidden) <
      options_.compaction_ratio * static_cast<double>(ns->graph->size())) {
    return;
  }
  ns->compaction_pending = true;
  {
    std::lock_guard lock(compaction_mutex_);
    compaction_queue_.push_back(ns);
  }
  compaction_changed_.notify_all();
}

void HnswEngine::CompactAll() {
  std::lock_guard writer(writer_mutex_);
  std::lock_guard lock(compaction_mutex_);
  for (const auto& [name, ns] : namespaces_) {
    if (ns->compaction_pending || ns->graph->hidden() == 0) continue;
    ns->compaction_pending = true;
    compaction_queue_.push_back(ns);
  }
  compaction_changed_.notify_all();
}

void HnswEngine::WaitForCompactions() const {
  std::unique_lock lock(compaction_mutex_);
  compaction_changed_.wait(lock, [&] { return compaction_queue_.empty() && !compacting_; });
}

uint64_t HnswEngine::compactions_done() const {
  std::lock_guard lock(compaction_mutex_);
  return compactions_;
}

void HnswEngine::CompactionLoop() {
  std::unique_lock lock(compaction_mutex_);
  while (true) {
    compaction_changed_.wait(lock, [&] { return stopping_ || !compaction_queue_.empty(); });
    if (stopping_) return;
    std::shared_ptr<Namespace> ns = compaction_queue_.front().lock();
    compaction_queue_.pop_front();
    compacting_ = true;
    lock.unlock();
    if (ns != nullptr) Compact(ns);
    lock.lock();
    compacting_ = false;
    if (ns != nullptr) ++compactions_;
    compaction_changed_.notify_all();
  }
}

void HnswEngine::Compact(const std::shared_ptr<Namespace>& ns) {
  // 1. A cut of the live slots, under the shared lock.
  std::vector<std::pair<uint32_t, std::shared_ptr<const Slot>>> live;
  size_t watermark = 0;
  {
    std::shared_lock lock(state_lock_);
    watermark = ns->slots.size();
    live.reserve(ns->ids.size());
    for (const auto& [id, slot] : ns->ids) live.emplace_back(slot, ns->slots[slot]);
  }
  std::sort(live.begin(), live.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  // 2. A new graph from them, private to this thread: queries and writes go on meanwhile.
  std::unique_ptr<HnswGraph> graph =
      NewGraph(std::max(kInitialCapacity, live.size() + live.size() / 4));
  for (const auto& [label, slot] : live) {
    Status added = graph->Add(slot->vector(), label);
    if (!added.ok()) {
      LOG_ERROR("knowledge index: compacting namespace '{}': {}", ns->name, added.ToString());
      std::lock_guard writer(writer_mutex_);
      ns->compaction_pending = false;
      return;
    }
  }
  // 3. Catch up with the writes made since the cut (writes wait meanwhile), then swap.
  std::lock_guard writer(writer_mutex_);
  ns->compaction_pending = false;
  if (FindNamespace(ns->name) != ns) return;  // deleted whole meanwhile
  size_t added_since = 0;
  for (size_t slot = watermark; slot < ns->slots.size(); ++slot) {
    added_since += ns->slots[slot] != nullptr;
  }
  if (graph->size() + added_since > graph->capacity()) {
    graph->Resize(graph->size() + added_since + kInitialCapacity);
  }
  for (size_t slot = watermark; slot < ns->slots.size(); ++slot) {
    if (ns->slots[slot] == nullptr) continue;
    Status added = graph->Add(ns->slots[slot]->vector(), slot);
    if (!added.ok()) {
      LOG_ERROR("knowledge index: compacting namespace '{}': {}", ns->name, added.ToString());
      return;
    }
  }
  for (const auto& [label, slot] : live) {
    if (ns->slots[label] == nullptr) graph->MarkDeleted(label);
  }
  std::unique_lock lock(state_lock_);
  ns->graph.swap(graph);
  Account(*ns);
  lock.unlock();
  graph.reset();  // the old graph, which no reader can hold any more
}

}  // namespace rampart::knowledge
