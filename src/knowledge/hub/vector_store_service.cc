// The vector store service's VectorStores calls (the threads are in vector_store_workers.cc).

#include <algorithm>

#include <fmt/format.h>

#include "crypto/digest.h"
#include "knowledge/hub/vector_store_codec.h"
#include "knowledge/hub/vector_store_ingest.h"
#include "knowledge/hub/vector_store_service_impl.h"

namespace rampart::knowledge::hub::internal {
namespace {

constexpr int64_t kSecondsPerDay = 86400;
constexpr size_t kMaxMetadataPairs = 16;
constexpr size_t kMaxMetadataKeyBytes = 64;
constexpr size_t kMaxMetadataValueBytes = 512;
constexpr size_t kMaxNameBytes = 256;
constexpr size_t kMaxBatchFiles = 500;
constexpr int kMaxResults = 50;

// `prefix` and 24 of [0-9a-z], uniformly.
std::string NewId(std::string_view prefix) {
  static constexpr std::string_view kAlphabet = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::string id(prefix);
  while (id.size() < prefix.size() + 24) {
    for (unsigned char byte : crypto::RandomBytes(32)) {
      if (byte >= 252) continue;  // 252 = 7 * 36: keeps the draw uniform
      id += kAlphabet[byte % 36];
      if (id.size() == prefix.size() + 24) break;
    }
  }
  return id;
}

Status ValidateMetadata(const std::map<std::string, std::string>& metadata) {
  if (metadata.size() > kMaxMetadataPairs) {
    return InvalidArgument("metadata: at most {} pairs", kMaxMetadataPairs);
  }
  for (const auto& [key, value] : metadata) {
    if (key.empty() || key.size() > kMaxMetadataKeyBytes) {
      return InvalidArgument("metadata: key '{}' is not 1 to {} bytes", key, kMaxMetadataKeyBytes);
    }
    if (value.size() > kMaxMetadataValueBytes) {
      return InvalidArgument("metadata: the value of '{}' is over {} bytes", key,
                             kMaxMetadataValueBytes);
    }
  }
  return Status::Ok();
}

Status ValidateExpiry(const std::optional<ExpiryPolicy>& expiry) {
  if (expiry.has_value() && (expiry->days < 1 || expiry->days > 365)) {
    return InvalidArgument("expires_after.days must be 1 to 365, not {}", expiry->days);
  }
  return Status::Ok();
}

Status ValidatePage(const PageRequest& page) {
  if (page.limit < 1 || page.limit > 100) {
    return InvalidArgument("limit must be 1 to 100, not {}", page.limit);
  }
  return Status::Ok();
}

// OpenAI's paging over items sorted ascending by (created_at, id).
template <typename T>
Page<T> Paginate(std::vector<T> items, const PageRequest& request) {
  if (request.descending) std::reverse(items.begin(), items.end());
  size_t begin = 0;
  size_t end = items.size();
  const auto at = [&](const std::string& id) -> std::optional<size_t> {
    for (size_t i = 0; i < items.size(); ++i) {
      if (items[i].id == id) return i;
    }
    return std::nullopt;
  };
  if (!request.after.empty()) {
    const auto found = at(request.after);
    begin = found.has_value() ? *found + 1 : items.size();
  }
  if (!request.before.empty()) {
    const auto found = at(request.before);
    end = found.has_value() ? *found : 0;
    // Before a cursor: the page closest to it.
    if (end > begin && end - begin > static_cast<size_t>(request.limit)) {
      begin = end - static_cast<size_t>(request.limit);
    }
  }
  Page<T> page;
  for (size_t i = begin; i < end && page.items.size() < static_cast<size_t>(request.limit); ++i) {
    page.items.push_back(std::move(items[i]));
  }
  page.has_more = begin + page.items.size() < end;
  return page;
}

}  // namespace

bool VectorStoreServiceImpl::Expired(const store::VectorStoreRow& row) const {
  return row.expires_days > 0 && Now() >= row.last_active_unix + row.expires_days * kSecondsPerDay;
}

Result<store::VectorStoreRow> VectorStoreServiceImpl::StoreRow(const std::string& tenant,
                                                               const std::string& id) {
  ASSIGN_OR_RETURN(auto row, store_->GetVectorStore(tenant, id));
  if (!row.has_value()) return NotFound("vector store '{}' does not exist", id);
  return std::move(*row);
}

Result<VectorStoreInfo> VectorStoreServiceImpl::StoreInfo(const store::VectorStoreRow& row) {
  VectorStoreInfo info;
  info.id = row.id;
  info.tenant = row.tenant;
  info.name = row.name;
  ASSIGN_OR_RETURN(info.metadata, DecodeMetadata(row.metadata));
  info.created_at = row.created_unix;
  info.last_active_at = row.last_active_unix;
  if (row.expires_days > 0) {
    info.expires_after = ExpiryPolicy{row.expires_days};
    info.expires_at = row.last_active_unix + row.expires_days * kSecondsPerDay;
  }
  ASSIGN_OR_RETURN(const auto files, store_->ListVectorStoreFiles(row.tenant, row.id));
  for (const store::VectorStoreFileRow& file : files) {
    info.file_counts.Add(ParseIngestStatus(file.status));
    info.usage_bytes += file.usage_bytes;
  }
  info.status = Expired(row)                       ? "expired"
                : info.file_counts.in_progress > 0 ? "in_progress"
                                                   : "completed";
  return info;
}

Result<store::VectorStoreFileRow> VectorStoreServiceImpl::NewFileRow(const std::string& tenant,
                                                                     const std::string& store_id,
                                                                     const AddFileRequest& request,
                                                                     const std::string& batch_id) {
  RETURN_IF_ERROR(ValidateFileAttributes(request.attributes));
  RETURN_IF_ERROR(ValidateChunkingOptions(request.chunking));
  ASSIGN_OR_RETURN(const auto stored, store_->GetFile(tenant, request.file_id));
  if (!stored.has_value()) {
    return FailedPrecondition("file '{}' is not an uploaded file", request.file_id);
  }
  store::VectorStoreFileRow row;
  row.tenant = tenant;
  row.store_id = store_id;
  row.file_id = request.file_id;
  row.filename = stored->filename;
  row.created_unix = Now();
  row.status = "in_progress";
  row.attributes = EncodeFileAttributes(request.attributes);
  row.chunking = EncodeChunking(request.chunking);
  row.batch_id = batch_id;
  row.redact_pii = request.redact_pii;
  return row;
}

Result<VectorStoreInfo> VectorStoreServiceImpl::CreateStore(const std::string& tenant,
                                                            const CreateStoreRequest& request) {
  if (request.name.size() > kMaxNameBytes) return InvalidArgument("name is over 256 bytes");
  RETURN_IF_ERROR(ValidateMetadata(request.metadata));
  RETURN_IF_ERROR(ValidateExpiry(request.expires_after));
  if (request.file_ids.size() > kMaxBatchFiles) {
    return InvalidArgument("file_ids: at most {} files", kMaxBatchFiles);
  }
  store::VectorStoreRow row;
  row.tenant = tenant;
  row.id = NewId("vs_");
  row.name = request.name;
  row.metadata = EncodeMetadata(request.metadata);
  row.created_unix = row.last_active_unix = Now();
  row.expires_days = request.expires_after.has_value() ? request.expires_after->days : 0;
  row.embedder = embedder_->name();
  std::vector<store::VectorStoreFileRow> files;
  for (const std::string& file_id : request.file_ids) {
    ASSIGN_OR_RETURN(auto file, NewFileRow(tenant, row.id,
                                           AddFileRequest{.file_id = file_id,
                                                          .chunking = request.chunking,
                                                          .redact_pii = request.redact_pii},
                                           ""));
    files.push_back(std::move(file));
  }
  RETURN_IF_ERROR(store_->CreateVectorStore(row, files));
  if (!files.empty()) WakeWorkers();
  return StoreInfo(row);
}

Result<VectorStoreInfo> VectorStoreServiceImpl::GetStore(const std::string& tenant,
                                                         const std::string& id) {
  std::shared_lock visible(visible_mutex_);
  ASSIGN_OR_RETURN(const auto row, StoreRow(tenant, id));
  return StoreInfo(row);
}

Result<Page<VectorStoreInfo>> VectorStoreServiceImpl::ListStores(const std::string& tenant,
                                                                 const PageRequest& page) {
  std::shared_lock visible(visible_mutex_);
  RETURN_IF_ERROR(ValidatePage(page));
  ASSIGN_OR_RETURN(const auto rows, store_->ListVectorStores(tenant));
  std::vector<VectorStoreInfo> infos;
  for (const store::VectorStoreRow& row : rows) {
    ASSIGN_OR_RETURN(auto info, StoreInfo(row));
    infos.push_back(std::move(info));
  }
  return Paginate(std::move(infos), page);
}

Result<VectorStoreInfo> VectorStoreServiceImpl::ModifyStore(const std::string& tenant,
                                                            const std::string& id,
                                                            const ModifyStoreRequest& request) {
  ASSIGN_OR_RETURN(auto row, StoreRow(tenant, id));
  if (request.name.has_value()) {
    if (request.name->size() > kMaxNameBytes) return InvalidArgument("name is over 256 bytes");
    row.name = *request.name;
  }
  if (request.metadata.has_value()) {
    RETURN_IF_ERROR(ValidateMetadata(*request.metadata));
    row.metadata = EncodeMetadata(*request.metadata);
  }
  if (request.expires_after.has_value()) {
    RETURN_IF_ERROR(ValidateExpiry(*request.expires_after));
    row.expires_days = request.expires_after->has_value() ? (*request.expires_after)->days : 0;
  }
  row.last_active_unix = Now();
  RETURN_IF_ERROR(store_->UpdateVectorStore(row));
  return StoreInfo(row);
}

Status VectorStoreServiceImpl::DeleteStore(const std::string& tenant, const std::string& id) {
  RETURN_IF_ERROR(store_->DeleteVectorStore(tenant, id));
  return SyncNow();
}

Result<VectorStoreFileInfo> VectorStoreServiceImpl::AddFile(const std::string& tenant,
                                                            const std::string& store_id,
                                                            const AddFileRequest& request) {
  ASSIGN_OR_RETURN(const auto store_row, StoreRow(tenant, store_id));
  ASSIGN_OR_RETURN(const auto row, NewFileRow(tenant, store_id, request, ""));
  RETURN_IF_ERROR(store_->AddVectorStoreFiles(std::nullopt, {row}));
  WakeWorkers();
  return GetFile(tenant, store_id, request.file_id);
}

Result<VectorStoreFileInfo> VectorStoreServiceImpl::GetFile(const std::string& tenant,
                                                            const std::string& store_id,
                                                            const std::string& file_id) {
  std::shared_lock visible(visible_mutex_);
  ASSIGN_OR_RETURN(const auto row, store_->GetVectorStoreFile(tenant, store_id, file_id));
  if (!row.has_value()) return NotFound("file '{}' is not in vector store '{}'", file_id, store_id);
  return FileInfoFromRow(*row);
}

Result<Page<VectorStoreFileInfo>> VectorStoreServiceImpl::ListFiles(
    const std::string& tenant, const std::string& store_id, const PageRequest& page,
    std::optional<IngestStatus> status, const std::string& batch_id) {
  std::shared_lock visible(visible_mutex_);
  RETURN_IF_ERROR(ValidatePage(page));
  ASSIGN_OR_RETURN(const auto store_row, StoreRow(tenant, store_id));
  ASSIGN_OR_RETURN(const auto rows, store_->ListVectorStoreFiles(tenant, store_id));
  std::vector<VectorStoreFileInfo> infos;
  for (const store::VectorStoreFileRow& row : rows) {
    if (!batch_id.empty() && row.batch_id != batch_id) continue;
    ASSIGN_OR_RETURN(auto info, FileInfoFromRow(row));
    if (status.has_value() && info.status != *status) continue;
    infos.push_back(std::move(info));
  }
  return Paginate(std::move(infos), page);
}

Result<VectorStoreFileInfo> VectorStoreServiceImpl::UpdateFileAttributes(
    const std::string& tenant, const std::string& store_id, const std::string& file_id,
    const FileAttributes& attributes) {
  RETURN_IF_ERROR(ValidateFileAttributes(attributes));
  RETURN_IF_ERROR(store_->UpdateVectorStoreFileAttributes(tenant, store_id, file_id,
                                                          EncodeFileAttributes(attributes)));
  RETURN_IF_ERROR(SyncNow());
  return GetFile(tenant, store_id, file_id);
}

Status VectorStoreServiceImpl::RemoveFile(const std::string& tenant, const std::string& store_id,
                                          const std::string& file_id) {
  if (store_id.empty()) return NotFound("vector store '' does not exist");
  RETURN_IF_ERROR(store_->RemoveVectorStoreFile(tenant, store_id, file_id));
  return SyncNow();
}

Result<std::vector<std::string>> VectorStoreServiceImpl::FileContent(const std::string& tenant,
                                                                     const std::string& store_id,
                                                                     const std::string& file_id) {
  ASSIGN_OR_RETURN(const auto file, GetFile(tenant, store_id, file_id));
  (void)file;
  ASSIGN_OR_RETURN(const auto rows, store_->ReadVectorStoreChunks(store_id, file_id));
  std::vector<std::string> texts;
  for (const store::VectorStoreChunkRow& row : rows) {
    ASSIGN_OR_RETURN(std::string text, OpenChunkText(options_.envelope, tenant, row));
    texts.push_back(std::move(text));
  }
  return texts;
}

Status VectorStoreServiceImpl::ForgetFile(const std::string& tenant, const std::string& file_id) {
  Status removed = store_->RemoveVectorStoreFile(tenant, "", file_id);
  if (!removed.ok() && removed.code() != StatusCode::kNotFound) return removed;
  return SyncNow();
}

Result<FileBatchInfo> VectorStoreServiceImpl::BatchInfo(const store::VectorStoreBatchRow& row) {
  FileBatchInfo info;
  info.id = row.id;
  info.vector_store_id = row.store_id;
  info.created_at = row.created_unix;
  ASSIGN_OR_RETURN(const auto files, store_->ListVectorStoreFiles(row.tenant, row.store_id));
  for (const store::VectorStoreFileRow& file : files) {
    if (file.batch_id == row.id) info.file_counts.Add(ParseIngestStatus(file.status));
  }
  const FileCounts& counts = info.file_counts;
  info.status = counts.in_progress > 0                       ? IngestStatus::kInProgress
                : counts.cancelled > 0                       ? IngestStatus::kCancelled
                : counts.failed > 0 && counts.completed == 0 ? IngestStatus::kFailed
                                                             : IngestStatus::kCompleted;
  return info;
}

Result<FileBatchInfo> VectorStoreServiceImpl::CreateBatch(const std::string& tenant,
                                                          const std::string& store_id,
                                                          const CreateBatchRequest& request) {
  if (request.files.empty() || request.files.size() > kMaxBatchFiles) {
    return InvalidArgument("a batch holds 1 to {} files", kMaxBatchFiles);
  }
  ASSIGN_OR_RETURN(const auto store_row, StoreRow(tenant, store_id));
  store::VectorStoreBatchRow batch{
      .tenant = tenant, .store_id = store_id, .id = NewId("vsfb_"), .created_unix = Now()};
  std::vector<store::VectorStoreFileRow> rows;
  for (const AddFileRequest& file : request.files) {
    ASSIGN_OR_RETURN(auto row, NewFileRow(tenant, store_id, file, batch.id));
    rows.push_back(std::move(row));
  }
  RETURN_IF_ERROR(store_->AddVectorStoreFiles(batch, rows));
  WakeWorkers();
  return BatchInfo(batch);
}

Result<FileBatchInfo> VectorStoreServiceImpl::GetBatch(const std::string& tenant,
                                                       const std::string& store_id,
                                                       const std::string& batch_id) {
  std::shared_lock visible(visible_mutex_);
  ASSIGN_OR_RETURN(const auto row, store_->GetVectorStoreBatch(tenant, store_id, batch_id));
  if (!row.has_value()) return NotFound("file batch '{}' does not exist", batch_id);
  return BatchInfo(*row);
}

Result<FileBatchInfo> VectorStoreServiceImpl::CancelBatch(const std::string& tenant,
                                                          const std::string& store_id,
                                                          const std::string& batch_id) {
  RETURN_IF_ERROR(store_->CancelVectorStoreBatch(tenant, store_id, batch_id));
  return GetBatch(tenant, store_id, batch_id);
}

Result<SearchResults> VectorStoreServiceImpl::Search(const std::string& tenant,
                                                     const std::string& store_id,
                                                     const SearchRequest& request) {
  if (request.queries.empty()) return InvalidArgument("query: at least one is needed");
  if (request.max_num_results < 1 || request.max_num_results > kMaxResults) {
    return InvalidArgument("max_num_results must be 1 to {}", kMaxResults);
  }
  if (request.score_threshold < 0 || request.score_threshold > 1) {
    return InvalidArgument("ranking_options.score_threshold must be 0 to 1");
  }
  if (request.filter.has_value()) RETURN_IF_ERROR(ValidateFilter(*request.filter));
  ASSIGN_OR_RETURN(auto row, StoreRow(tenant, store_id));
  if (Expired(row)) return FailedPrecondition("vector store '{}' has expired", store_id);
  // last_active_at moves at most once a minute, so searching rarely writes.
  if (Now() - row.last_active_unix >= 60) {
    row.last_active_unix = Now();
    RETURN_IF_ERROR(store_->UpdateVectorStore(row));
  }
  IndexSearch search;
  search.queries = request.queries;
  search.ranker = request.ranker;
  search.fusion = options_.fusion;
  search.vector_weight = options_.vector_weight;
  search.filter = request.filter.has_value() ? &*request.filter : nullptr;
  search.may_read = &request.may_read;
  search.max_results = static_cast<size_t>(request.max_num_results);
  search.score_threshold = request.score_threshold;
  if (request.ranker != Ranker::kKeyword) {
    ASSIGN_OR_RETURN(search.query_vectors, embedder_->Embed(request.queries));
    if (search.query_vectors.size() != request.queries.size()) {
      return Internal("the embedder answered {} vectors for {} queries",
                      search.query_vectors.size(), request.queries.size());
    }
  }
  std::shared_lock visible(visible_mutex_);
  const std::shared_ptr<StoreIndex> index = FindIndex(store_id);
  if (index == nullptr) return SearchResults{};
  return index->Search(search);
}

}  // namespace rampart::knowledge::hub::internal
