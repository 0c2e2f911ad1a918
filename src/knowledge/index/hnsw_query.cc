// The engine's Query and its planner (docs/vector-indexes.md, "Search and the planner").
//
// Without a filter: hnswlib's searchKnn with breadth max(ef, topK), skipping nodes not yet
// published. With a filter: the metadata indexes give a bounded superset of the matching slots
// when they can; if it is small (ExactScanLimit) those slots are scored exactly. Otherwise the
// filter's selectivity is estimated from a sample, the graph is searched with a breadth raised
// by 1/selectivity and the results post-filtered; when that yields fewer than topK the breadth
// grows, and past half the namespace the whole namespace is scanned exactly. So a query
// returns topK matches whenever topK matching records exist.

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>

#include "knowledge/index/distance.h"
#include "knowledge/index/filter.h"
#include "knowledge/index/hnsw_engine.h"
#include "knowledge/index/hnsw_namespace.h"
#include "knowledge/index/metadata.h"

namespace rampart::knowledge {
namespace {

// The most candidates a filter may have for the planner to score them all rather than search
// the graph. A filtered graph search of breadth b at selectivity p = c/n visits about b/p nodes
// and computes about 2M distances for each; an exact scan computes c. They cost the same where
// c = 2M·b·n/c, so the limit is sqrt(2M·b·n) (n = 100k, b = 100, M = 16: about 18k), and at
// least a few thousand, which an exact scan handles in well under a millisecond.
size_t ExactScanLimit(size_t live, size_t breadth, size_t m) {
  double balance = std::sqrt(2.0 * static_cast<double>(m) * static_cast<double>(breadth) *
                             static_cast<double>(live));
  return std::max<size_t>(4096, static_cast<size_t>(balance));
}
constexpr size_t kSelectivitySample = 512;
// Graph breadth as a share of the namespace above which an exact scan is cheaper and exact.
constexpr size_t kExactScanShare = 2;  // breadth >= live / 2
constexpr size_t kBreadthGrowth = 4;

float SparseDot(const SparseValues& a, const SparseValues& b) {
  float sum = 0;
  size_t i = 0;
  size_t j = 0;
  while (i < a.indices.size() && j < b.indices.size()) {
    if (a.indices[i] == b.indices[j]) {
      sum += a.values[i++] * b.values[j++];
    } else if (a.indices[i] < b.indices[j]) {
      ++i;
    } else {
      ++j;
    }
  }
  return sum;
}

}  // namespace

class QueryPlanner {
 public:
  QueryPlanner(const HnswEngine& engine, const Namespace& ns, const QueryRequest& request,
               std::vector<float> query)
      : options_(engine.options()), ns_(ns), request_(request), query_(std::move(query)) {
    if (request.filter && !MatchesAll(*request.filter)) filter_ = &*request.filter;
    if (options_.metric == Metric::kDotProduct && request.sparse && !request.sparse->empty()) {
      sparse_ = &*request.sparse;
    }
  }

  QueryResult Run() {
    size_t live = ns_.ids.size();
    size_t top_k = std::min(request_.top_k, live);
    size_t breadth = std::max(request_.ef > 0 ? request_.ef : options_.default_ef, top_k);
    if (filter_ != nullptr) {
      bool exact = false;
      std::optional<MetadataIndex::Postings> candidates =
          ns_.metadata.Candidates(*filter_, ExactScanLimit(live, breadth, options_.hnsw_m), &exact);
      if (candidates) {
        ExactScan(&*candidates, /*all_match=*/exact);
        return Finish("exact");
      }
      double selectivity = EstimateSelectivity();
      breadth = static_cast<size_t>(std::ceil(static_cast<double>(breadth) / selectivity * 1.25));
    }
    while (true) {
      if (breadth * kExactScanShare >= live) {
        ExactScan(nullptr);
        return Finish("exact");
      }
      // Without a filter or sparse values only the topK closest nodes are wanted (more only
      // when some are not yet published, which the next round's larger breadth covers).
      bool rank_all = filter_ != nullptr || sparse_ != nullptr;
      bool exhausted = SearchGraph(breadth, rank_all ? breadth : top_k);
      if (scored_.size() >= top_k) return Finish(filter_ ? "hnsw+filter" : "hnsw");
      if (exhausted) {
        ExactScan(nullptr);
        return Finish("exact");
      }
      breadth *= kBreadthGrowth;
    }
  }

