// Tampering with a real SQLite file, directly with SQL as someone with the file would: each kind
// (an edited field, a deleted record, an inserted one, two swapped, a truncated tail, a changed
// checkpoint signature, and an edit re-hashed all the way down the chain) is detected by
// VerifyLog and located at the record or checkpoint where it happened. The log here is held in
// per-record rows (migration 3's audit_records, as stores written before migration 7 hold it);
// batch_tamper_test.cc does the same inside migration 7's batch rows.

#include <sqlite3.h>
#include <stdlib.h>

#include <gtest/gtest.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>

#include "audit/audit_log.h"
#include "audit/log_reader.h"
#include "audit/merkle.h"
#include "audit/record_codec.h"
#include "audit/stored_batches.h"
#include "store/store.h"

namespace rampart::audit {
namespace {

class TamperTest : public ::testing::Test {
 protected:
  // A log of 30 records with checkpoints at 10, 20 and 30.
  void SetUp() override {
    char pattern[] = "/tmp/rampart-tamper-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    auto key = crypto::SigningKey::Generate(crypto::SignatureAlgorithm::kSm2Sm3);
    ASSERT_TRUE(key.ok()) << key.status().ToString();
    key_ = *key;
    auto store = store::OpenSqliteStore(dir_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    AuditOptions options;
    options.sync = true;
    options.checkpoint_every_records = 1000000;
    // Per-record rows (as stores written before migration 7 hold) have canonical leaves.
    options.canonical_leaves = true;
    auto log = AuditLog::Open(**store, options, key_, "tamper-test");
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    for (int i = 1; i <= 30; ++i) {
      AuditRecord record;
      record.tenant = "acme";
      record.principal = "alice";
      record.request_id = "r" + std::to_string(i);
      record.action = "model:infer";
      (*log)->Append(std::move(record), [](Status) {});
      if (i % 10 == 0) {
        ASSERT_TRUE((*log)->Flush(/*checkpoint=*/true).ok());
      }
    }
    ASSERT_TRUE(Verify().kind.empty());
    log->reset();
    test_support::StoredBatches(dir_).MoveToRecordRows();
    ASSERT_TRUE(Verify().kind.empty());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void Sql(const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir_ + "/rampart.db").c_str(), &db), SQLITE_OK);
    char* error = nullptr;
    const int result = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
    EXPECT_EQ(result, SQLITE_OK) << sql << ": " << (error != nullptr ? error : "");
    sqlite3_free(error);
    sqlite3_close(db);
  }

  // The first finding of a fresh verification ("" when sound).
  Finding Verify() {
    auto store = store::OpenSqliteStore(dir_);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    if (!store.ok()) return {.kind = "error"};
    auto report = VerifyLog(**store, {.keys = {key_.Public()}});
    EXPECT_TRUE(report.ok()) << report.status().ToString();
    if (!report.ok()) return {.kind = "error"};
    return report->problem.value_or(Finding{});
  }

