#pragma once

// Reaching into a SQLite store's audit tables as someone holding the file would: the batch rows
// of migration 7 (read, rewrite, remove) and a conversion of every batch into the per-record rows
// of migration 3, which the stores written before migration 7 hold (so that tests can build such
// a store). Test-only.

#include <sqlite3.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "audit/record_codec.h"
#include "audit/record_compact.h"
#include "store/audit_batches.h"
#include "store/store.h"

namespace rampart::audit::test_support {

struct StoredBatch {
  int64_t first_sequence = 0;
  int64_t last_sequence = 0;
  std::string records;  // the blob
};

class StoredBatches {
 public:
  explicit StoredBatches(const std::string& dir) {
    EXPECT_EQ(sqlite3_open((dir + "/rampart.db").c_str(), &db_), SQLITE_OK);
  }
  ~StoredBatches() { sqlite3_close(db_); }
  StoredBatches(const StoredBatches&) = delete;
  StoredBatches& operator=(const StoredBatches&) = delete;

  std::vector<StoredBatch> List() {
    std::vector<StoredBatch> batches;
    sqlite3_stmt* read = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_,
                                 "SELECT first_sequence, last_sequence, records FROM "
                                 "audit_batches ORDER BY first_sequence",
                                 -1, &read, nullptr),
              SQLITE_OK);
    while (sqlite3_step(read) == SQLITE_ROW) {
      const auto* bytes = static_cast<const char*>(sqlite3_column_blob(read, 2));
      batches.push_back({sqlite3_column_int64(read, 0), sqlite3_column_int64(read, 1),
                         std::string(bytes, static_cast<size_t>(sqlite3_column_bytes(read, 2)))});
    }
    sqlite3_finalize(read);
    return batches;
  }

  // The batch holding `sequence`.
  StoredBatch Holding(int64_t sequence) {
    for (StoredBatch& batch : List()) {
      if (batch.first_sequence <= sequence && sequence <= batch.last_sequence) return batch;
    }
    ADD_FAILURE() << "no batch holds record " << sequence;
    return {};
  }

  // The records of a batch, unpacked, as canonical rows (a version-2 or 3 batch's expanded; a
  // version-3 row's leaf hash does not cover the canonical encoding it then holds).
  static std::vector<store::AuditRow> Unpack(const StoredBatch& batch) {
    std::vector<store::AuditRow> rows;
    store::internal::UnpackAuditBatch(batch.first_sequence, batch.records, 0, rows);
    for (store::AuditRow& row : rows) {
      const Status expanded = ExpandAuditRow(row);
      EXPECT_TRUE(expanded.ok()) << expanded.ToString();
    }
    return rows;
  }

  // Canonical rows (Unpack's, edited as a test likes) in compact form again, at the places
  // first_sequence, first_sequence + 1, ... of a version-2 batch (of a version-3 batch when
  // `compact_leaf`): the records' own fields come from the rows' query fields (which such a
  // batch does not hold twice).
  static std::vector<store::AuditRow> Compact(int64_t first_sequence,
                                              const std::vector<store::AuditRow>& rows,
                                              bool compact_leaf = false) {
    std::vector<store::AuditRow> compact;
    for (const store::AuditRow& row : rows) {
      Result<AuditRecord> record = DecodeRecord(row.record);
      EXPECT_TRUE(record.ok()) << record.status().ToString();
      if (!record.ok()) return {};
      store::AuditRow made = row;
      made.sequence = first_sequence + static_cast<int64_t>(compact.size());
      made.record.clear();
      if (compact_leaf) {
        std::string leaf;
        AppendCompactLeaf(*record, made.sequence, leaf, made.record);
      } else {
        AppendCompactRecord(*record, made.sequence, made.record);
      }
      made.compact = true;
      made.compact_leaf = compact_leaf;
      compact.push_back(std::move(made));
    }
    return compact;
  }

  // Replaces the batch starting at `first_sequence` by `batch` (its blob and range as given).
  void Replace(int64_t first_sequence, const StoredBatch& batch) {
    Execute("DELETE FROM audit_batches WHERE first_sequence = " + std::to_string(first_sequence));
    sqlite3_stmt* insert = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db_,
                                 "INSERT INTO audit_batches (first_sequence, last_sequence, "
                                 "min_time_unix_ns, max_time_unix_ns, records) VALUES (?1, ?2, 0, "
                                 "9223372036854775807, ?3)",
                                 -1, &insert, nullptr),
              SQLITE_OK);
    sqlite3_bind_int64(insert, 1, batch.first_sequence);
    sqlite3_bind_int64(insert, 2, batch.last_sequence);
    sqlite3_bind_blob(insert, 3, batch.records.data(), static_cast<int>(batch.records.size()),
                      SQLITE_TRANSIENT);
    EXPECT_EQ(sqlite3_step(insert), SQLITE_DONE) << sqlite3_errmsg(db_);
    sqlite3_finalize(insert);
  }

  // Packs `rows` (their sequences as given) into the blob of the batch starting at
  // `first_sequence`, keeping its range: a batch edited, with records removed, added or moved.
  // The blob keeps its layout: version 3 or 2 (the rows made compact again) or 1.
  void Repack(int64_t first_sequence, const std::vector<store::AuditRow>& rows) {
    const StoredBatch old = Holding(first_sequence);
    const char version = old.records.empty() ? store::kAuditBatchVersion1 : old.records.front();
    const std::vector<store::AuditRow> packing =
        version == store::kAuditBatchVersion1
            ? rows
            : Compact(first_sequence, rows, version == store::kAuditBatchVersion3);
    auto packed = store::internal::PackAuditBatch(packing.data(), packing.size());
    ASSERT_TRUE(packed.ok()) << packed.status().ToString();
    Replace(first_sequence, {old.first_sequence, old.last_sequence, packed->records});
  }

  // Rewrites every batch in layout version 1 (the record's canonical encoding and the query
  // fields' copies), as the writer stored them before version 2. For a log written with
  // canonical leaves (version-2 batches) only.
  void ToVersion1() {
    for (const StoredBatch& batch : List()) {
      const std::vector<store::AuditRow> rows = Unpack(batch);
      auto packed = store::internal::PackAuditBatch(rows.data(), rows.size());
      ASSERT_TRUE(packed.ok()) << packed.status().ToString();
      ASSERT_EQ(packed->records.front(), store::kAuditBatchVersion1);
      Replace(batch.first_sequence, {batch.first_sequence, batch.last_sequence, packed->records});
    }
  }

  // Moves every batch's records into per-record rows of migration 3's audit_records. For a log
  // written with canonical leaves only.
  void MoveToRecordRows() {
    Execute("BEGIN");
    sqlite3_stmt* insert = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db_,
                                 "INSERT INTO audit_records (sequence, time_unix_ns, tenant, "
                                 "principal, trace_id, request_id, action, record, leaf_hash, "
                                 "chain_hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                                 -1, &insert, nullptr),
              SQLITE_OK);
    for (const StoredBatch& batch : List()) {
      for (const store::AuditRow& row : Unpack(batch)) {
        sqlite3_reset(insert);
        sqlite3_bind_int64(insert, 1, row.sequence);
        sqlite3_bind_int64(insert, 2, row.time_unix_ns);
        const std::string* texts[] = {&row.tenant, &row.principal, &row.trace_id,  &row.request_id,
                                      &row.action, &row.record,    &row.leaf_hash, &row.chain_hash};
        for (int i = 0; i < 8; ++i) {
          sqlite3_bind_text(insert, 3 + i, texts[i]->data(), static_cast<int>(texts[i]->size()),
                            SQLITE_TRANSIENT);
        }
        EXPECT_EQ(sqlite3_step(insert), SQLITE_DONE) << sqlite3_errmsg(db_);
      }
    }
    sqlite3_finalize(insert);
    Execute("DELETE FROM audit_batches");
    Execute("COMMIT");
  }

  void Execute(const std::string& sql) {
    char* error = nullptr;
    EXPECT_EQ(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK)
        << sql << ": " << (error != nullptr ? error : "");
    sqlite3_free(error);
  }

 private:
  sqlite3* db_ = nullptr;
};

}  // namespace rampart::audit::test_support
