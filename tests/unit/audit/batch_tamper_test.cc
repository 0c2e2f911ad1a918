// Tampering inside migration 7's batch rows, as someone holding the SQLite file would: a record
// edited inside a batch's blob (rewritten whole, or one byte changed in place), a record deleted
// from, added to or moved within a blob, a blob cut short, and a whole batch deleted: each is
// found by VerifyLog and located at the record where it happened. Also: a log whose older
// records are per-record rows (migration 3, as stores written before migration 7 hold them) and
// whose newer ones are batches verifies, proves, exports and answers queries across both, and a
// store with such old rows migrates to batches, and a store without batch rows of its own takes
// the writer's packed batches.

#include <stdlib.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>

#include "audit/audit_log.h"
#include "audit/checkpoint.h"
#include "audit/log_reader.h"
#include "audit/record_codec.h"
#include "audit/record_compact.h"
#include "audit/stored_batches.h"
#include "store/store.h"
#include "testing/memory_store.h"

namespace rampart::audit {
namespace {

using test_support::StoredBatch;
using test_support::StoredBatches;

// Record 15's request id as a version-2 blob holds it: its length, then its bytes.
const std::string kRequestId15("\x03r15");

// A log of 30 records in three batches (1..10, 11..20, 21..30), each ending at a checkpoint.
class BatchLog : public ::testing::Test {
 protected:
  // Whether records 1..30 are written with leaves over their canonical encoding (version-2
  // batches), as logs written before compact leaves hold them, rather than compact leaves
  // (version 3). Records appended later by a test have compact leaves.
  virtual bool CanonicalLeaves() const = 0;

