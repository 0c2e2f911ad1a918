#include "knowledge/index/write_codec.h"

#include <gtest/gtest.h>

#include "map_engine.h"

namespace rampart::knowledge {
namespace {

VectorRecord FullRecord() {
  VectorRecord record;
  record.id = "doc-1";
  record.values = {0.5f, -1.25f, 3.0e-8f, 1e30f};
  record.sparse.indices = {3, 17, 4000000000u};
  record.sparse.values = {0.1f, 0.2f, -0.3f};
  record.metadata = {{"flag", true},
                     {"genre", std::string("drama")},
                     {"tags", std::vector<std::string>{"a", "", "ü"}},
                     {"year", 1999.5}};
  return record;
}

TEST(WriteCodecTest, Crc32cMatchesTheStandardCheckValue) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);  // RFC 3720's check value for CRC-32C
  EXPECT_EQ(Crc32c("56789", Crc32c("1234")), 0xE3069283u);
  EXPECT_EQ(Crc32c(""), 0u);
}

TEST(WriteCodecTest, EveryKindOfWriteRoundTrips) {
  std::vector<WriteOp> ops = {
      WriteOp{"ns", UpsertOp{{FullRecord(), VectorRecord{"bare", {}, {}, {}}}}},
      WriteOp{"", DeleteIdsOp{{"x", "y", std::string(512, 'z')}}}, WriteOp{"other", DeleteAllOp{}}};
  for (const WriteOp& op : ops) {
    std::string bytes;
    EncodeWriteOp(op, bytes);
    Result<WriteOp> decoded = DecodeWriteOp(bytes);
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    EXPECT_EQ(decoded->name_space, op.name_space);
    ASSERT_EQ(decoded->change.index(), op.change.index());
    if (const auto* upsert = std::get_if<UpsertOp>(&op.change)) {
      const auto& got = std::get<UpsertOp>(decoded->change).records;
      ASSERT_EQ(got.size(), upsert->records.size());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_TRUE(testing::SameRecord(got[i], upsert->records[i])) << i;
      }
    } else if (const auto* deletion = std::get_if<DeleteIdsOp>(&op.change)) {
      EXPECT_EQ(std::get<DeleteIdsOp>(decoded->change).ids, deletion->ids);
    }
  }
}

TEST(WriteCodecTest, EveryTruncationIsAPreciseError) {
  std::string bytes;
  EncodeWriteOp(WriteOp{"ns", UpsertOp{{FullRecord()}}}, bytes);
  for (size_t length = 0; length < bytes.size(); ++length) {
    Result<WriteOp> decoded = DecodeWriteOp(std::string_view(bytes).substr(0, length));
    ASSERT_FALSE(decoded.ok()) << length;
    EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument);
  }
  Result<WriteOp> longer = DecodeWriteOp(bytes + "x");
  ASSERT_FALSE(longer.ok());
  EXPECT_NE(longer.status().message().find("left over"), std::string::npos);
}

TEST(WriteCodecTest, RejectsAnotherVersionAndKind) {
  std::string bytes;
  EncodeWriteOp(WriteOp{"", DeleteAllOp{}}, bytes);
  std::string newer = bytes;
  newer[0] = static_cast<char>(kWriteCodecVersion + 1);
  EXPECT_NE(DecodeWriteOp(newer).status().message().find("version"), std::string::npos);
  std::string unknown = bytes;
  unknown.back() = 9;
  EXPECT_NE(DecodeWriteOp(unknown).status().message().find("unknown write kind 9"),
            std::string::npos);
}

TEST(WriteCodecTest, AHugeCountInDamagedBytesDoesNotAllocate) {
  std::string bytes;
  EncodeWriteOp(WriteOp{"", DeleteIdsOp{{"a"}}}, bytes);
  // The id count sits after the version, the namespace's length and the kind byte.
  bytes[6] = bytes[7] = bytes[8] = bytes[9] = static_cast<char>(0xFF);
  Result<WriteOp> decoded = DecodeWriteOp(bytes);
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(decoded.status().message().find("exceeds"), std::string::npos)
      << decoded.status().message();
}

}  // namespace
}  // namespace rampart::knowledge
