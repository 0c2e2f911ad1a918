// Store's vector store methods (store.h), written once in SQL both backends run (sql_runner.h).

#include <optional>
#include <string>
#include <vector>

#include "store/records.h"
#include "store/sql_runner.h"
#include "store/store.h"

namespace rampart::store {
namespace {

using internal::SqlRows;
using internal::SqlRunner;
using internal::ToInt;
using Values = std::vector<SqlRunner::Value>;

#define RAMPART_VS_COLUMNS \
  "tenant, id, name, metadata, created_unix, last_active_unix, expires_days, embedder"
#define RAMPART_VS_FILE_COLUMNS                                                            \
  "tenant, store_id, file_id, filename, created_unix, status, error_code, error_message, " \
  "attributes, chunking, batch_id, claimed_by, lease_until_unix, usage_bytes, redact_pii"
#define RAMPART_VS_CHUNK_COLUMNS                                                              \
  "store_id, file_id, chunk_index, body, sealing, heading_path, page, begin_byte, end_byte, " \
  "embedding"

VectorStoreRow ReadStore(const std::vector<std::string>& c) {
  return VectorStoreRow{.tenant = c[0],
                        .id = c[1],
                        .name = c[2],
                        .metadata = c[3],
                        .created_unix = ToInt(c[4]),
                        .last_active_unix = ToInt(c[5]),
                        .expires_days = ToInt(c[6]),
                        .embedder = c[7]};
}

VectorStoreFileRow ReadFile(const std::vector<std::string>& c) {
  return VectorStoreFileRow{.tenant = c[0],
                            .store_id = c[1],
                            .file_id = c[2],
                            .filename = c[3],
                            .created_unix = ToInt(c[4]),
                            .status = c[5],
                            .error_code = c[6],
                            .error_message = c[7],
                            .attributes = c[8],
                            .chunking = c[9],
                            .batch_id = c[10],
                            .claimed_by = c[11],
                            .lease_until_unix = ToInt(c[12]),
                            .usage_bytes = ToInt(c[13]),
                            .redact_pii = ToInt(c[14]) != 0};
}

Result<VectorStoreChunkRow> ReadChunk(const std::vector<std::string>& c) {
  ASSIGN_OR_RETURN(std::string body, internal::DecodeBytes(c[3]));
  ASSIGN_OR_RETURN(std::string embedding, internal::DecodeBytes(c[9]));
  return VectorStoreChunkRow{.store_id = c[0],
                             .file_id = c[1],
                             .chunk_index = ToInt(c[2]),
                             .text = std::move(body),
                             .sealing = c[4],
                             .heading_path = c[5],
                             .page = ToInt(c[6]),
                             .begin = ToInt(c[7]),
                             .end = ToInt(c[8]),
                             .embedding = std::move(embedding)};
}

Values FileValues(const VectorStoreFileRow& f) {
  return {
      f.tenant,   f.store_id,   f.file_id,          f.filename,    f.created_unix,
      f.status,   f.error_code, f.error_message,    f.attributes,  f.chunking,
      f.batch_id, f.claimed_by, f.lease_until_unix, f.usage_bytes, int64_t{f.redact_pii ? 1 : 0}};
}

Status InsertFile(SqlRunner& sql, const VectorStoreFileRow& file) {
  return sql
      .Run("INSERT INTO vector_store_files (" RAMPART_VS_FILE_COLUMNS
           ") VALUES (?1, ?2, ?3, ?4, CAST(?5 AS BIGINT), ?6, ?7, ?8, ?9, ?10, ?11, ?12, "
           "CAST(?13 AS BIGINT), CAST(?14 AS BIGINT), CAST(?15 AS BIGINT)) ON CONFLICT (store_id, "
           "file_id) DO NOTHING",
           FileValues(file))
      .status();
}

// Takes the next sequence (the row lock orders writers by commit) and records the change.
Status AppendChange(SqlRunner& sql, const std::string& store_id, const std::string& file_id,
                    const std::string& kind) {
  RETURN_IF_ERROR(
      sql.Run("UPDATE vector_store_sequence SET value = value + 1 WHERE id = 1", {}).status());
  return sql
      .Run(
          "INSERT INTO vector_store_changes (sequence, store_id, file_id, kind) SELECT value, "
          "?1, ?2, ?3 FROM vector_store_sequence WHERE id = 1",
          {store_id, file_id, kind})
      .status();
}

Result<bool> StoreExists(SqlRunner& sql, const std::string& tenant, const std::string& id) {
  ASSIGN_OR_RETURN(
      const SqlRows found,
      sql.Run("SELECT 1 FROM vector_stores WHERE id = ?1 AND tenant = ?2", {id, tenant}));
  return !found.rows.empty();
}

}  // namespace

Status Store::WithSql(bool, const std::function<Status(internal::SqlRunner&)>&) {
  return Unimplemented("this store keeps no vector stores");
}

Status Store::CreateVectorStore(const VectorStoreRow& row,
                                const std::vector<VectorStoreFileRow>& files) {
  return WithSql(true, [&](SqlRunner& sql) -> Status {
    ASSIGN_OR_RETURN(const SqlRows inserted,
                     sql.Run("INSERT INTO vector_stores (" RAMPART_VS_COLUMNS
                             ") VALUES (?1, ?2, ?3, ?4, CAST(?5 AS BIGINT), CAST(?6 AS BIGINT), "
                             "CAST(?7 AS BIGINT), ?8) ON CONFLICT (id) DO NOTHING",
                             {row.tenant, row.id, row.name, row.metadata, row.created_unix,
                              row.last_active_unix, row.expires_days, row.embedder}));
    if (inserted.affected == 0) return AlreadyExists("vector store '{}' already exists", row.id);
    for (const VectorStoreFileRow& file : files) RETURN_IF_ERROR(InsertFile(sql, file));
    return Status::Ok();
  });
}

Result<std::optional<VectorStoreRow>> Store::GetVectorStore(const std::string& tenant,
                                                            const std::string& id) {
  std::optional<VectorStoreRow> row;
  RETURN_IF_ERROR(WithSql(false, [&](SqlRunner& sql) -> Status {
    ASSIGN_OR_RETURN(
        const SqlRows found,
        sql.Run("SELECT " RAMPART_VS_COLUMNS " FROM vector_stores WHERE id = ?1 AND tenant = ?2",
                {id, tenant}));
    if (!found.rows.empty()) row = ReadStore(found.rows.front());
    return Status::Ok();
  }));
  return row;
}

Result<std::vector<VectorStoreRow>> Store::ListVectorStores(const std::string& tenant) {
  std::vector<VectorStoreRow> rows;
  RETURN_IF_ERROR(WithSql(false, [&](SqlRunner& sql) -> Status {
    ASSIGN_OR_RETURN(const SqlRows found, sql.Run("SELECT " RAMPART_VS_COLUMNS
                                                  " FROM vector_stores WHERE tenant = ?1 OR ?2 = 1 "
                                                  "ORDER BY created_unix, id",
                                                  {tenant, int64_t{tenant.empty() ? 1 : 0}}));
    for (const auto& columns : found.rows) rows.push_back(ReadStore(columns));
    return Status::Ok();
  }));
  return rows;
}

Status Store::UpdateVectorStore(const VectorStoreRow& row) {
  return WithSql(true, [&](SqlRunner& sql) -> Status {
    ASSIGN_OR_RETURN(const SqlRows updated,
                     sql.Run("UPDATE vector_stores SET name = ?3, metadata = ?4, "
                             "last_active_unix = CAST(?5 AS BIGINT), expires_days = "
                             "CAST(?6 AS BIGINT) WHERE id = ?1 AND tenant = ?2",
                             {row.id, row.tenant, row.name, row.metadata, row.last_active_unix,
                              row.expires_days}));
    if (updated.affected == 0) return NotFound("vector store '{}' does not exist", row.id);
    return Status::Ok();
  });
}

Status Store::DeleteVectorStore(const std::string& tenant, const std::string& id) {
  return WithSql(true, [&](SqlRunner& sql) -> Status {
    ASSIGN_OR_RETURN(
        const SqlRows removed,
        sql.Run("DELETE FROM vector_stores WHERE id = ?1 AND tenant = ?2", {id, tenant}));
    if (removed.affected == 0) return NotFound("vector store '{}' does not exist", id);
    for (const char* table :
         {"vector_store_files", "vector_store_batches", "vector_store_chunks"}) {
      RETURN_IF_ERROR(
          sql.Run(std::string("DELETE FROM ") + table + " WHERE store_id = ?1", {id}).status());
    }
    return AppendChange(sql, id, "", "store_removed");
  });
}

Status Store::AddVectorStoreFiles(const std::optional<VectorStoreBatchRow>& batch,
                                  const std::vector<VectorStoreFileRow>& files) {
  return WithSql(true, [&](SqlRunner& sql) -> Status {
    for (const VectorStoreFileRow& file : files) {
      ASSIGN_OR_RETURN(const bool exists, StoreExists(sql, file.tenant, file.store_id));
      if (!exists) return NotFound("vector store '{}' does not exist", file.store_id);
      RETURN_IF_ERROR(InsertFile(sql, file));
    }
    if (batch.has_value()) {
      RETURN_IF_ERROR(sql.Run("INSERT INTO vector_store_batches (id, store_id, tenant, "
                              "created_unix) VALUES (?1, ?2, ?3, CAST(?4 AS BIGINT))",
                              {batch->id, batch->store_id, batch->tenant, batch->created_unix})
                          .status());
    }
    return Status::Ok();
  });
}

Result<std::optional<VectorStoreFileRow>> Store::GetVectorStoreFile(const std::string& tenant,
                                                                    const std::string& store_id,
                                                                    const std::string& file_id) {
  std::optional<VectorStoreFileRow> row;
  RETURN_IF_ERROR(WithSql(false, [&](SqlRunner& sql) -> Status {
    ASSIGN_OR_RETURN(const SqlRows found,
                     sql.Run("SELECT " RAMPART_VS_FILE_COLUMNS
                             " FROM vector_store_files WHERE store_id = ?1 AND file_id = ?2 AND "
                             "tenant = ?3",
                             {store_id, file_id, tenant}));
    if (!found.rows.empty()) row = ReadFile(found.rows.front());
    return Status::Ok();
  }));
  return row;
}

Result<std::vector<VectorStoreFileRow>> Store::ListVectorStoreFiles(const std::string& tenant,
                                                                    const std::string& store_id) {
  std::vector<VectorStoreFileRow> rows;
  RETURN_IF_ERROR(WithSql(false, [&](SqlRunner& sql) -> Status {
    ASSIGN_OR_RETURN(const SqlRows found,
                     sql.Run("SELECT " RAMPART_VS_FILE_COLUMNS
                             " FROM vector_store_files WHERE store_id = ?1 AND tenant = ?2 "
                             "ORDER BY created_unix, file_id",
                             {store_id, tenant}));
    for (const auto& columns : found.rows) rows.push_back(ReadFile(columns));
    return Status::Ok();
  }));
  return rows;
}

Status Store::UpdateVectorStoreFileAttributes(const std::string& tenant,
                                              const std::string& store_id,
                                              const std::string& file_id,
                                              const std::string& attributes) {
  return WithSql(true, [&](SqlRunner& sql) -> Status {
    ASSIGN_OR_RETURN(const SqlRows updated,
                     sql.Run("UPDATE vector_store_files SET attributes = ?4 WHERE store_id = ?1 "
                             "AND file_id = ?2 AND tenant = ?3",
                             {store_id, file_id, tenant, attributes}));
    if (updated.affected == 0) return NotFound("file '{}' is not in the vector store", file_id);
    return AppendChange(sql, store_id, file_id, "attributes");
  });
}

Status Store::RemoveVectorStoreFile(const std::string& tenant, const std::string& store_id,
                                    const std::string& file_id) {
  return WithSql(true, [&](SqlRunner& sql) -> Status {
    ASSIGN_OR_RETURN(const SqlRows found,
                     sql.Run("SELECT store_id FROM vector_store_files WHERE tenant = ?1 AND "
                             "file_id = ?2 AND (store_id = ?3 OR ?4 = 1)",
                             {tenant, file_id, store_id, int64_t{store_id.empty() ? 1 : 0}}));
    if (found.rows.empty()) return NotFound("file '{}' is not in the vector store", file_id);
    for (const auto& columns : found.rows) {
      const std::string& store = columns[0];
      RETURN_IF_ERROR(sql.Run("DELETE FROM vector_store_files WHERE store_id = ?1 AND "
                              "file_id = ?2",
                              {store, file_id})
                          .status());
      RETURN_IF_ERROR(sql.Run("DELETE FROM vector_store_chunks WHERE store_id = ?1 AND "
                              "file_id = ?2",
                              {store, file_id})
                          .status());
      RETURN_IF_ERROR(AppendChange(sql, store, file_id, "removed"));
    }
    return Status::Ok();
  });
}

Result<std::optional<VectorStoreBatchRow>> Store::GetVectorStoreBatch(const std::string& tenant,
                                                                      const std::string& store_id,
                                                                      const std::string& batch_id) {
  std::optional<VectorStoreBatchRow> row;
  RETURN_IF_ERROR(WithSql(false, [&](SqlRunner& sql) -> Status {
    ASSIGN_OR_RETURN(const SqlRows found,
                     sql.Run("SELECT tenant, store_id, id, created_unix FROM "
                             "vector_store_batches WHERE id = ?1 AND store_id = ?2 AND "
                             "tenant = ?3",
                             {batch_id, store_id, tenant}));
    if (found.rows.empty()) return Status::Ok();
    const auto& c = found.rows.front();
    row = VectorStoreBatchRow{
        .tenant = c[0], .store_id = c[1], .id = c[2], .created_unix = ToInt(c[3])};
    return Status::Ok();
  }));
  return row;
}

Status Store::CancelVectorStoreBatch(const std::string& tenant, const std::string& store_id,
                                     const std::string& batch_id) {
  return WithSql(true, [&](SqlRunner& sql) -> Status {
    ASSIGN_OR_RETURN(const SqlRows found,
                     sql.Run("SELECT 1 FROM vector_store_batches WHERE id = ?1 AND "
                             "store_id = ?2 AND tenant = ?3",
                             {batch_id, store_id, tenant}));
    if (found.rows.empty()) return NotFound("file batch '{}' does not exist", batch_id);
    return sql
        .Run(
            "UPDATE vector_store_files SET status = 'cancelled', claimed_by = '', "
            "lease_until_unix = 0 WHERE store_id = ?1 AND batch_id = ?2 AND "
            "status = 'in_progress'",
            {store_id, batch_id})
        .status();
  });
}

Result<std::optional<VectorStoreFileRow>> Store::ClaimVectorStoreFile(const std::string& worker,
                                                                      int64_t now_unix,
                                                                      int64_t lease_until_unix) {
  std::optional<VectorStoreFileRow> claimed;
  RETURN_IF_ERROR(WithSql(true, [&](SqlRunner& sql) -> Status {
    ASSIGN_OR_RETURN(const SqlRows candidates,
                     sql.Run("SELECT " RAMPART_VS_FILE_COLUMNS
                             " FROM vector_store_files WHERE status = 'in_progress' AND "
                             "lease_until_unix < CAST(?1 AS BIGINT) ORDER BY created_unix, "
                             "file_id LIMIT 8",
                             {now_unix}));
    for (const auto& columns : candidates.rows) {
      VectorStoreFileRow file = ReadFile(columns);
      // Re-checked on the row itself: a replica that claimed it first has moved the lease, and
      // PostgreSQL re-evaluates this condition on the row it waited for.
      ASSIGN_OR_RETURN(const SqlRows updated,
                       sql.Run("UPDATE vector_store_files SET claimed_by = ?3, lease_until_unix "
                               "= CAST(?4 AS BIGINT) WHERE store_id = ?1 AND file_id = ?2 AND "
                               "status = 'in_progress' AND lease_until_unix < CAST(?5 AS BIGINT)",
                               {file.store_id, file.file_id, worker, lease_until_unix, now_unix}));
      if (updated.affected == 0) continue;
      file.claimed_by = worker;
      file.lease_until_unix = lease_until_unix;
      claimed = std::move(file);
      return Status::Ok();
    }
    return Status::Ok();
  }));
  return claimed;
}

Status Store::FinishVectorStoreFile(const VectorStoreFileRow& file, const std::string& worker,
                                    const std::vector<VectorStoreChunkRow>& chunks) {
  return WithSql(true, [&](SqlRunner& sql) -> Status {
    ASSIGN_OR_RETURN(const SqlRows released,
                     sql.Run("UPDATE vector_store_files SET status = ?4, error_code = ?5, "
                             "error_message = ?6, usage_bytes = CAST(?7 AS BIGINT), claimed_by "
                             "= '', lease_until_unix = 0 WHERE store_id = ?1 AND file_id = ?2 "
                             "AND claimed_by = ?3 AND status = 'in_progress'",
                             {file.store_id, file.file_id, worker, file.status, file.error_code,
                              file.error_message, file.usage_bytes}));
    if (released.affected == 0) {
      return FailedPrecondition("file '{}' is no longer being ingested by this worker",
                                file.file_id);
    }
    RETURN_IF_ERROR(sql.Run("DELETE FROM vector_store_chunks WHERE store_id = ?1 AND "
                            "file_id = ?2",
                            {file.store_id, file.file_id})
                        .status());
    for (const VectorStoreChunkRow& chunk : chunks) {
      RETURN_IF_ERROR(
          sql.Run("INSERT INTO vector_store_chunks (" RAMPART_VS_CHUNK_COLUMNS
                  ") VALUES (?1, ?2, CAST(?3 AS BIGINT), ?4, ?5, ?6, CAST(?7 AS BIGINT), "
                  "CAST(?8 AS BIGINT), CAST(?9 AS BIGINT), ?10)",
                  {file.store_id, file.file_id, chunk.chunk_index,
                   internal::EncodeBytes(chunk.text), chunk.sealing, chunk.heading_path, chunk.page,
                   chunk.begin, chunk.end, internal::EncodeBytes(chunk.embedding)})
              .status());
    }
    return AppendChange(sql, file.store_id, file.file_id, "chunks");
  });
}

Status Store::ReleaseVectorStoreFile(const std::string& store_id, const std::string& file_id,
                                     const std::string& worker) {
  return WithSql(true, [&](SqlRunner& sql) -> Status {
    return sql
        .Run(
            "UPDATE vector_store_files SET claimed_by = '', lease_until_unix = 0 WHERE "
            "store_id = ?1 AND file_id = ?2 AND claimed_by = ?3",
            {store_id, file_id, worker})
        .status();
  });
}

Result<std::vector<VectorStoreChunkRow>> Store::ReadVectorStoreChunks(const std::string& store_id,
                                                                      const std::string& file_id) {
  std::vector<VectorStoreChunkRow> rows;
  RETURN_IF_ERROR(WithSql(false, [&](SqlRunner& sql) -> Status {
    ASSIGN_OR_RETURN(const SqlRows found,
                     sql.Run("SELECT " RAMPART_VS_CHUNK_COLUMNS
                             " FROM vector_store_chunks WHERE store_id = ?1 AND (file_id = ?2 "
                             "OR ?3 = 1) ORDER BY file_id, chunk_index",
                             {store_id, file_id, int64_t{file_id.empty() ? 1 : 0}}));
    rows.reserve(found.rows.size());
    for (const auto& columns : found.rows) {
      ASSIGN_OR_RETURN(VectorStoreChunkRow chunk, ReadChunk(columns));
      rows.push_back(std::move(chunk));
    }
    return Status::Ok();
  }));
  return rows;
}

Result<std::vector<VectorStoreChange>> Store::ReadVectorStoreChanges(int64_t after, int64_t limit) {
  std::vector<VectorStoreChange> changes;
  RETURN_IF_ERROR(WithSql(false, [&](SqlRunner& sql) -> Status {
    ASSIGN_OR_RETURN(const SqlRows found,
                     sql.Run("SELECT sequence, store_id, file_id, kind FROM vector_store_changes "
                             "WHERE sequence > CAST(?1 AS BIGINT) ORDER BY sequence LIMIT "
                             "CAST(?2 AS BIGINT)",
                             {after, limit}));
    for (const auto& c : found.rows) {
      changes.push_back(VectorStoreChange{
          .sequence = ToInt(c[0]), .store_id = c[1], .file_id = c[2], .kind = c[3]});
    }
    return Status::Ok();
  }));
  return changes;
}

Result<int64_t> Store::LastVectorStoreChange() {
  int64_t last = 0;
  RETURN_IF_ERROR(WithSql(false, [&](SqlRunner& sql) -> Status {
    ASSIGN_OR_RETURN(const SqlRows found,
                     sql.Run("SELECT value FROM vector_store_sequence WHERE id = 1", {}));
    if (!found.rows.empty()) last = ToInt(found.rows.front()[0]);
    return Status::Ok();
  }));
  return last;
}

}  // namespace rampart::store