  void SetUp() override {
    char pattern[] = "/tmp/rampart-batch-tamper-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    auto key = crypto::SigningKey::Generate(crypto::SignatureAlgorithm::kEd25519);
    ASSERT_TRUE(key.ok()) << key.status().ToString();
    key_ = *key;
    Append(1, 30, CanonicalLeaves());
    const std::vector<StoredBatch> batches = StoredBatches(dir_).List();
    ASSERT_EQ(batches.size(), 3u);
    EXPECT_EQ(batches[1].first_sequence, 11);
    EXPECT_EQ(batches[1].last_sequence, 20);
    ASSERT_TRUE(Verify().kind.empty()) << Verify().message;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Appends records first..last in batches of 10, each flushed with a checkpoint. Batched mode
  // with a long delay: the writer waits for each Flush, so every 10 records are one batch.
  void Append(int first, int last, bool canonical_leaves = false) {
    auto store = store::OpenSqliteStore(dir_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    AuditOptions options;
    options.canonical_leaves = canonical_leaves;
    options.sync = false;
    options.max_delay = std::chrono::seconds(60);
    options.checkpoint_every_records = 1000000;
    auto log = AuditLog::Open(**store, options, key_, "batch-tamper-test");
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    for (int i = first; i <= last; ++i) {
      AuditRecord record;
      record.time_unix_ns = 1'800'000'000'000'000'000 + int64_t{i} * 1'000'000'000;
      record.tenant = "acme";
      record.principal = i % 2 == 0 ? "alice" : "bob";
      record.trace_id = "trace-" + std::to_string(i);
      record.request_id = "r" + std::to_string(i);
      record.action = "model:infer";
      record.status = 200;
      (*log)->Append(std::move(record), [](Status) {});
      if (i % 10 == 0) {
        ASSERT_TRUE((*log)->Flush(/*checkpoint=*/true).ok());
      }
    }
  }

  // The first finding of a fresh verification ("" when sound).
  Finding Verify() {
    auto store = store::OpenSqliteStore(dir_);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    if (!store.ok()) return {.kind = "error"};
    auto report = VerifyLog(**store, {.keys = {key_.Public()}});
    EXPECT_TRUE(report.ok()) << report.status().ToString();
    if (!report.ok()) return {.kind = "error"};
    last_report_ = *report;
    return report->problem.value_or(Finding{});
  }

  // The version byte of the batches records 1..30 are in.
  char FirstBatchesVersion() const {
    return CanonicalLeaves() ? store::kAuditBatchVersion2 : store::kAuditBatchVersion3;
  }

  std::string dir_;
  crypto::SigningKey key_;
  VerifyReport last_report_;
};

// Every kind of tampering, in a log of compact leaves and in one of canonical leaves.
class BatchTamperTest : public BatchLog, public ::testing::WithParamInterface<bool> {
 protected:
  bool CanonicalLeaves() const override { return GetParam(); }
};

INSTANTIATE_TEST_SUITE_P(Leaves, BatchTamperTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& leaves) {
                           return leaves.param ? "CanonicalLeaves" : "CompactLeaves";
                         });

// Logs whose records 1..30 were written before compact leaves, as the older layouts hold them.
class OlderLogTest : public BatchLog {
 protected:
  bool CanonicalLeaves() const override { return true; }
};

// A log written with compact leaves.
class CompactLeafLogTest : public BatchLog {
 protected:
  bool CanonicalLeaves() const override { return false; }
};

TEST_P(BatchTamperTest, ARecordEditedInsideABatchIsFoundAtItsRecord) {
  StoredBatches stored(dir_);
  std::vector<store::AuditRow> rows = StoredBatches::Unpack(stored.Holding(15));
  ASSERT_EQ(rows.size(), 10u);
  auto& record = rows[4].record;  // record 15
  const size_t at = record.find("\"status\":200");
  ASSERT_NE(at, std::string::npos);
  record.replace(at, 12, "\"status\":403");
  stored.Repack(11, rows);
  const Finding finding = Verify();
  EXPECT_EQ(finding.kind, "edited") << finding.message;
  EXPECT_EQ(finding.sequence, 15) << finding.message;
}

TEST_P(BatchTamperTest, OneByteChangedInPlaceInABlobIsFoundAtItsRecord) {
  StoredBatches stored(dir_);
  StoredBatch batch = stored.Holding(15);
  const size_t record = batch.records.find(kRequestId15);
  ASSERT_NE(record, std::string::npos);
  batch.records[record + 2] = '7';  // "r15" -> "r75", nothing else changed
  stored.Replace(11, batch);
  const Finding finding = Verify();
  EXPECT_EQ(finding.kind, "edited") << finding.message;
  EXPECT_EQ(finding.sequence, 15) << finding.message;
}

TEST_P(BatchTamperTest, AQueryFieldEditedInsideABatchIsFound) {
  StoredBatches stored(dir_);
  std::vector<store::AuditRow> rows = StoredBatches::Unpack(stored.Holding(13));
  rows[2].principal = "mallory";  // record 13's copy for queries, not the record
  stored.Repack(11, rows);
  const Finding finding = Verify();
  EXPECT_EQ(finding.kind, "edited") << finding.message;
  EXPECT_EQ(finding.sequence, 13) << finding.message;
}

TEST_P(BatchTamperTest, ARecordDeletedFromABatchIsFound) {
  StoredBatches stored(dir_);
  std::vector<store::AuditRow> rows = StoredBatches::Unpack(stored.Holding(15));
  rows.erase(rows.begin() + 4);
  stored.Repack(11, rows);
  const Finding finding = Verify();
  EXPECT_EQ(finding.kind, "deleted") << finding.message;
  EXPECT_EQ(finding.sequence, 15) << finding.message;
}

TEST_P(BatchTamperTest, ARecordAddedToABatchIsFound) {
  StoredBatches stored(dir_);
  std::vector<store::AuditRow> rows = StoredBatches::Unpack(stored.Holding(15));
  rows.insert(rows.begin() + 4, rows[3]);  // record 14 again, before 15
  stored.Repack(11, rows);
  const Finding finding = Verify();
  EXPECT_EQ(finding.kind, "inserted") << finding.message;
  EXPECT_EQ(finding.sequence, 15) << finding.message;
}

TEST_P(BatchTamperTest, TwoRecordsSwappedInsideABatchAreFound) {
  StoredBatches stored(dir_);
  std::vector<store::AuditRow> rows = StoredBatches::Unpack(stored.Holding(15));
  std::swap(rows[4], rows[5]);
  stored.Repack(11, rows);
  const Finding finding = Verify();
  EXPECT_EQ(finding.kind, "reordered") << finding.message;
  EXPECT_EQ(finding.sequence, 15) << finding.message;
}

TEST_P(BatchTamperTest, ABlobCutShortIsFoundAtItsFirstMissingRecord) {
  StoredBatches stored(dir_);
  StoredBatch batch = stored.Holding(15);
  const size_t record = batch.records.find(kRequestId15);
  ASSERT_NE(record, std::string::npos);
  batch.records.resize(record);  // record 15 cut in the middle, 16..20 gone
  stored.Replace(11, batch);
  const Finding finding = Verify();
  EXPECT_EQ(finding.kind, "deleted") << finding.message;
  EXPECT_EQ(finding.sequence, 15) << finding.message;
}

TEST_P(BatchTamperTest, ATruncatedLastBatchIsFound) {
  StoredBatches stored(dir_);
  StoredBatch last = stored.Holding(25);
  last.records.resize(last.records.find(std::string("\x03r25")));
  stored.Replace(21, last);
  const Finding finding = Verify();
  EXPECT_EQ(finding.kind, "truncated") << finding.message;
  EXPECT_EQ(finding.sequence, 25) << finding.message;
}

TEST_P(BatchTamperTest, TheWriterStoresItsVersionAndItsBlobsAreSmallerThanTheRecords) {
  StoredBatches stored(dir_);
  const StoredBatch batch = stored.Holding(15);
  ASSERT_FALSE(batch.records.empty());
  EXPECT_EQ(batch.records.front(), FirstBatchesVersion());
  size_t canonical = 0;
  for (const store::AuditRow& row : StoredBatches::Unpack(batch)) canonical += row.record.size();
  EXPECT_LT(batch.records.size() * 2, canonical) << batch.records.size() << " vs " << canonical;
}

TEST_P(BatchTamperTest, ACompactRecordThatDoesNotDecodeIsFoundAtItsRecord) {
  StoredBatches stored(dir_);
  StoredBatch batch = stored.Holding(15);
  const size_t record = batch.records.find(kRequestId15);
  ASSERT_NE(record, std::string::npos);
  // The flags byte after the sequence's offset, past the query fields: an unknown flag.
  const size_t action = batch.records.find("model:infer", record);
  ASSERT_NE(action, std::string::npos);
  // The action, the body's length, the compact leaf's version byte, the offset.
  const size_t flags = action + 11 + 1 + (CanonicalLeaves() ? 0 : 1) + 1;
  batch.records[flags] = '\x40';
  stored.Replace(11, batch);
  const Finding finding = Verify();
  EXPECT_EQ(finding.kind, "edited") << finding.message;
  EXPECT_EQ(finding.sequence, 15) << finding.message;
  EXPECT_NE(finding.message.find("does not decode"), std::string::npos) << finding.message;
}

TEST_F(CompactLeafLogTest, ANewRecordsVersionByteChangedIsFoundAtItsRecord) {
  StoredBatches stored(dir_);
  const StoredBatch original = stored.Holding(15);
  ASSERT_EQ(original.records.front(), store::kAuditBatchVersion3);
  const size_t record = original.records.find(kRequestId15);
  ASSERT_NE(record, std::string::npos);
  const size_t action = original.records.find("model:infer", record);
  ASSERT_NE(action, std::string::npos);
  const size_t version = action + 11 + 1;  // past the action and the body's length
  ASSERT_EQ(original.records[version], kCompactLeafVersion);
  // Any other version (a canonical encoding's '{' included) is refused at that record.
  for (const char changed : {'\x01', '\x03', '{', '\x00'}) {
    StoredBatch batch = original;
    batch.records[version] = changed;
    stored.Replace(11, batch);
    const Finding finding = Verify();
    EXPECT_EQ(finding.kind, "edited") << finding.message;
    EXPECT_EQ(finding.sequence, 15) << finding.message;
    EXPECT_NE(finding.message.find("unknown version"), std::string::npos) << finding.message;
  }
  // The whole batch read as a version-2 one (its leaves taken for canonical ones): found at its
  // first record (whose bytes may then even decode, as another record).
  StoredBatch as_version2 = original;
  as_version2.records[0] = store::kAuditBatchVersion2;
  stored.Replace(11, as_version2);
  const Finding finding = Verify();
  EXPECT_FALSE(finding.kind.empty());
  EXPECT_EQ(finding.sequence, 11) << finding.message;
}

// Records 1..30 with canonical leaves (version-2 batches), then 31..40 with compact leaves
// (version 3): one log, verified, proved, exported and queried across both, and tampering in
// either part located.
TEST_F(OlderLogTest, OldAndNewRecordsMixedAreOneLog) {
  Append(31, 40);
  const std::vector<StoredBatch> batches = StoredBatches(dir_).List();
  ASSERT_EQ(batches.size(), 4u);
  EXPECT_EQ(batches[2].records.front(), store::kAuditBatchVersion2);
  EXPECT_EQ(batches[3].records.front(), store::kAuditBatchVersion3);
  ASSERT_TRUE(Verify().kind.empty()) << Verify().message;
  EXPECT_EQ(last_report_.records, 40);
  EXPECT_EQ(last_report_.signed_size, 40);
  {
    auto store = store::OpenSqliteStore(dir_);
    ASSERT_TRUE(store.ok());
    auto rows = (*store)->ReadAuditRows(0, 100);
    ASSERT_TRUE(rows.ok());
    ASSERT_EQ(rows->size(), 40u);
    // Every export line is the canonical record plus its leaf input, which hashes to the
    // stored leaf hash: a compact leaf for the new records, the record's own text for the old.
    std::ostringstream exported;
    auto count = ExportRecords(**store, 0, 0, exported);
    ASSERT_TRUE(count.ok()) << count.status().ToString();
    EXPECT_EQ(*count, 40);
    std::istringstream lines(exported.str());
    std::string line;
    for (const store::AuditRow& row : *rows) {
      ASSERT_TRUE(std::getline(lines, line));
      const std::string marker = ",\"leaf_input\":\"";
      const size_t at = line.rfind(marker);
      ASSERT_NE(at, std::string::npos) << line;
      const std::string canonical = line.substr(0, at) + "}";
      auto record = DecodeRecord(canonical);
      ASSERT_TRUE(record.ok()) << record.status().ToString() << " " << canonical;
      EXPECT_EQ(record->sequence, row.sequence);
      auto input =
          Base64Decode(line.substr(at + marker.size(), line.size() - at - marker.size() - 2));
      ASSERT_TRUE(input.ok()) << line;
      EXPECT_EQ(HashHex(LeafHash(DigestAlgorithm::kSha256, *input)), row.leaf_hash) << line;
      if (row.sequence <= 30) {
        EXPECT_EQ(*input, canonical);
      } else {
        ASSERT_EQ(input->front(), kCompactLeafVersion);
        AuditRecord held;
        ASSERT_TRUE(DecodeCompactLeaf(*input, held).ok());
        EXPECT_EQ(EncodeRecord(held), canonical);
      }
    }
    // Proofs of old and new records check offline; one whose record was changed does not.
    for (const int64_t sequence : {15, 35}) {
      auto proof = ProveInclusion(**store, DigestAlgorithm::kSha256, sequence, std::nullopt);
      ASSERT_TRUE(proof.ok()) << proof.status().ToString();
      EXPECT_NE(proof->find("\"leaf_input\":"), std::string::npos);
      auto checked = CheckInclusionProof(*proof, {key_.Public()});
      ASSERT_TRUE(checked.ok()) << checked.status().ToString();
      EXPECT_EQ(checked->sequence, sequence);
      std::string forged = *proof;
      const size_t status = forged.find("\\\"status\\\":200");
      ASSERT_NE(status, std::string::npos) << forged;
      forged.replace(status, 14, "\\\"status\\\":403");
      EXPECT_FALSE(CheckInclusionProof(forged, {key_.Public()}).ok()) << sequence;
    }
    // The admin query's filters find records in both.
    auto bobs = (*store)->QueryAuditRows({.principal = "bob", .after_sequence = 26, .limit = 4});
    ASSERT_TRUE(bobs.ok());
    ASSERT_EQ(bobs->size(), 4u);
    EXPECT_EQ(bobs->front().sequence, 27);
    EXPECT_EQ(bobs->back().sequence, 33);
    for (const store::AuditRow& row : *bobs) {
      auto record = DecodeCompactRow(row);
      ASSERT_TRUE(record.ok()) << record.status().ToString();
      EXPECT_EQ(record->principal, "bob");
    }
  }
  // Tampering in either part is located.
  StoredBatches stored(dir_);
  const StoredBatch old_batch = stored.Holding(25);
  std::vector<store::AuditRow> rows = StoredBatches::Unpack(old_batch);
  rows[4].record.replace(rows[4].record.find("\"status\":200"), 12, "\"status\":404");
  stored.Repack(21, rows);
  EXPECT_EQ(stored.Holding(25).records.front(), store::kAuditBatchVersion2);
  Finding finding = Verify();
  EXPECT_EQ(finding.kind, "edited") << finding.message;
  EXPECT_EQ(finding.sequence, 25) << finding.message;
  stored.Replace(21, old_batch);
  ASSERT_TRUE(Verify().kind.empty()) << Verify().message;
  rows = StoredBatches::Unpack(stored.Holding(35));
  std::swap(rows[4], rows[5]);
  stored.Repack(31, rows);
  EXPECT_EQ(stored.Holding(35).records.front(), store::kAuditBatchVersion3);
  finding = Verify();
  EXPECT_EQ(finding.kind, "reordered") << finding.message;
  EXPECT_EQ(finding.sequence, 35) << finding.message;
}

// Batches written in layout version 1 (before version 2) still verify, are read with version-3
// batches appended after them, and tampering inside them is still located.
TEST_F(OlderLogTest, Version1BatchesStillVerifyBesideVersion3Ones) {
  StoredBatches(dir_).ToVersion1();
  for (const StoredBatch& batch : StoredBatches(dir_).List()) {
    EXPECT_EQ(batch.records.front(), store::kAuditBatchVersion1);
  }
  ASSERT_TRUE(Verify().kind.empty()) << Verify().message;
  Append(31, 40);
  const std::vector<StoredBatch> batches = StoredBatches(dir_).List();
  ASSERT_EQ(batches.size(), 4u);
  EXPECT_EQ(batches.back().records.front(), store::kAuditBatchVersion3);
  ASSERT_TRUE(Verify().kind.empty()) << Verify().message;
  EXPECT_EQ(last_report_.records, 40);
  {
    auto store = store::OpenSqliteStore(dir_);
    ASSERT_TRUE(store.ok());
    std::ostringstream exported;
    auto count = ExportRecords(**store, 0, 0, exported);
    ASSERT_TRUE(count.ok()) << count.status().ToString();
    EXPECT_EQ(*count, 40);
    EXPECT_NE(exported.str().find("\"request_id\":\"r35\""), std::string::npos);
    EXPECT_NE(exported.str().find("\"request_id\":\"r5\""), std::string::npos);
  }
  StoredBatches stored(dir_);
  std::vector<store::AuditRow> rows = StoredBatches::Unpack(stored.Holding(15));
  auto& record = rows[4].record;
  record.replace(record.find("\"status\":200"), 12, "\"status\":404");
  stored.Repack(11, rows);
  EXPECT_EQ(stored.Holding(15).records.front(), store::kAuditBatchVersion1);
  const Finding finding = Verify();
  EXPECT_EQ(finding.kind, "edited") << finding.message;
  EXPECT_EQ(finding.sequence, 15) << finding.message;
}

TEST_P(BatchTamperTest, AWholeBatchDeletedIsFound) {
  StoredBatches(dir_).Execute("DELETE FROM audit_batches WHERE first_sequence = 11");
  const Finding finding = Verify();
  EXPECT_EQ(finding.kind, "deleted") << finding.message;
  EXPECT_EQ(finding.sequence, 11) << finding.message;
}

TEST_P(BatchTamperTest, GarbageInABlobIsAFindingNotACrash) {
  StoredBatches stored(dir_);
  stored.Replace(11, StoredBatch{11, 20, std::string("\x01\xff\xff\xff\xff\xff\x7f", 7)});
  EXPECT_EQ(Verify().sequence, 11);
  stored.Replace(11, StoredBatch{11, 20, ""});
  EXPECT_EQ(Verify().sequence, 11);
  stored.Replace(11, StoredBatch{11, 20, std::string(5000, '\x01')});
  EXPECT_EQ(Verify().sequence, 11);
}

// Records 1..30 as per-record rows (a store written before migration 7), then 31..50 appended
// as batches of compact leaves: one log across both layouts.
TEST_F(OlderLogTest, OldRecordRowsAndNewBatchesAreOneLog) {
  StoredBatches(dir_).MoveToRecordRows();
  EXPECT_TRUE(StoredBatches(dir_).List().empty());
  ASSERT_TRUE(Verify().kind.empty()) << Verify().message;
  Append(31, 50);
  EXPECT_EQ(StoredBatches(dir_).List().size(), 2u);
  ASSERT_TRUE(Verify().kind.empty()) << Verify().message;
  EXPECT_EQ(last_report_.records, 50);
  EXPECT_EQ(last_report_.signed_size, 50);

  auto store = store::OpenSqliteStore(dir_);
  ASSERT_TRUE(store.ok());
  // Reads page across the two: 25..34.
  auto rows = (*store)->ReadAuditRows(24, 10);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 10u);
  for (size_t i = 0; i < rows->size(); ++i) EXPECT_EQ((*rows)[i].sequence, 25 + int64_t(i));
  // Queries by principal, trace id and time find records in both.
  auto bobs = (*store)->QueryAuditRows({.principal = "bob", .after_sequence = 20, .limit = 8});
  ASSERT_TRUE(bobs.ok());
  ASSERT_EQ(bobs->size(), 8u);
  EXPECT_EQ(bobs->front().sequence, 21);
  EXPECT_EQ(bobs->back().sequence, 35);
  auto traced = (*store)->QueryAuditRows({.trace_id = "trace-44"});
  ASSERT_TRUE(traced.ok());
  ASSERT_EQ(traced->size(), 1u);
  EXPECT_EQ(traced->front().sequence, 44);
  const int64_t base = 1'800'000'000'000'000'000;
  auto timed = (*store)->QueryAuditRows(
      {.from_unix_ns = base + 29'000'000'000, .to_unix_ns = base + 33'000'000'000});
  ASSERT_TRUE(timed.ok());
  ASSERT_EQ(timed->size(), 4u);
  EXPECT_EQ(timed->front().sequence, 29);
  EXPECT_EQ(timed->back().sequence, 32);
  // Proofs of records in either layout.
  for (int64_t sequence : {7, 42}) {
    auto proof = ProveInclusion(**store, DigestAlgorithm::kSha256, sequence, std::nullopt);
    ASSERT_TRUE(proof.ok()) << proof.status().ToString();
    EXPECT_NE(proof->find("\"sequence\":" + std::to_string(sequence)), std::string::npos);
  }
  store->reset();

