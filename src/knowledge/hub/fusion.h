#pragma once

// Rank fusion: several ranked lists of the same items (BM25 hits, vector hits) -> one list.
//
//   - Reciprocal rank fusion (Cormack et al., 2009): fused(d) = sum_i w_i / (k + rank_i(d)), with
//     rank 1 for the best item of list i and k = 60; an item missing from a list gets nothing from
//     it. Only ranks matter, so lists whose scores are not comparable fuse well. The score
//     returned is fused(d) / sum_i w_i / (k + 1): 1 for an item first in every list, in (0, 1].
//   - Linear blend: fused(d) = sum_i w_i * score_i(d) / sum_i w_i over scores normalised to 0..1
//     (bm25.h's and a cosine similarity's), a missing item counting 0; in [0, 1].
// Weights default to 1 each. An id that appears twice in one list counts at its first (best)
// place. Results are best first, ties broken by the smaller id.
//
// Thread safety: pure functions.

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"

namespace rampart::knowledge::hub {

struct ScoredId {
  uint64_t id = 0;
  double score = 0;
  bool operator==(const ScoredId&) const = default;
};

// One ranked list, best first.
using RankedList = std::vector<ScoredId>;

constexpr double kReciprocalRankConstant = 60;

// InvalidArgument when `weights` is not empty and not one per list, when a weight is negative,
// when all weights are 0, or when k <= 0.
Result<RankedList> ReciprocalRankFusion(std::span<const RankedList> lists,
                                        std::span<const double> weights = {},
                                        double k = kReciprocalRankConstant);
Result<RankedList> LinearBlend(std::span<const RankedList> lists,
                               std::span<const double> weights = {});

}  // namespace rampart::knowledge::hub
