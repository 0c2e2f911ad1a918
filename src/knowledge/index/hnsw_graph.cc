#include "knowledge/index/hnsw_graph.h"

#include <cmath>
#include <mutex>
#include <random>

#include <hnswlib/hnswlib.h>

namespace rampart::knowledge {

struct HnswGraph::Impl {
  std::unique_ptr<hnswlib::SpaceInterface<float>> space;
  std::unique_ptr<hnswlib::HierarchicalNSW<float>> graph;
  size_t m = 16;
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
