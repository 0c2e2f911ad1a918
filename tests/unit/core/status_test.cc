#include "core/status.h"

#include <gtest/gtest.h>

#include "core/unique_function.h"

namespace rampart {
namespace {

TEST(Status, DefaultIsOkWithEmptyMessage) {
  Status status;
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kOk);
  EXPECT_EQ(status.message(), "");
  EXPECT_EQ(status.ToString(), "OK");
}

TEST(Status, FactoriesFormatTheirMessage) {
  Status status = NotFound("model '{}' version {}", "simple", 3);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_EQ(status.message(), "model 'simple' version 3");
  EXPECT_EQ(status.ToString(), "NotFound: model 'simple' version 3");
}

TEST(Status, WithContextPrefixesErrorsAndKeepsOk) {
  EXPECT_EQ(InvalidArgument("bad dims").WithContext("config.pbtxt").message(),
            "config.pbtxt: bad dims");
  EXPECT_TRUE(Status::Ok().WithContext("anything").ok());
}

Result<int> Half(int value) {
  if (value % 2 != 0) return InvalidArgument("{} is odd", value);
  return value / 2;
}

Result<int> Quarter(int value) {
  ASSIGN_OR_RETURN(int half, Half(value));
  ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

Status CheckEven(int value) {
  RETURN_IF_ERROR(Half(value).status());
  return Status::Ok();
}

TEST(Result, CarriesValueOrError) {
  Result<int> good = Quarter(8);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 2);
  Result<int> bad = Quarter(6);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "3 is odd");
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(5).code(), StatusCode::kInvalidArgument);
}

TEST(Result, FromOkStatusBecomesInternalError) {
  Result<int> result{Status::Ok()};
  EXPECT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInternal);
}

TEST(UniqueFunction, HoldsMoveOnlyCallables) {
  auto owned = std::make_unique<int>(41);
  UniqueFunction<int(int)> add = [owned = std::move(owned)](int x) { return *owned + x; };
  UniqueFunction<int(int)> moved = std::move(add);
  EXPECT_FALSE(static_cast<bool>(add));  // NOLINT(bugprone-use-after-move): checking the state
  EXPECT_EQ(moved(1), 42);
}

}  // namespace
}  // namespace rampart
