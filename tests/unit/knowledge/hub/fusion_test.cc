// Reciprocal rank fusion and the linear blend on small hand-checked lists.
#include "knowledge/hub/fusion.h"

#include <gtest/gtest.h>

#include <vector>

namespace rampart::knowledge::hub {
namespace {

TEST(FusionTest, ReciprocalRankFusion) {
  std::vector<RankedList> lists = {
      {{1, 9.0}, {2, 5.0}, {3, 1.0}},  // BM25: 1, 2, 3
      {{3, 0.9}, {1, 0.8}, {4, 0.7}},  // vectors: 3, 1, 4
  };
  Result<RankedList> fused = ReciprocalRankFusion(lists);
  ASSERT_TRUE(fused.ok());
  // 1: 1/61 + 1/62; 3: 1/63 + 1/61; 2: 1/62; 4: 1/63; divided by 2/61.
  double best = 2.0 / 61;
  ASSERT_EQ(fused->size(), 4u);
  EXPECT_EQ((*fused)[0].id, 1u);
  EXPECT_NEAR((*fused)[0].score, (1.0 / 61 + 1.0 / 62) / best, 1e-12);
  EXPECT_EQ((*fused)[1].id, 3u);
  EXPECT_NEAR((*fused)[1].score, (1.0 / 63 + 1.0 / 61) / best, 1e-12);
  EXPECT_EQ((*fused)[2].id, 2u);
  EXPECT_EQ((*fused)[3].id, 4u);
  EXPECT_NEAR((*fused)[3].score, (1.0 / 63) / best, 1e-12);

  // First in every list -> exactly 1.
  std::vector<RankedList> same = {{{7, 1}}, {{7, 0.1}}};
  EXPECT_DOUBLE_EQ(ReciprocalRankFusion(same)->front().score, 1.0);

  // Weights: the second list counts three times as much; k changes the curve.
  std::vector<double> weights = {1, 3};
  Result<RankedList> weighted = ReciprocalRankFusion(lists, weights, 1);
  ASSERT_TRUE(weighted.ok());
  EXPECT_EQ((*weighted)[0].id, 3u);  // 1/4 + 3/2 against 1/2 + 3/3
  EXPECT_NEAR((*weighted)[0].score, (1.0 / 4 + 3.0 / 2) / (4.0 / 2), 1e-12);
}

TEST(FusionTest, DuplicatesCountOnceAndTiesBreakById) {
  std::vector<RankedList> lists = {{{5, 1}, {5, 1}, {6, 1}}, {{6, 1}, {5, 1}}};
  Result<RankedList> fused = ReciprocalRankFusion(lists);
  ASSERT_TRUE(fused.ok());
  ASSERT_EQ(fused->size(), 2u);
  // 5: ranks 1 and 2; 6: ranks 3 (its first place in list 1 is 3rd) and 1.
  EXPECT_EQ((*fused)[0].id, 5u);
  std::vector<RankedList> tie = {{{9, 1}}, {{8, 1}}};
  Result<RankedList> tied = ReciprocalRankFusion(tie);
  EXPECT_EQ((*tied)[0].id, 8u);
  EXPECT_EQ((*tied)[1].id, 9u);
}

TEST(FusionTest, LinearBlend) {
  std::vector<RankedList> lists = {
      {{1, 0.9}, {2, 0.4}},
      {{2, 0.8}, {3, 0.6}},
  };
  std::vector<double> weights = {0.3, 0.7};
  Result<RankedList> blended = LinearBlend(lists, weights);
  ASSERT_TRUE(blended.ok());
  ASSERT_EQ(blended->size(), 3u);
  // 2: 0.3*0.4 + 0.7*0.8 = 0.68; 3: 0.42; 1: 0.27.
  EXPECT_EQ((*blended)[0], (ScoredId{2, 0.3 * 0.4 + 0.7 * 0.8}));
  EXPECT_EQ((*blended)[1].id, 3u);
  EXPECT_NEAR((*blended)[1].score, 0.42, 1e-12);
  EXPECT_EQ((*blended)[2].id, 1u);
  EXPECT_NEAR((*blended)[2].score, 0.27, 1e-12);
  // Equal weights by default; scores outside 0..1 are clamped.
  std::vector<RankedList> wild = {{{1, 7.0}}, {{1, -2.0}}};
  EXPECT_DOUBLE_EQ(LinearBlend(wild)->front().score, 0.5);
}

TEST(FusionTest, BadArguments) {
  std::vector<RankedList> lists = {{{1, 1}}, {{2, 1}}};
  std::vector<double> one = {1};
  EXPECT_EQ(ReciprocalRankFusion(lists, one).status().message(), "fusion: 1 weights for 2 lists");
  std::vector<double> negative = {1, -1};
  EXPECT_FALSE(LinearBlend(lists, negative).ok());
  std::vector<double> zero = {0, 0};
  EXPECT_FALSE(LinearBlend(lists, zero).ok());
  EXPECT_FALSE(ReciprocalRankFusion(lists, {}, 0).ok());
  EXPECT_TRUE(ReciprocalRankFusion({}).value().empty());
  EXPECT_TRUE(LinearBlend({}).value().empty());
}

}  // namespace
}  // namespace rampart::knowledge::hub
