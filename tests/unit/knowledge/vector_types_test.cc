#include "knowledge/index/vector_types.h"

#include <gtest/gtest.h>

namespace rampart::knowledge {
namespace {

TEST(VectorTypesTest, MetricNamesRoundTrip) {
  for (Metric metric : {Metric::kCosine, Metric::kDotProduct, Metric::kEuclidean}) {
    auto parsed = ParseMetric(MetricName(metric));
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_EQ(*parsed, metric);
  }
  auto bad = ParseMetric("hamming");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("hamming"), std::string::npos);
}

TEST(VectorTypesTest, DefaultNamespaceSpellingsAreOne) {
  EXPECT_EQ(CanonicalNamespace("__default__"), "");
  EXPECT_EQ(CanonicalNamespace(""), "");
  EXPECT_EQ(CanonicalNamespace("docs"), "docs");
}

}  // namespace
}  // namespace rampart::knowledge