  std::string dir_;
  crypto::SigningKey key_;
};

TEST_F(TamperTest, AnEditedFieldIsFoundAtItsRecord) {
  Sql("UPDATE audit_records SET record = replace(record, '\"principal\":\"alice\"', "
      "'\"principal\":\"mallory\"'), principal = 'mallory' WHERE sequence = 7");
  const Finding finding = Verify();
  EXPECT_EQ(finding.kind, "edited") << finding.message;
  EXPECT_EQ(finding.sequence, 7) << finding.message;
  EXPECT_NE(finding.message.find("record 7"), std::string::npos) << finding.message;
}

TEST_F(TamperTest, AnEditedQueryColumnIsFound) {
  Sql("UPDATE audit_records SET tenant = 'globex' WHERE sequence = 8");
  const Finding finding = Verify();
  EXPECT_EQ(finding.kind, "edited") << finding.message;
  EXPECT_EQ(finding.sequence, 8);
}

TEST_F(TamperTest, ADeletedRecordIsFound) {
  Sql("DELETE FROM audit_records WHERE sequence = 12");
  const Finding finding = Verify();
  EXPECT_EQ(finding.kind, "deleted") << finding.message;
  EXPECT_EQ(finding.sequence, 12);
  EXPECT_EQ(finding.message, "record 12 was deleted");
}

TEST_F(TamperTest, ADeletionHiddenByRenumberingIsFound) {
  Sql("DELETE FROM audit_records WHERE sequence = 12;"
      "UPDATE audit_records SET sequence = -(sequence - 1) WHERE sequence > 12;"
      "UPDATE audit_records SET sequence = -sequence WHERE sequence < 0");
  const Finding finding = Verify();
  EXPECT_EQ(finding.kind, "deleted") << finding.message;
  EXPECT_EQ(finding.sequence, 12);
}

TEST_F(TamperTest, AnInsertedRecordIsFound) {
  // Records 15.. move up by one; a copy of record 14 goes in at 15.
  Sql("UPDATE audit_records SET sequence = -(sequence + 1) WHERE sequence >= 15;"
      "UPDATE audit_records SET sequence = -sequence WHERE sequence < 0;"
      "INSERT INTO audit_records SELECT 15, time_unix_ns, tenant, principal, trace_id, "
      "request_id, action, record, leaf_hash, chain_hash FROM audit_records WHERE sequence = 14");
  const Finding finding = Verify();
  EXPECT_EQ(finding.kind, "inserted") << finding.message;
  EXPECT_EQ(finding.sequence, 15);
}

TEST_F(TamperTest, TwoSwappedRecordsAreFound) {
  Sql("UPDATE audit_records SET sequence = -5 WHERE sequence = 5;"
      "UPDATE audit_records SET sequence = 5 WHERE sequence = 6;"
      "UPDATE audit_records SET sequence = 6 WHERE sequence = -5");
  const Finding finding = Verify();
  EXPECT_EQ(finding.kind, "reordered") << finding.message;
  EXPECT_EQ(finding.sequence, 5);
  EXPECT_NE(finding.message.find("records 5 and 6 were swapped"), std::string::npos)
      << finding.message;
}

TEST_F(TamperTest, ATruncatedTailIsFound) {
  Sql("DELETE FROM audit_records WHERE sequence > 25");
  const Finding finding = Verify();
  EXPECT_EQ(finding.kind, "truncated") << finding.message;
  EXPECT_EQ(finding.sequence, 26);
  // A log reopened on the truncated store refuses to append after the hole.
  auto store = store::OpenSqliteStore(dir_);
  ASSERT_TRUE(store.ok());
  auto log = AuditLog::Open(**store, AuditOptions(), key_, "tamper-test");
  EXPECT_EQ(log.status().code(), StatusCode::kFailedPrecondition) << log.status().ToString();
}

TEST_F(TamperTest, AChangedCheckpointSignatureIsFound) {
  Sql("UPDATE audit_checkpoints SET signature = (SELECT signature FROM audit_checkpoints "
      "WHERE tree_size = 10) WHERE tree_size = 20");
  const Finding finding = Verify();
  EXPECT_EQ(finding.kind, "checkpoint") << finding.message;
  EXPECT_EQ(finding.sequence, 20);
  Sql("UPDATE audit_checkpoints SET signature = 'not base64!' WHERE tree_size = 10");
  EXPECT_EQ(Verify().sequence, 10);
}

TEST_F(TamperTest, AnEditRehashedDownTheWholeChainIsCaughtByTheSignedRoot) {
  // An attacker who knows the format: edit record 7 and recompute its leaf and every chain hash
  // after it, so that records and chain agree. Only the signed checkpoint at 10 can tell.
  auto store = store::OpenSqliteStore(dir_);
  ASSERT_TRUE(store.ok());
  auto rows = (*store)->ReadAuditRows(0, 100);
  ASSERT_TRUE(rows.ok());
  Digest chain{};
  std::string sql;
  for (const store::AuditRow& row : *rows) {
    std::string text = row.record;
    if (row.sequence == 7) {
      auto record = DecodeRecord(text);
      ASSERT_TRUE(record.ok());
      record->allowed = false;
      text = EncodeRecord(*record);
    }
    const Digest leaf = LeafHash(DigestAlgorithm::kSha256, text);
    chain = ChainHash(DigestAlgorithm::kSha256, chain, leaf);
    if (row.sequence >= 7) {
      sql += "UPDATE audit_records SET record = '" + text + "', leaf_hash = '" + HashHex(leaf) +
             "', chain_hash = '" + HashHex(chain) +
             "' WHERE sequence = " + std::to_string(row.sequence) + ";";
    }
  }
  store->reset();
  Sql(sql);
  const Finding finding = Verify();
  EXPECT_EQ(finding.kind, "inconsistent") << finding.message;
  EXPECT_EQ(finding.sequence, 10);
}

TEST_F(TamperTest, GarbageInTheRecordColumnIsAFindingNotACrash) {
  Sql("UPDATE audit_records SET record = '{\"v\":1' WHERE sequence = 3");
  EXPECT_EQ(Verify().sequence, 3);
  Sql("UPDATE audit_records SET record = x'00ff' WHERE sequence = 2");
  EXPECT_EQ(Verify().sequence, 2);
  Sql("UPDATE audit_checkpoints SET frontier = 'zz', chain_hash = '' WHERE tree_size = 30");
  EXPECT_EQ(Verify().sequence, 2);  // still the first finding
}

}  // namespace
}  // namespace rampart::audit
