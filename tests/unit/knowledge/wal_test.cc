#include "knowledge/index/wal.h"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "knowledge/index/durable_files.h"
#include "knowledge/index/write_codec.h"
#include "temp_folder.h"

namespace rampart::knowledge {
namespace {

std::string Payload(const std::string& id) {
  std::string bytes;
  EncodeWriteOp(WriteOp{"ns", UpsertOp{{VectorRecord{id, {1.0f, 2.0f}, {}, {}}}}}, bytes);
  return bytes;
}

struct Replayed {
  std::vector<uint64_t> sequences;
  std::vector<std::string> ids;
};

Result<std::unique_ptr<WriteAheadLog>> OpenLog(const std::string& folder, Replayed& replayed,
                                               uint64_t after = 0, size_t segment_bytes = 1 << 20) {
  return WriteAheadLog::Open(folder, after, {.segment_bytes = segment_bytes},
                             [&](uint64_t sequence, WriteOp op) {
                               replayed.sequences.push_back(sequence);
                               replayed.ids.push_back(std::get<UpsertOp>(op.change).records[0].id);
                               return Status::Ok();
                             });
}

// Appends records "r1".."r<count>", one per call.
void AppendRecords(WriteAheadLog& log, int first, int last) {
  for (int i = first; i <= last; ++i) {
    const std::string payload = Payload(fmt::format("r{}", i));
    Result<uint64_t> sequence = log.Append(std::span(&payload, 1));
    ASSERT_TRUE(sequence.ok()) << sequence.status().ToString();
  }
}

std::string OnlySegment(const std::string& folder) {
  std::vector<std::string> segments;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    if (entry.path().extension() == ".log") segments.push_back(entry.path().string());
  }
  EXPECT_EQ(segments.size(), 1u);
  return segments.empty() ? "" : segments[0];
}

void FlipByte(const std::string& path, size_t offset) {
  std::string data = *ReadWholeFile(path);
  ASSERT_LT(offset, data.size());
  data[offset] = static_cast<char>(data[offset] ^ 0x40);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

const size_t kFrameBytes = 16 + Payload("r1").size();  // "r1".."r9" encode alike
const size_t kMagicBytes = 8;

TEST(WriteAheadLogTest, ReopenReplaysEveryRecordInOrderAndContinuesTheSequence) {
  testing::TempFolder folder;
  {
    Replayed replayed;
    auto log = OpenLog(folder.path(), replayed);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    EXPECT_TRUE(replayed.ids.empty());
    std::vector<std::string> batch = {Payload("r1"), Payload("r2"), Payload("r3")};
    Result<uint64_t> last = (*log)->Append(batch);
    ASSERT_TRUE(last.ok());
    EXPECT_EQ(*last, 3u);
  }
  Replayed replayed;
  auto log = OpenLog(folder.path(), replayed);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ(replayed.ids, (std::vector<std::string>{"r1", "r2", "r3"}));
  EXPECT_EQ(replayed.sequences, (std::vector<uint64_t>{1, 2, 3}));
  AppendRecords(**log, 4, 4);
  EXPECT_EQ((*log)->last_sequence(), 4u);
  Replayed after_snapshot;
  log->reset();
  auto reopened = OpenLog(folder.path(), after_snapshot, /*after=*/2);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ(after_snapshot.ids, (std::vector<std::string>{"r3", "r4"}));
}

TEST(WriteAheadLogTest, ATruncatedTailIsCutOffKeepingEarlierRecords) {
  testing::TempFolder folder;
  {
    Replayed replayed;
    auto log = OpenLog(folder.path(), replayed);
    ASSERT_TRUE(log.ok());
    AppendRecords(**log, 1, 5);
  }
  const std::string segment = OnlySegment(folder.path());
  // Every cut inside the last record (a torn write) keeps exactly the first four.
  for (size_t cut = 1; cut < kFrameBytes; cut += 3) {
    std::filesystem::resize_file(segment, kMagicBytes + 5 * kFrameBytes);
    std::string data = *ReadWholeFile(segment);
    std::filesystem::resize_file(segment, kMagicBytes + 4 * kFrameBytes + cut);
    Replayed replayed;
    auto log = OpenLog(folder.path(), replayed);
    ASSERT_TRUE(log.ok()) << cut << ": " << log.status().ToString();
    EXPECT_EQ(replayed.ids.size(), 4u) << cut;
    EXPECT_EQ(std::filesystem::file_size(segment), kMagicBytes + 4 * kFrameBytes) << cut;
    log->reset();
    std::ofstream(segment, std::ios::binary | std::ios::trunc) << data;  // restore all five
  }
  // And the log goes on after the cut: the next record takes the dropped one's sequence.
  std::filesystem::resize_file(segment, kMagicBytes + 4 * kFrameBytes + 7);
  Replayed replayed;
  auto log = OpenLog(folder.path(), replayed);
  ASSERT_TRUE(log.ok());
  AppendRecords(**log, 9, 9);
  log->reset();
  Replayed again;
  ASSERT_TRUE(OpenLog(folder.path(), again).ok());
  EXPECT_EQ(again.ids, (std::vector<std::string>{"r1", "r2", "r3", "r4", "r9"}));
  EXPECT_EQ(again.sequences.back(), 5u);
}

TEST(WriteAheadLogTest, AFlippedByteInTheLastRecordDropsOnlyIt) {
  testing::TempFolder folder;
  {
    Replayed replayed;
    auto log = OpenLog(folder.path(), replayed);
    ASSERT_TRUE(log.ok());
    AppendRecords(**log, 1, 3);
  }
  const std::string segment = OnlySegment(folder.path());
  FlipByte(segment, kMagicBytes + 2 * kFrameBytes + kFrameBytes - 3);  // in r3's payload
  Replayed replayed;
  auto log = OpenLog(folder.path(), replayed);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ(replayed.ids, (std::vector<std::string>{"r1", "r2"}));
  EXPECT_EQ(std::filesystem::file_size(segment), kMagicBytes + 2 * kFrameBytes);
}

TEST(WriteAheadLogTest, AFlippedByteBeforeValidRecordsIsAStartupErrorNamingFileAndOffset) {
  testing::TempFolder folder;
  {
    Replayed replayed;
    auto log = OpenLog(folder.path(), replayed);
    ASSERT_TRUE(log.ok());
    AppendRecords(**log, 1, 4);
  }
  const std::string segment = OnlySegment(folder.path());
  const size_t second = kMagicBytes + kFrameBytes;
  for (const size_t offset : {second + 1 /* length */, second + 5 /* crc */,
                              second + 9 /* sequence */, second + 20 /* payload */}) {
    const std::string intact = *ReadWholeFile(segment);
    FlipByte(segment, offset);
    Replayed replayed;
    auto log = OpenLog(folder.path(), replayed);
    ASSERT_FALSE(log.ok()) << offset;
    EXPECT_EQ(log.status().code(), StatusCode::kInternal);
    EXPECT_NE(log.status().message().find(segment), std::string::npos) << log.status().message();
    EXPECT_NE(log.status().message().find(fmt::format("at offset {}", second)), std::string::npos)
        << log.status().message();
    EXPECT_EQ(std::filesystem::file_size(segment), intact.size());  // nothing cut
    std::ofstream(segment, std::ios::binary | std::ios::trunc) << intact;
  }
}

TEST(WriteAheadLogTest, SegmentsRotateAndDropThroughDeletesOnlyCoveredOnes) {
  testing::TempFolder folder;
  Replayed replayed;
  // Room for two records per segment.
  auto log = OpenLog(folder.path(), replayed, 0, kMagicBytes + 2 * kFrameBytes);
  ASSERT_TRUE(log.ok());
  AppendRecords(**log, 1, 7);
  EXPECT_EQ((*log)->SegmentPaths().size(), 4u);  // 1-2, 3-4, 5-6, 7
  ASSERT_TRUE((*log)->DropThrough(3).ok());      // 3-4 still holds 4
  EXPECT_EQ((*log)->SegmentPaths().size(), 3u);
  ASSERT_TRUE((*log)->DropThrough(100).ok());  // never the one being written
  EXPECT_EQ((*log)->SegmentPaths().size(), 1u);
  log->reset();
  Replayed after;
  auto reopened = OpenLog(folder.path(), after, /*after=*/6, kMagicBytes + 2 * kFrameBytes);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ(after.ids, (std::vector<std::string>{"r7"}));
  // Without the snapshot at 6, records 1..6 are missing: an error, not an empty index.
  reopened->reset();
  Replayed missing;
  auto gap = OpenLog(folder.path(), missing, 0, kMagicBytes + 2 * kFrameBytes);
  ASSERT_FALSE(gap.ok());
  EXPECT_NE(gap.status().message().find("missing"), std::string::npos) << gap.status().message();
}

// The log lost records the snapshot holds (a damaged tail cut after the snapshot was written):
// it goes on in a new segment at the snapshot's next sequence, and recovers from there.
TEST(WriteAheadLogTest, ASnapshotAheadOfTheLogStartsANewSegment) {
  testing::TempFolder folder;
  {
    Replayed replayed;
    auto log = OpenLog(folder.path(), replayed);
    ASSERT_TRUE(log.ok());
    AppendRecords(**log, 1, 3);
  }
  {
    Replayed replayed;
    auto log = OpenLog(folder.path(), replayed, /*after=*/5);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    EXPECT_TRUE(replayed.ids.empty());
    EXPECT_EQ((*log)->last_sequence(), 5u);
    AppendRecords(**log, 6, 7);
    EXPECT_EQ((*log)->SegmentPaths().size(), 2u);
    EXPECT_EQ((*log)->last_sequence(), 7u);
  }
  Replayed replayed;
  auto log = OpenLog(folder.path(), replayed, /*after=*/5);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ(replayed.ids, (std::vector<std::string>{"r6", "r7"}));
  EXPECT_EQ(replayed.sequences, (std::vector<uint64_t>{6, 7}));
  log->reset();
  Replayed without_snapshot;
  EXPECT_FALSE(OpenLog(folder.path(), without_snapshot, /*after=*/3).ok());  // 4 and 5 missing
}

TEST(WriteAheadLogTest, DamageInAnEarlierSegmentIsAnError) {
  testing::TempFolder folder;
  std::vector<std::string> segments;
  {
    Replayed replayed;
    auto log = OpenLog(folder.path(), replayed, 0, kMagicBytes + 2 * kFrameBytes);
    ASSERT_TRUE(log.ok());
    AppendRecords(**log, 1, 5);
    segments = (*log)->SegmentPaths();
  }
  std::filesystem::resize_file(segments[0], kMagicBytes + kFrameBytes + 4);
  Replayed replayed;
  auto log = OpenLog(folder.path(), replayed, 0, kMagicBytes + 2 * kFrameBytes);
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.status().message().find(segments[0]), std::string::npos);
  EXPECT_NE(log.status().message().find("later segments"), std::string::npos);
}

}  // namespace
}  // namespace rampart::knowledge