  // Tampering in either layout is still located.
  StoredBatches(dir_).Execute("UPDATE audit_records SET tenant = 'globex' WHERE sequence = 8");
  EXPECT_EQ(Verify().sequence, 8);
  StoredBatches(dir_).Execute("UPDATE audit_records SET tenant = 'acme' WHERE sequence = 8");
  ASSERT_TRUE(Verify().kind.empty());
  StoredBatches stored(dir_);
  std::vector<store::AuditRow> rows41 = StoredBatches::Unpack(stored.Holding(44));
  std::swap(rows41[3], rows41[4]);
  stored.Repack(41, rows41);
  const Finding finding = Verify();
  EXPECT_EQ(finding.kind, "reordered") << finding.message;
  EXPECT_EQ(finding.sequence, 44) << finding.message;
}

// A store as written before migration 7 (schema version 6, its log in per-record rows) opens,
// migrates, keeps verifying and appends in batches.
TEST_F(OlderLogTest, AStoreWithOldRowsMigratesToBatches) {
  {
    StoredBatches stored(dir_);
    stored.MoveToRecordRows();
    // Migration 6 (vector stores) stays applied: the store is as migration 6 left it.
    stored.Execute("DROP TABLE audit_batches; DELETE FROM schema_version WHERE version > 6");
  }
  Append(31, 40);  // opening the store runs migration 7
  ASSERT_TRUE(Verify().kind.empty()) << Verify().message;
  EXPECT_EQ(last_report_.records, 40);
  const std::vector<StoredBatch> batches = StoredBatches(dir_).List();
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].first_sequence, 31);
  EXPECT_EQ(batches[0].last_sequence, 40);
}

}  // namespace
}  // namespace rampart::audit

