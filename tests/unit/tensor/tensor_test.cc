#include "tensor/tensor.h"

#include <gtest/gtest.h>

namespace rampart::tensor {
namespace {

TEST(DataType, WireNamesRoundTrip) {
  for (int i = 1; i <= 14; ++i) {
    const auto type = static_cast<DataType>(i);
    EXPECT_EQ(DataTypeFromName(DataTypeName(type)), type) << DataTypeName(type);
  }
  EXPECT_EQ(DataTypeName(DataType::kBytes), "BYTES");
  EXPECT_FALSE(DataTypeFromName("TYPE_FP32").has_value());
  EXPECT_FALSE(DataTypeFromName("INVALID").has_value());
  EXPECT_FALSE(DataTypeFromName("fp32").has_value());
}

TEST(DataType, SizesMatchTheWireFormat) {
  EXPECT_EQ(DataTypeSize(DataType::kBool), 1u);
  EXPECT_EQ(DataTypeSize(DataType::kFp16), 2u);
  EXPECT_EQ(DataTypeSize(DataType::kBf16), 2u);
  EXPECT_EQ(DataTypeSize(DataType::kInt32), 4u);
  EXPECT_EQ(DataTypeSize(DataType::kFp64), 8u);
  EXPECT_EQ(DataTypeSize(DataType::kBytes), 0u);
}

TEST(ElementCount, RejectsNegativeDimsAndOverflow) {
  EXPECT_EQ(ElementCount({}), 1);
  EXPECT_EQ(ElementCount({2, 3, 4}), 24);
  EXPECT_EQ(ElementCount({0, 5}), 0);
  EXPECT_FALSE(ElementCount({-1, 4}).has_value());
  EXPECT_FALSE(ElementCount({1ll << 40, 1ll << 40}).has_value());
}

TEST(BytesElements, RoundTripThroughLengthPrefixes) {
  std::string buffer;
  ASSERT_TRUE(AppendBytesElement("hello", buffer).ok());
  ASSERT_TRUE(AppendBytesElement("", buffer).ok());
  ASSERT_TRUE(AppendBytesElement(std::string_view("w\0rld", 5), buffer).ok());
  EXPECT_EQ(buffer.size(), 4u + 5 + 4 + 0 + 4 + 5);
  EXPECT_EQ(buffer.substr(0, 4), std::string("\x05\x00\x00\x00", 4));
  auto elements = SplitBytesElements(buffer);
  ASSERT_TRUE(elements.ok());
  ASSERT_EQ(elements->size(), 3u);
  EXPECT_EQ((*elements)[0], "hello");
  EXPECT_EQ((*elements)[1], "");
  EXPECT_EQ((*elements)[2], std::string_view("w\0rld", 5));
}

// The length prefix is 32 bits: a longer element is refused, never written with its length cut
// to the low 32 bits (which would misframe every element after it).
TEST(BytesElements, AnElementPastFourGibibytesIsRefused) {
  const char byte = 'x';
  // Only the size is looked at: the view is never read.
  const std::string_view huge(&byte, kMaxBytesElement + 1);
  std::string buffer = "kept";
  const Status refused = AppendBytesElement(huge, buffer);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(),
            "a BYTES element of 4294967296 bytes is too long: its 4-byte length prefix says at "
            "most 4294967295");
  EXPECT_EQ(buffer, "kept");
}

TEST(BytesElements, TruncatedBufferIsAnError) {
  std::string buffer;
  ASSERT_TRUE(AppendBytesElement("hello", buffer).ok());
  EXPECT_FALSE(SplitBytesElements(std::string_view(buffer).substr(0, 7)).ok());
  EXPECT_FALSE(SplitBytesElements(std::string_view(buffer).substr(0, 2)).ok());
}

TEST(ValidateByteSize, ChecksFixedAndVariableSizes) {
  EXPECT_TRUE(ValidateByteSize("x", DataType::kInt32, {2, 2}, std::string(16, '\0')).ok());
  Status wrong = ValidateByteSize("input 'x'", DataType::kInt32, {2, 2}, std::string(15, '\0'));
  EXPECT_EQ(wrong.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(wrong.message(), "input 'x' has 15 bytes but shape [2,2] of INT32 needs 16");
  std::string strings;
  ASSERT_TRUE(AppendBytesElement("a", strings).ok());
  ASSERT_TRUE(AppendBytesElement("bc", strings).ok());
  EXPECT_TRUE(ValidateByteSize("s", DataType::kBytes, {2}, strings).ok());
  EXPECT_FALSE(ValidateByteSize("s", DataType::kBytes, {3}, strings).ok());
}

TEST(ValidateByteSize, AShapeWhoseByteSizeOverflowsIsNeverMet) {
  // 2^61 INT64 elements are 2^64 bytes: as uint64, 0, which an empty buffer would have matched.
  const Shape huge = {1, int64_t{1} << 61};
  Status wrong = ValidateByteSize("input 'x'", DataType::kInt64, huge, "");
  EXPECT_EQ(wrong.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(
      wrong.message(),
      "input 'x' has 0 bytes but shape [1,2305843009213693952] of INT64 needs more than 2^64");
  EXPECT_FALSE(HasExpectedByteSize(DataType::kInt64, huge, ""));
  EXPECT_FALSE(HasExpectedByteSize(DataType::kFp32, {int64_t{1} << 62}, ""));
  EXPECT_EQ(ByteSize(int64_t{1} << 61, 8), std::nullopt);
  EXPECT_EQ(ByteSize(int64_t{1} << 60, 8), uint64_t{1} << 63);
}

TEST(ValidateByteSize, FormatsTheNameOnlyForTheError) {
  std::string strings;
  ASSERT_TRUE(AppendBytesElement("a", strings).ok());
  ASSERT_TRUE(AppendBytesElement("bc", strings).ok());
  const std::string truncated = strings.substr(0, strings.size() - 1);
  // The predicate agrees with the full check on every case.
  struct Case {
    DataType type;
    Shape shape;
    std::string data;
    bool valid;
  };
  const std::vector<Case> cases = {
      {DataType::kInt32, {2, 2}, std::string(16, '\0'), true},
      {DataType::kInt32, {2, 2}, std::string(15, '\0'), false},
      {DataType::kFp16, {3}, std::string(6, '\0'), true},
      {DataType::kInvalid, {1}, std::string(4, '\0'), false},
      {DataType::kBytes, {2}, strings, true},
      {DataType::kBytes, {3}, strings, false},
      {DataType::kBytes, {2}, truncated, false},
      {DataType::kBytes, {0}, "", true},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(HasExpectedByteSize(c.type, c.shape, c.data), c.valid) << ShapeToString(c.shape);
    EXPECT_EQ(ValidateByteSize("t", c.type, c.shape, c.data).ok(), c.valid);
  }
  Status wrong = ValidateByteSize(DataType::kInt32, {2, 2}, std::string(15, '\0'),
                                  "input '{}' for model '{}'", "x", "m");
  EXPECT_EQ(wrong.message(),
            "input 'x' for model 'm' has 15 bytes but shape [2,2] of INT32 needs 16");
  Status split = ValidateByteSize(DataType::kBytes, {2}, truncated, "input '{}'", "s");
  EXPECT_NE(split.message().find("input 's': BYTES element at offset 5 claims 2 bytes"),
            std::string::npos)
      << split.message();
  EXPECT_TRUE(ValidateByteSize(DataType::kBytes, {2}, strings, "input '{}'", "s").ok());
}

}  // namespace
}  // namespace rampart::tensor