 private:
  float Score(const Slot& slot) const {
    switch (options_.metric) {
      case Metric::kEuclidean: return SquaredL2(query_.data(), slot.vector(), query_.size());
      case Metric::kCosine: return DotProduct(query_.data(), slot.vector(), query_.size());
      case Metric::kDotProduct: {
        float score = DotProduct(query_.data(), slot.vector(), query_.size());
        if (sparse_ != nullptr) score += SparseDot(*sparse_, slot.record.sparse);
        return score;
      }
    }
    return 0;
  }

  bool Eligible(const Slot& slot) const {
    return filter_ == nullptr || FilterMatches(*filter_, slot.record.metadata);
  }

  // Scores `slots` (all live slots when null) that pass the filter (all of them when
  // `all_match`). Records are separate allocations: the loop prefetches the slot a few ahead
  // and the vector of the one after, so that their cache misses overlap.
  void ExactScan(const MetadataIndex::Postings* slots, bool all_match = false) {
    scored_.clear();
    auto visit = [&](uint32_t number) {
      const Slot* slot = ns_.slots[number].get();
      if (slot == nullptr || (!all_match && !Eligible(*slot))) return;
      scored_.emplace_back(Score(*slot), number);
      ++candidates_scored_;
    };
    if (slots != nullptr) {
      constexpr size_t kSlotAhead = 8;
      constexpr size_t kVectorAhead = 4;
      const auto& list = *slots;
      for (size_t i = 0; i < list.size(); ++i) {
        if (i + kSlotAhead < list.size()) {
          __builtin_prefetch(ns_.slots[list[i + kSlotAhead]].get());
        }
        if (i + kVectorAhead < list.size()) {
          if (const Slot* ahead = ns_.slots[list[i + kVectorAhead]].get()) {
            __builtin_prefetch(ahead->vector());
            __builtin_prefetch(ahead->vector() + 16);
          }
        }
        visit(list[i]);
      }
    } else {
      for (const auto& [id, number] : ns_.ids) visit(number);
    }
  }

  // Searches the graph with `breadth`, keeping published, matching nodes; true when the graph
  // gave fewer nodes than asked (so a larger breadth would not find more). Nodes are ranked by
  // hnswlib's distance (Finish scores the ones kept), or scored here when the query has sparse
  // values (the graph knows only the dense part).
  bool SearchGraph(size_t breadth, size_t keep) {
    scored_.clear();
    std::vector<std::pair<float, size_t>> found = ns_.graph->Search(query_.data(), breadth, keep);
    bool exhausted = found.size() < keep;
    bool lower_is_closer = options_.metric == Metric::kEuclidean;
    for (const auto& [distance, label] : found) {
      if (label >= ns_.slots.size()) continue;  // added by the writer, not yet published
      const Slot* slot = ns_.slots[label].get();
      if (slot == nullptr || !Eligible(*slot)) continue;
      // hnswlib's inner product distance is 1 - dot product.
      float rank = sparse_ != nullptr ? Score(*slot) : lower_is_closer ? distance : 1 - distance;
      scored_.emplace_back(rank, static_cast<uint32_t>(label));
    }
    candidates_scored_ += found.size();
    return exhausted;
  }

  double EstimateSelectivity() const {
    thread_local std::minstd_rand random(12345);
    size_t slots = ns_.slots.size();
    size_t sampled = 0;
    size_t matched = 0;
    std::uniform_int_distribution<size_t> pick(0, slots - 1);
    for (size_t attempt = 0; attempt < 4 * kSelectivitySample && sampled < kSelectivitySample;
         ++attempt) {
      const Slot* slot = ns_.slots[pick(random)].get();
      if (slot == nullptr) continue;
      ++sampled;
      matched += FilterMatches(*filter_, slot->record.metadata);
    }
    if (sampled == 0) return 1.0;
    // At least half a match, so that a filter no sample matched still gets a finite breadth.
    return std::max(0.5, static_cast<double>(matched)) / static_cast<double>(sampled);
  }

