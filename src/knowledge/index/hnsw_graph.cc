#include "knowledge/index/hnsw_graph.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <random>
#include <sstream>
#include <unordered_map>

#include <hnswlib/hnswlib.h>

#include "knowledge/index/write_codec.h"

namespace rampart::knowledge {

struct HnswGraph::Impl {
  std::unique_ptr<hnswlib::SpaceInterface<float>> space;
  std::unique_ptr<hnswlib::HierarchicalNSW<float>> graph;
  size_t m = 16;
  // Between Import and AdoptLabels: by node, the digest of the values an unhidden node had.
  std::vector<uint64_t> value_digests;
};

HnswGraph::HnswGraph(Metric metric, size_t dimension, size_t capacity, size_t m,
                     size_t ef_construction)
    : impl_(std::make_unique<Impl>()) {
  if (metric == Metric::kEuclidean) {
    impl_->space = std::make_unique<hnswlib::L2Space>(dimension);
  } else {
    impl_->space = std::make_unique<hnswlib::InnerProductSpace>(dimension);
  }
  impl_->m = m;
  impl_->graph = std::make_unique<hnswlib::HierarchicalNSW<float>>(impl_->space.get(), capacity, m,
                                                                   ef_construction);
  impl_->graph->setEf(1);  // so that searchKnn(q, k) searches with breadth k
}

HnswGraph::~HnswGraph() = default;

bool HnswGraph::AddMovesEntryPoint() const {
  const auto& graph = *impl_->graph;
  if (graph.cur_element_count == 0) return true;
  std::default_random_engine predictor = graph.level_generator_;
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  int level = static_cast<int>(-std::log(uniform(predictor)) * graph.mult_);
  return level > graph.maxlevel_;
}

Status HnswGraph::Add(const float* vector, size_t label) {
  try {
    impl_->graph->addPoint(vector, label);
  } catch (const std::exception& error) {
    return Unavailable("adding a node to the graph failed: {}", error.what());
  }
  return Status::Ok();
}

bool HnswGraph::MarkDeleted(size_t label) {
  try {
    impl_->graph->markDelete(label);
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

void HnswGraph::Resize(size_t capacity) { impl_->graph->resizeIndex(capacity); }

size_t HnswGraph::size() const { return impl_->graph->cur_element_count; }
size_t HnswGraph::capacity() const { return impl_->graph->max_elements_; }
size_t HnswGraph::hidden() const { return impl_->graph->num_deleted_; }

size_t HnswGraph::MemoryBytes() const {
  const auto& graph = *impl_->graph;
  // Upper levels: 1/(M-1) levels per node on average, each a links block and a pointer.
  size_t upper = graph.size_links_per_element_ / (impl_->m - 1) + sizeof(void*);
  size_t label_map = 32;  // an unordered_map node per label
  return graph.max_elements_ * (graph.size_data_per_element_ + sizeof(std::mutex) + sizeof(int)) +
         graph.cur_element_count * (upper + label_map);
}

// ---- export and import --------------------------------------------------------------------
//
// Export's bytes: the layout tag, the layout (the type sizes and hnswlib's derived sizes and
// offsets, which Import compares with a graph it makes itself), the node count, top level and
// entry point, the level generators' states, then per node its level-0 links and label and, for
// a hidden node only, its values (a live node's values are its record's: AdoptLabels puts them
// back, checked against a 64-bit FNV-1a digest of them written in their place), then each node's
// upper-level links (a U32 byte count, then the bytes). Integers little-endian.

namespace {

constexpr std::string_view kGraphLayoutTag = "hnswlib-0.6.2 HierarchicalNSW<float>";
constexpr int kMaxLevel = 64;  // hnswlib's levels are -ln(U)/ln(M): never near this

// FNV-1a over 64-bit words (then the bytes left over): one multiply per 8 bytes, since Export
// digests every live node while writes wait.
uint64_t ValuesDigest(const void* values, size_t bytes) {
  constexpr uint64_t kPrime = 1099511628211ull;
  uint64_t digest = 14695981039346656037ull;
  const auto* data = static_cast<const unsigned char*>(values);
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t word;
    std::memcpy(&word, data + i, 8);
    digest = (digest ^ word) * kPrime;
  }
  for (; i < bytes; ++i) digest = (digest ^ data[i]) * kPrime;
  return digest;
}

template <typename Engine>
std::string GeneratorState(const Engine& engine) {
  std::ostringstream out;
  out << engine;
  return out.str();
}

void WriteLayout(const hnswlib::HierarchicalNSW<float>& graph, ByteWriter& writer) {
  writer.String(kGraphLayoutTag);
  writer.U32(sizeof(hnswlib::tableint));
  writer.U32(sizeof(hnswlib::labeltype));
  writer.U32(sizeof(hnswlib::linklistsizeint));
  for (size_t value : {graph.M_, graph.maxM_, graph.maxM0_, graph.size_data_per_element_,
                       graph.size_links_per_element_, graph.size_links_level0_, graph.offsetData_,
                       graph.label_offset_, graph.data_size_}) {
    writer.U64(value);
  }
}

}  // namespace

std::string HnswGraph::Export() const {
  const auto& graph = *impl_->graph;
  const size_t count = graph.cur_element_count;
  size_t upper_bytes = 0;
  for (size_t i = 0; i < count; ++i) {
    upper_bytes +=
        4 + static_cast<size_t>(graph.element_levels_[i]) * graph.size_links_per_element_;
  }
  const size_t hidden_bytes = graph.num_deleted_ * graph.data_size_ + count * sizeof(uint64_t);
  std::string bytes;
  bytes.reserve(256 + count * (graph.size_links_level0_ + sizeof(hnswlib::labeltype)) +
                hidden_bytes + upper_bytes);
  ByteWriter writer(bytes);
  WriteLayout(graph, writer);
  writer.U64(count);
  writer.U32(static_cast<uint32_t>(graph.maxlevel_));
  writer.U32(graph.enterpoint_node_);
  writer.String(GeneratorState(graph.level_generator_));
  writer.String(GeneratorState(graph.update_probability_generator_));
  for (size_t i = 0; i < count; ++i) {
    const auto node = static_cast<hnswlib::tableint>(i);
    const char* element = graph.data_level0_memory_ + i * graph.size_data_per_element_;
    writer.Bytes(std::string_view(element, graph.size_links_level0_));
    writer.Bytes(std::string_view(element + graph.label_offset_, sizeof(hnswlib::labeltype)));
    if (graph.isMarkedDeleted(node)) {
      writer.Bytes(std::string_view(element + graph.offsetData_, graph.data_size_));
    } else {
      writer.U64(ValuesDigest(element + graph.offsetData_, graph.data_size_));
    }
  }
  for (size_t i = 0; i < count; ++i) {
    const uint32_t size =
        static_cast<uint32_t>(graph.element_levels_[i] * graph.size_links_per_element_);
    writer.U32(size);
    if (size > 0) writer.Bytes(std::string_view(graph.linkLists_[i], size));
  }
  return bytes;
}

Result<std::unique_ptr<HnswGraph>> HnswGraph::Import(Metric metric, size_t dimension, size_t m,
                                                     size_t ef_construction,
                                                     std::string_view bytes) {
  ByteReader reader(bytes);
  // The layout: what a graph made here with these parameters has.
  std::string expected_layout;
  {
    HnswGraph probe(metric, dimension, 1, m, ef_construction);
    ByteWriter writer(expected_layout);
    WriteLayout(*probe.impl_->graph, writer);
  }
  ASSIGN_OR_RETURN(std::string_view layout, reader.Bytes(expected_layout.size(), "graph layout"));
  if (layout != expected_layout) {
    return FailedPrecondition("the graph is of another layout than {} with M {}, dimension {}",
                              kGraphLayoutTag, m, dimension);
  }
  ASSIGN_OR_RETURN(uint64_t count, reader.U64("graph node count"));
  ASSIGN_OR_RETURN(uint32_t top_level, reader.U32("graph top level"));
  ASSIGN_OR_RETURN(uint32_t entry_point, reader.U32("graph entry point"));
  ASSIGN_OR_RETURN(std::string_view level_state, reader.String("graph generator"));
  ASSIGN_OR_RETURN(std::string_view update_state, reader.String("graph generator"));
  if (count > std::numeric_limits<uint32_t>::max() / 2) {
    return InvalidArgument("graph of {} nodes", count);
  }
  // Every node takes at least its level-0 links, label and digest or values: a count the bytes
  // cannot hold is damage, refused before anything is allocated for it.
  const size_t node_bytes = (2 * m) * sizeof(hnswlib::tableint) + sizeof(hnswlib::linklistsizeint) +
                            sizeof(hnswlib::labeltype) +
                            std::min<size_t>(8, dimension * sizeof(float));
  if (count > reader.remaining() / node_bytes) {
    return InvalidArgument("graph of {} nodes cut short", count);
  }
  std::unique_ptr<HnswGraph> made;
  try {
    made = std::make_unique<HnswGraph>(metric, dimension, std::max<size_t>(count, 1), m,
                                       ef_construction);
  } catch (const std::exception& error) {
    return Unavailable("loading a graph of {} nodes: {}", count, error.what());
  }
  auto& graph = *made->impl_->graph;
  std::memset(graph.data_level0_memory_, 0, count * graph.size_data_per_element_);
  made->impl_->value_digests.assign(count, 0);
  for (size_t i = 0; i < count; ++i) {
    char* element = graph.data_level0_memory_ + i * graph.size_data_per_element_;
    ASSIGN_OR_RETURN(std::string_view links, reader.Bytes(graph.size_links_level0_, "graph links"));
    std::memcpy(element, links.data(), links.size());
    ASSIGN_OR_RETURN(std::string_view label,
                     reader.Bytes(sizeof(hnswlib::labeltype), "graph label"));
    std::memcpy(element + graph.label_offset_, label.data(), label.size());
    if (graph.isMarkedDeleted(static_cast<hnswlib::tableint>(i))) {
      ASSIGN_OR_RETURN(std::string_view values, reader.Bytes(graph.data_size_, "graph values"));
      std::memcpy(element + graph.offsetData_, values.data(), values.size());
    } else {
      ASSIGN_OR_RETURN(made->impl_->value_digests[i], reader.U64("graph values digest"));
    }
  }
  // From here the destructor frees the link lists of the nodes whose level is set.
  graph.cur_element_count = count;
  for (size_t i = 0; i < count; ++i) {
    ASSIGN_OR_RETURN(uint32_t size, reader.U32("graph links size"));
    if (size % graph.size_links_per_element_ != 0 ||
        size / graph.size_links_per_element_ > kMaxLevel) {
      return InvalidArgument("graph node {}: {} bytes of upper-level links", i, size);
    }
    graph.linkLists_[i] = nullptr;
    if (size == 0) continue;
    ASSIGN_OR_RETURN(std::string_view links, reader.Bytes(size, "graph links"));
    graph.linkLists_[i] = static_cast<char*>(std::malloc(size));
    if (graph.linkLists_[i] == nullptr) return Unavailable("loading a graph: out of memory");
    std::memcpy(graph.linkLists_[i], links.data(), size);
    graph.element_levels_[i] = static_cast<int>(size / graph.size_links_per_element_);
  }
  if (reader.remaining() != 0)
    return InvalidArgument("{} bytes after the graph", reader.remaining());

  // Every level, link and label, so that no search can read outside the graph.
  const int max_level = static_cast<int>(top_level);
  if (count == 0 ? top_level != std::numeric_limits<uint32_t>::max() ||
                       entry_point != std::numeric_limits<uint32_t>::max()
                 : max_level < 0 || max_level > kMaxLevel || entry_point >= count ||
                       graph.element_levels_[entry_point] != max_level) {
    return InvalidArgument("graph entry point {} at level {} of {} nodes", entry_point, max_level,
                           count);
  }
  graph.maxlevel_ = count == 0 ? -1 : max_level;
  graph.enterpoint_node_ = entry_point;
  size_t hidden = 0;
  for (size_t i = 0; i < count; ++i) {
    const auto node = static_cast<hnswlib::tableint>(i);
    if (graph.element_levels_[i] > max_level) {
      return InvalidArgument("graph node {} above the top level", i);
    }
    for (int level = 0; level <= graph.element_levels_[i]; ++level) {
      const auto* header =
          reinterpret_cast<const unsigned char*>(graph.get_linklist_at_level(node, level));
      const size_t limit = level == 0 ? graph.maxM0_ : graph.maxM_;
      const size_t links = graph.getListCount(graph.get_linklist_at_level(node, level));
      if (links > limit || (level == 0 && (header[2] & ~1u) != 0) || header[3] != 0) {
        return InvalidArgument("graph node {}: damaged link list at level {}", i, level);
      }
      const auto* neighbours =
          reinterpret_cast<const hnswlib::tableint*>(graph.get_linklist_at_level(node, level) + 1);
      for (size_t k = 0; k < links; ++k) {
        if (neighbours[k] >= count || graph.element_levels_[neighbours[k]] < level) {
          return InvalidArgument("graph node {}: link to {} at level {}", i, neighbours[k], level);
        }
      }
    }
    hidden += graph.isMarkedDeleted(node) ? 1 : 0;
    auto [it, inserted] = graph.label_lookup_.emplace(graph.getExternalLabel(node), node);
    if (!inserted) return InvalidArgument("graph label {} on two nodes", it->first);
  }
  graph.num_deleted_ = hidden;
  std::istringstream(std::string(level_state)) >> graph.level_generator_;
  std::istringstream(std::string(update_state)) >> graph.update_probability_generator_;
  return made;
}

Status HnswGraph::AdoptLabels(std::span<const uint64_t> record_labels,
                              const std::function<const float*(size_t record)>& vector_of) {
  auto& graph = *impl_->graph;
  const size_t count = graph.cur_element_count;
  std::vector<hnswlib::labeltype> labels(count);
  std::vector<bool> found(record_labels.size(), false);
  size_t next_hidden = record_labels.size();
  for (size_t i = 0; i < count; ++i) {
    const auto node = static_cast<hnswlib::tableint>(i);
    const hnswlib::labeltype old_label = graph.getExternalLabel(node);
    auto lookup = graph.label_lookup_.find(old_label);
    if (lookup == graph.label_lookup_.end() || lookup->second != node) {
      return InvalidArgument("graph node {}: label {} not in the label map", i, old_label);
    }
    labels[i] = old_label;
  }
  std::unordered_map<hnswlib::labeltype, size_t> record_of;
  record_of.reserve(record_labels.size());
  for (size_t r = 0; r < record_labels.size(); ++r) {
    if (!record_of.emplace(record_labels[r], r).second) {
      return InvalidArgument("two records with graph label {}", record_labels[r]);
    }
  }
  for (size_t i = 0; i < count; ++i) {
    const auto node = static_cast<hnswlib::tableint>(i);
    auto it = record_of.find(labels[i]);
    if (it == record_of.end()) {
      if (!graph.isMarkedDeleted(node)) {
        return InvalidArgument("graph node {} (label {}) is of no record", i, labels[i]);
      }
      labels[i] = next_hidden++;
      continue;
    }
    if (graph.isMarkedDeleted(node)) {
      return InvalidArgument("record {}'s graph node is hidden", it->second);
    }
    if (i >= impl_->value_digests.size() ||
        ValuesDigest(vector_of(it->second), graph.data_size_) != impl_->value_digests[i]) {
      return InvalidArgument("record {}'s graph node held other values", it->second);
    }
    found[it->second] = true;
    labels[i] = it->second;
  }
  for (size_t r = 0; r < found.size(); ++r) {
    if (!found[r]) return InvalidArgument("record {} has no graph node", r);
  }
  graph.label_lookup_.clear();
  for (size_t i = 0; i < count; ++i) {
    const auto node = static_cast<hnswlib::tableint>(i);
    graph.setExternalLabel(node, labels[i]);
    graph.label_lookup_.emplace(labels[i], node);
    if (labels[i] < record_labels.size()) {
      std::memcpy(graph.getDataByInternalId(node), vector_of(labels[i]), graph.data_size_);
    }
  }
  impl_->value_digests = {};
  return Status::Ok();
}

std::vector<std::pair<float, size_t>> HnswGraph::Search(const float* query, size_t breadth,
                                                        size_t keep) const {
  const auto& graph = *impl_->graph;
  std::vector<std::pair<float, size_t>> nodes;
  if (graph.cur_element_count == 0) return nodes;
  // hnswlib's searchKnn, with the breadth as a parameter rather than the graph's ef_ (which is
  // shared by every search) and without its statistics counters (atomics every search touches).
  // The greedy descent through the upper levels:
  hnswlib::tableint current = graph.enterpoint_node_;
  float current_distance =
      graph.fstdistfunc_(query, graph.getDataByInternalId(current), graph.dist_func_param_);
  for (int level = graph.maxlevel_; level > 0; --level) {
    bool changed = true;
    while (changed) {
      changed = false;
      unsigned int* links = graph.get_linklist(current, level);
      int count = graph.getListCount(links);
      const auto* neighbours = reinterpret_cast<const hnswlib::tableint*>(links + 1);
      for (int i = 0; i < count; ++i) {
        hnswlib::tableint candidate = neighbours[i];
        if (candidate >= graph.cur_element_count) continue;
        float distance =
            graph.fstdistfunc_(query, graph.getDataByInternalId(candidate), graph.dist_func_param_);
        if (distance < current_distance) {
          current_distance = distance;
          current = candidate;
          changed = true;
        }
      }
    }
  }
  // Then the bottom level with `breadth` candidates, keeping the `keep` closest.
  auto found = graph.num_deleted_ ? graph.searchBaseLayerST<true, false>(current, query, breadth)
                                  : graph.searchBaseLayerST<false, false>(current, query, breadth);
  while (found.size() > keep) found.pop();
  nodes.reserve(found.size());
  while (!found.empty()) {
    nodes.emplace_back(found.top().first, graph.getExternalLabel(found.top().second));
    found.pop();
  }
  return nodes;
}

}  // namespace rampart::knowledge
