#include "core/varint.h"

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

namespace rampart {
namespace {

TEST(VarintTest, RoundTripsAcrossTheRange) {
  for (const uint64_t value :
       {uint64_t{0}, uint64_t{1}, uint64_t{127}, uint64_t{128}, uint64_t{16383}, uint64_t{16384},
        uint64_t{1} << 63, std::numeric_limits<uint64_t>::max()}) {
    std::string out;
    PutVarint(out, value);
    std::string_view in = out;
    uint64_t read = 0;
    ASSERT_TRUE(GetVarint(in, read)) << value;
    EXPECT_EQ(read, value);
    EXPECT_TRUE(in.empty()) << value;
  }
  std::string out;
  PutVarint(out, 300);
  EXPECT_EQ(out, std::string("\xAC\x02"));
}

TEST(VarintTest, RefusesTruncatedLongerAndOverlongForms) {
  uint64_t value = 0;
  std::string_view truncated = "\x80";
  EXPECT_FALSE(GetVarint(truncated, value));
  std::string_view empty;
  EXPECT_FALSE(GetVarint(empty, value));
  // 1 written with a trailing zero byte: a second form of the same value.
  std::string_view padded("\x81\x00", 2);
  EXPECT_FALSE(GetVarint(padded, value));
  // Zero itself is one zero byte.
  std::string_view zero("\x00", 1);
  EXPECT_TRUE(GetVarint(zero, value));
  EXPECT_EQ(value, 0u);
  // Bits beyond the 64th.
  std::string_view too_wide("\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\x02", 10);
  EXPECT_FALSE(GetVarint(too_wide, value));
}

TEST(VarintTest, ZigZagMapsSmallMagnitudesToSmallValues) {
  EXPECT_EQ(ZigZag(0), 0u);
  EXPECT_EQ(ZigZag(static_cast<uint64_t>(int64_t{-1})), 1u);
  EXPECT_EQ(ZigZag(1), 2u);
  EXPECT_EQ(ZigZag(static_cast<uint64_t>(int64_t{-2})), 3u);
  for (const int64_t value : {std::numeric_limits<int64_t>::min(), int64_t{-5}, int64_t{7},
                              std::numeric_limits<int64_t>::max()}) {
    EXPECT_EQ(static_cast<int64_t>(UnZigZag(ZigZag(static_cast<uint64_t>(value)))), value);
  }
}

}  // namespace
}  // namespace rampart