namespace rampart::audit {
namespace {

// A store without batch rows of its own (the tests' in-memory one) takes the writer's packed
// batches through Store::AppendAuditBatch's unpacking default: the log is the same.
TEST(AuditLogOnAStoreWithoutBatches, AppendsVerifyAndMalformedBatchesAreRefused) {
  testing::MemoryStore store;
  auto key = crypto::SigningKey::Generate(crypto::SignatureAlgorithm::kEd25519);
  ASSERT_TRUE(key.ok());
  {
    AuditOptions options;
    options.sync = true;
    auto log = AuditLog::Open(store, options, *key, "memory");
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    for (int i = 1; i <= 25; ++i) {
      AuditRecord record;
      record.request_id = fmt::format("r{}", i);
      (*log)->Append(std::move(record), [](Status status) { EXPECT_TRUE(status.ok()); });
    }
    ASSERT_TRUE((*log)->Flush(/*checkpoint=*/true).ok());
  }
  auto report = VerifyLog(store, {.keys = {key->Public()}});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_FALSE(report->problem.has_value()) << report->problem->message;
  EXPECT_EQ(report->records, 25);
  store::AuditBatch malformed{.first_sequence = 26, .last_sequence = 27, .records = "\x01"};
  EXPECT_EQ(store.AppendAuditBatch(malformed).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rampart::audit

namespace rampart::audit {
namespace {

// A copy of record 12 added as a per-record row: two stored records with one sequence. (A
// per-record row holds the canonical encoding, so the copy of a compact leaf's record fails its
// leaf hash, read first; a canonical one passes, and the batch's record 12 is then the second.)
TEST_P(BatchTamperTest, ARecordRowAddedBesideABatchIsFound) {
  StoredBatches stored(dir_);
  const store::AuditRow copy = StoredBatches::Unpack(stored.Holding(12))[1];
  ASSERT_EQ(copy.record.find('\''), std::string::npos);
  stored.Execute(
      "INSERT INTO audit_records (sequence, time_unix_ns, tenant, principal, trace_id, "
      "request_id, action, record, leaf_hash, chain_hash) VALUES (12, " +
      std::to_string(copy.time_unix_ns) + ", '" + copy.tenant + "', '" + copy.principal + "', '" +
      copy.trace_id + "', '" + copy.request_id + "', '" + copy.action + "', '" + copy.record +
      "', '" + copy.leaf_hash + "', '" + copy.chain_hash + "')");
  const Finding finding = Verify();
  EXPECT_EQ(finding.kind, CanonicalLeaves() ? "inserted" : "edited") << finding.message;
  EXPECT_EQ(finding.sequence, 12) << finding.message;
}

}  // namespace
}  // namespace rampart::audit
