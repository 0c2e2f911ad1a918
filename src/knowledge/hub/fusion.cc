#include "knowledge/hub/fusion.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace rampart::knowledge::hub {
namespace {

Result<std::vector<double>> Weights(std::span<const RankedList> lists,
                                    std::span<const double> weights) {
  if (weights.empty()) return std::vector<double>(lists.size(), 1.0);
  if (weights.size() != lists.size()) {
    return InvalidArgument("fusion: {} weights for {} lists", weights.size(), lists.size());
  }
  double sum = 0;
  for (double weight : weights) {
    if (!(weight >= 0)) return InvalidArgument("fusion: weights must not be negative");
    sum += weight;
  }
  if (sum <= 0) return InvalidArgument("fusion: the weights are all 0");
  return std::vector<double>(weights.begin(), weights.end());
}

// Sums `contribution(list, rank, item)` per id over the first occurrence of each id per list.
template <typename Contribution>
RankedList Fuse(std::span<const RankedList> lists, double scale, Contribution contribution) {
  std::unordered_map<uint64_t, double> fused;
  std::vector<uint64_t> order;  // first appearance, for a deterministic walk
  for (size_t list = 0; list < lists.size(); ++list) {
    std::unordered_set<uint64_t> seen;
    for (size_t rank = 0; rank < lists[list].size(); ++rank) {
      const ScoredId& item = lists[list][rank];
      if (!seen.insert(item.id).second) continue;
      auto [it, inserted] = fused.try_emplace(item.id, 0.0);
      if (inserted) order.push_back(item.id);
      it->second += contribution(list, rank + 1, item);
    }
  }
  RankedList result;
  result.reserve(order.size());
  for (uint64_t id : order) result.push_back({id, fused[id] / scale});
  std::sort(result.begin(), result.end(), [](const ScoredId& a, const ScoredId& b) {
    return a.score != b.score ? a.score > b.score : a.id < b.id;
  });
  return result;
}

}  // namespace

Result<RankedList> ReciprocalRankFusion(std::span<const RankedList> lists,
                                        std::span<const double> weights, double k) {
  if (!(k > 0)) return InvalidArgument("reciprocal rank fusion needs k > 0, got {}", k);
  ASSIGN_OR_RETURN(std::vector<double> w, Weights(lists, weights));
  double best = 0;
  for (double weight : w) best += weight / (k + 1);
  if (lists.empty()) return RankedList{};
  return Fuse(lists, best, [&](size_t list, size_t rank, const ScoredId&) {
    return w[list] / (k + static_cast<double>(rank));
  });
}

Result<RankedList> LinearBlend(std::span<const RankedList> lists, std::span<const double> weights) {
  ASSIGN_OR_RETURN(std::vector<double> w, Weights(lists, weights));
  double total = 0;
  for (double weight : w) total += weight;
  if (lists.empty()) return RankedList{};
  return Fuse(lists, total, [&](size_t list, size_t, const ScoredId& item) {
    return w[list] * std::clamp(item.score, 0.0, 1.0);
  });
}

}  // namespace rampart::knowledge::hub
