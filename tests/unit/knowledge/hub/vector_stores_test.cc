// The contract's value rules (vector_stores.h): attribute limits, filter validation, and filter
// semantics (a missing key is false for every comparison; ordering only within one type).

#include "knowledge/hub/vector_stores.h"

#include <gtest/gtest.h>

#include <string>

namespace rampart::knowledge::hub {
namespace {

using Op = AttributeFilter::Op;

AttributeFilter Compare(Op op, std::string key, AttributeValue value) {
  return AttributeFilter{.op = op, .key = std::move(key), .value = std::move(value)};
}

TEST(VectorStoresTest, AttributesHaveLimits) {
  EXPECT_TRUE(ValidateFileAttributes({{"dept", "eng"}, {"level", 2.0}, {"public", true}}).ok());
  EXPECT_FALSE(ValidateFileAttributes({{"", "x"}}).ok());
  EXPECT_FALSE(ValidateFileAttributes({{std::string(65, 'k'), "x"}}).ok());
  EXPECT_FALSE(ValidateFileAttributes({{"k", std::string(513, 'v')}}).ok());
  FileAttributes many;
  for (int i = 0; i < 17; ++i) many[std::to_string(i)] = 1.0;
  EXPECT_FALSE(ValidateFileAttributes(many).ok());
}

TEST(VectorStoresTest, FiltersAreValidated) {
  EXPECT_TRUE(ValidateFilter(Compare(Op::kEq, "a", 1.0)).ok());
  EXPECT_FALSE(ValidateFilter(Compare(Op::kEq, "", 1.0)).ok());
  EXPECT_FALSE(ValidateFilter(AttributeFilter{.op = Op::kAnd}).ok());
  AttributeFilter deep = Compare(Op::kEq, "a", 1.0);
  for (int i = 0; i < 8; ++i) deep = AttributeFilter{.op = Op::kOr, .filters = {deep}};
  EXPECT_FALSE(ValidateFilter(deep).ok());
  AttributeFilter wide{.op = Op::kIn, .key = "a"};
  wide.values.assign(1001, 1.0);
  EXPECT_FALSE(ValidateFilter(wide).ok());
}

TEST(VectorStoresTest, FiltersMatchAsOpenAiDescribes) {
  const FileAttributes file = {{"dept", "eng"}, {"level", 2.0}, {"public", true}};
  EXPECT_TRUE(FilterMatches(Compare(Op::kEq, "dept", "eng"), file));
  EXPECT_TRUE(FilterMatches(Compare(Op::kNe, "dept", "hr"), file));
  EXPECT_FALSE(FilterMatches(Compare(Op::kNe, "missing", "hr"), file));
  EXPECT_TRUE(FilterMatches(Compare(Op::kGte, "level", 2.0), file));
  EXPECT_FALSE(FilterMatches(Compare(Op::kGt, "level", 2.0), file));
  EXPECT_TRUE(FilterMatches(Compare(Op::kLt, "dept", "fin"), file));  // strings by bytes
  EXPECT_FALSE(FilterMatches(Compare(Op::kLt, "level", "9"), file));  // a number and a string
  EXPECT_FALSE(FilterMatches(Compare(Op::kGt, "public", false), file));
  AttributeFilter in{.op = Op::kIn, .key = "dept", .values = {"hr", "eng"}};
  EXPECT_TRUE(FilterMatches(in, file));
  in.op = Op::kNin;
  EXPECT_FALSE(FilterMatches(in, file));
  in.key = "missing";
  EXPECT_FALSE(FilterMatches(in, file));
  const AttributeFilter both{
      .op = Op::kAnd,
      .filters = {Compare(Op::kEq, "public", true), Compare(Op::kLte, "level", 3.0)}};
  EXPECT_TRUE(FilterMatches(both, file));
  const AttributeFilter either{
      .op = Op::kOr, .filters = {Compare(Op::kEq, "dept", "hr"), Compare(Op::kEq, "level", 1.0)}};
  EXPECT_FALSE(FilterMatches(either, file));
  EXPECT_EQ(IngestStatusName(IngestStatus::kCancelled), "cancelled");
}

}  // namespace
}  // namespace rampart::knowledge::hub