  QueryResult Finish(std::string_view plan) {
    bool lower_is_closer = options_.metric == Metric::kEuclidean;
    auto closer = [&](const std::pair<float, uint32_t>& a, const std::pair<float, uint32_t>& b) {
      if (a.first != b.first) return lower_is_closer ? a.first < b.first : a.first > b.first;
      return a.second < b.second;
    };
    size_t keep = std::min(request_.top_k, scored_.size());
    std::partial_sort(scored_.begin(), scored_.begin() + static_cast<ptrdiff_t>(keep),
                      scored_.end(), closer);
    QueryResult result;
    result.plan = plan;
    result.candidates_scored = candidates_scored_;
    result.matches.reserve(keep);
    // The kept matches' scores, computed exactly (a graph search ranked them by hnswlib's
    // distance), and ordered by them.
    for (size_t i = 0; i < keep; ++i) scored_[i].first = Score(*ns_.slots[scored_[i].second]);
    std::sort(scored_.begin(), scored_.begin() + static_cast<ptrdiff_t>(keep), closer);
    for (size_t i = 0; i < keep; ++i) {
      const Slot& slot = *ns_.slots[scored_[i].second];
      Match match;
      match.id = slot.record.id;
      match.score = scored_[i].first;
      if (request_.include_values) {
        match.values = slot.record.values;
        if (!slot.record.sparse.empty()) match.sparse = slot.record.sparse;
      }
      if (request_.include_metadata) match.metadata = slot.record.metadata;
      result.matches.push_back(std::move(match));
    }
    return result;
  }

  const EngineOptions& options_;
  const Namespace& ns_;
  const QueryRequest& request_;
  std::vector<float> query_;
  const FilterNode* filter_ = nullptr;
  const SparseValues* sparse_ = nullptr;
  std::vector<std::pair<float, uint32_t>> scored_;
  size_t candidates_scored_ = 0;
};

Result<QueryResult> HnswEngine::Query(const QueryRequest& request) const {
  if (request.top_k == 0 || request.top_k > kMaxTopK) {
    return InvalidArgument("topK must be 1..{} (got {})", kMaxTopK, request.top_k);
  }
  if (request.vector.empty() == !request.id.has_value()) {
    return InvalidArgument("a query needs exactly one of vector and id");
  }
  if (!request.vector.empty()) {
    RETURN_IF_ERROR(ValidateDense(request.vector, options_.dimension, options_.metric, "vector"));
  }
  if (request.sparse && !request.sparse->empty()) {
    if (options_.metric != Metric::kDotProduct) {
      return InvalidArgument(
          "sparseVector: sparse values are supported only by indexes with the dotproduct metric");
    }
    RETURN_IF_ERROR(ValidateSparse(*request.sparse).WithContext("sparseVector"));
  }
  if (request.ef > kMaxTopK) {
    return InvalidArgument("ef must be at most {} (got {})", kMaxTopK, request.ef);
  }
  std::shared_lock lock(state_lock_);
  std::shared_ptr<Namespace> ns = FindNamespace(CanonicalNamespace(request.name_space));
  std::vector<float> query = request.vector;
  if (request.id) {
    const Slot* slot = nullptr;
    if (ns != nullptr) {
      auto it = ns->ids.find(*request.id);
      if (it != ns->ids.end()) slot = ns->slots[it->second].get();
    }
    if (slot == nullptr) {
      return NotFound("no vector with id '{}' in namespace '{}'", *request.id, request.name_space);
    }
    query = slot->record.values;
  }
  if (ns == nullptr || ns->ids.empty()) {
    QueryResult empty;
    empty.plan = "empty";
    return empty;
  }
  if (options_.metric == Metric::kCosine) Normalize(query);
  QueryPlanner planner(*this, *ns, request, std::move(query));
  return planner.Run();
}

}  // namespace rampart::knowledge
