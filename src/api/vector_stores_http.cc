#include "api/vector_stores_http.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "api/access_http.h"
#include "api/vector_stores_codec.h"
#include "core/logging.h"
#include "core/trace.h"
#include "gateway/gateway.h"
#include "json/reader.h"

namespace rampart::api {
namespace {

namespace hub = knowledge::hub;
namespace vs = vector_stores;

constexpr std::string_view kPrefix = "/v1/vector_stores";
constexpr std::string_view kCreate = "vector_stores:create";
constexpr std::string_view kRead = "vector_stores:read";
constexpr std::string_view kUpdate = "vector_stores:update";
constexpr std::string_view kDelete = "vector_stores:delete";
constexpr std::string_view kSearch = "vector_stores:search";
constexpr std::string_view kFilesRead = "files:read";  // per document, in searches
constexpr std::string_view kAnonymousTenant = "default";

json::Parser& ThreadParser() {
  thread_local json::Parser parser;
  return parser;
}
constexpr size_t kKeptParserBytes = 256 * 1024;

net::HttpResponse Answer(std::string body, const std::string& request_id) {
  net::HttpResponse response;
  response.headers.emplace_back("x-request-id", request_id);
  response.body = std::move(body);
  return response;
}

std::vector<std::string_view> Segments(std::string_view rest) {
  std::vector<std::string_view> segments;
  while (true) {
    const size_t slash = rest.find('/');
    segments.push_back(rest.substr(0, slash));
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
  return segments;
}

// Whether the caller may read each file, decided once per file (the service may ask from more
// than one thread).
class DocumentAccess {
 public:
  DocumentAccess(const policy::AccessControl& access, identity::Identity identity,
                 std::string source)
      : access_(access), identity_(std::move(identity)), source_(std::move(source)) {}

  bool MayRead(const hub::VectorStoreFileInfo& file) {
    {
      std::lock_guard lock(mutex_);
      if (auto found = decided_.find(file.id); found != decided_.end()) return found->second;
    }
    const store::Attributes attributes = vs::StringifyAttributes(file.attributes);
    const bool allowed =
        access_
            .Authorise(identity_, kFilesRead,
                       {.type = "file", .name = file.id, .attributes = &attributes}, source_)
            .allowed;
    std::lock_guard lock(mutex_);
    decided_.emplace(file.id, allowed);
    return allowed;
  }

 private:
  const policy::AccessControl& access_;
  const identity::Identity identity_;
  const std::string source_;
  std::mutex mutex_;
  std::unordered_map<std::string, bool> decided_;
};

// The counts of the files of a store (or of one of its batches) that `access` lets the caller
// read: per-document access leaves no trace of a refused document, not even in a count.
Result<hub::FileCounts> ReadableCounts(hub::VectorStores& service, const std::string& tenant,
                                       const std::string& store_id, const std::string& batch_id,
                                       DocumentAccess& access) {
  hub::FileCounts counts;
  hub::PageRequest page{.limit = 100, .descending = false};
  while (true) {
    ASSIGN_OR_RETURN(hub::Page<hub::VectorStoreFileInfo> listed,
                     service.ListFiles(tenant, store_id, page, std::nullopt, batch_id));
    for (const hub::VectorStoreFileInfo& file : listed.items) {
      if (access.MayRead(file)) counts.Add(file.status);
    }
    if (!listed.has_more || listed.items.empty()) return counts;
    page.after = listed.items.back().id;
  }
}

}  // namespace

VectorStoresHttp::VectorStoresHttp(hub::VectorStores& service, VectorStoresHttpOptions options)
    : service_(service),
      options_(std::move(options)),
      workers_("vectorstores", options_.worker_threads, options_.max_queued_requests) {}

std::vector<std::string_view> VectorStoresHttp::Actions() {
  return {kCreate, kRead, kUpdate, kDelete, kSearch, kFilesRead};
}

void VectorStoresHttp::Handle(net::HttpRequest&& request, net::Responder responder) {
  const TraceContext trace = TraceContext::Start();
  std::string request_id = gateway::RequestId(request, trace);
  const std::string_view path = request.path();
  const std::string_view method = request.method;
  const auto route = [&]() -> std::optional<Call> {
    const auto refuse = [&](int status, std::string message) -> std::optional<Call> {
      responder.Send(vs::ErrorResponse(status, message, request_id));
      return std::nullopt;
    };
    const auto pick = [&](std::initializer_list<std::pair<std::string_view, Call>> choices)
        -> std::optional<Call> {
      std::string allowed;
      for (const auto& [verb, call] : choices) {
        if (verb == method) return call;
        allowed += allowed.empty() ? std::string(verb) : fmt::format(" or {}", verb);
      }
      return refuse(405, fmt::format("use {} {}", allowed, path));
    };
    if (path == kPrefix || path == std::string(kPrefix) + "/") {
      return pick({{"POST", {Operation::kCreateStore, kCreate, {}, {}}},
                   {"GET", {Operation::kListStores, kRead, {}, {}}}});
    }
    const std::vector<std::string_view> parts = Segments(path.substr(kPrefix.size() + 1));
    for (std::string_view part : parts) {
      if (part.empty()) return refuse(404, fmt::format("no route for {} {}", method, path));
    }
    const std::string store(parts[0]);
    const std::string item = parts.size() > 2 ? std::string(parts[2]) : std::string();
    if (parts.size() == 1) {
      return pick({{"GET", {Operation::kGetStore, kRead, store, {}}},
                   {"POST", {Operation::kModifyStore, kUpdate, store, {}}},
                   {"DELETE", {Operation::kDeleteStore, kDelete, store, {}}}});
    }
    if (parts.size() == 2 && parts[1] == "files") {
      return pick({{"POST", {Operation::kAddFile, kUpdate, store, {}}},
                   {"GET", {Operation::kListFiles, kRead, store, {}}}});
    }
    if (parts.size() == 2 && parts[1] == "file_batches") {
      return pick({{"POST", {Operation::kCreateBatch, kUpdate, store, {}}}});
    }
    if (parts.size() == 2 && parts[1] == "search") {
      return pick({{"POST", {Operation::kSearch, kSearch, store, {}}}});
    }
    if (parts.size() == 3 && parts[1] == "files") {
      return pick({{"GET", {Operation::kGetFile, kRead, store, item}},
                   {"POST", {Operation::kUpdateFile, kUpdate, store, item}},
                   {"DELETE", {Operation::kRemoveFile, kUpdate, store, item}}});
    }
    if (parts.size() == 4 && parts[1] == "files" && parts[3] == "content") {
      return pick({{"GET", {Operation::kFileContent, kRead, store, item}}});
    }
    if (parts.size() == 3 && parts[1] == "file_batches") {
      return pick({{"GET", {Operation::kGetBatch, kRead, store, item}}});
    }
    if (parts.size() == 4 && parts[1] == "file_batches" && parts[3] == "cancel") {
      return pick({{"POST", {Operation::kCancelBatch, kUpdate, store, item}}});
    }
    if (parts.size() == 4 && parts[1] == "file_batches" && parts[3] == "files") {
      return pick({{"GET", {Operation::kListBatchFiles, kRead, store, item}}});
    }
    return refuse(404, fmt::format("no route for {} {}", method, path));
  }();
  if (!route) return;

  const auto start_recorded = [&]() -> RecordedResponder {
    if (options_.audit == nullptr) return RecordedResponder(std::move(responder));
    RecordedResponder recorded(
        std::move(responder), options_.audit,
        StartRecord(request, "vector_stores", trace.TraceId(), request_id, route->action,
                    "vector_store", route->store.empty() ? "*" : route->store),
        request.received);
    recorded.SetRequestContent(request.body);
    return recorded;
  };
  struct Held {
    net::HttpRequest request;
    RecordedResponder responder;
    std::string request_id;
  };
  auto held =
      std::make_shared<Held>(Held{std::move(request), start_recorded(), std::move(request_id)});
  const Status queued = workers_.Post([this, call = std::move(*route), held] {
    Run(call, held->request, held->responder, held->request_id);
  });
  if (!queued.ok()) {
    const bool stopping = queued.code() == StatusCode::kUnavailable;
    held->responder.Send(vs::ErrorResponse(
        stopping ? 503 : 429,
        stopping ? std::string("the server is shutting down")
                 : fmt::format("too many vector store requests at once ({}); retry later",
                               queued.message()),
        held->request_id));
  }
}

std::optional<VectorStoresHttp::Caller> VectorStoresHttp::Check(const net::HttpRequest& request,
                                                                RecordedResponder& responder,
                                                                const Call& call,
                                                                const std::string& request_id) {
  (void)request_id;
  if (!Enforcing(options_.access)) return Caller{std::string(kAnonymousTenant), std::nullopt};
  const policy::Resource target{.type = "vector_store",
                                .name = call.store.empty() ? "*" : call.store};
  audit::AuditRecord* record = responder.record();
  policy::AccessOutcome outcome =
      record != nullptr ? CheckRecorded(*options_.access, request, call.action, target, 0, *record)
                        : CheckRequest(*options_.access, request, call.action, target);
  if (auto* refusal = std::get_if<policy::AccessRefusal>(&outcome)) {
    responder.Send(RefusalResponse(*refusal, request, ErrorShape::kOpenAi));
    return std::nullopt;
  }
  auto& grant = std::get<policy::AccessGrant>(outcome);
  responder.SetFull(grant.HasObligation(policy::kObligationAuditFull));
  std::string tenant =
      grant.identity.tenant.empty() ? std::string(kAnonymousTenant) : grant.identity.tenant;
  const bool redact_pii = grant.HasObligation(policy::kObligationRedactPii);
  return Caller{std::move(tenant), std::move(grant.identity), redact_pii};
}

void VectorStoresHttp::Run(const Call& call, const net::HttpRequest& request,
                           RecordedResponder& responder, const std::string& request_id) {
  std::optional<Caller> caller = Check(request, responder, call, request_id);
  if (!caller) return;
  const std::string& tenant = caller->tenant;
  json::Parser& parser = ThreadParser();
  struct ShrinkAfter {
    json::Parser& parser;
    ~ShrinkAfter() { parser.ShrinkTo(kKeptParserBytes); }
  } shrink{parser};
  const auto fail = [&](const Status& status) {
    if (status.code() == StatusCode::kInternal) {
      LOG_WARN("vector stores: {} {}: {}", request.method, request.path(), status.message());
    }
    responder.Send(vs::ErrorResponse(status, request_id));
  };
  // Answers `result` with `write`, or its error.
  const auto answer = [&](const auto& result, auto write) {
    if (!result.ok()) {
      fail(result.status());
    } else {
      responder.Send(Answer(write(*result), request_id));
    }
  };
  const auto page = [&]() { return vs::ParsePageQuery(request.query()); };
  // Per-document access (files:read), for the calls that show a file's name, attributes or
  // content; null when access is open.
  const auto documents = [&]() -> std::shared_ptr<DocumentAccess> {
    if (!caller->identity || !Enforcing(options_.access)) return nullptr;
    return std::make_shared<DocumentAccess>(
        *options_.access, *caller->identity,
        request.peer != nullptr ? std::string(request.peer->address) : std::string());
  };
  // A file the caller may not read is as absent as an unknown one.
  const auto readable = [&](Result<hub::VectorStoreFileInfo> file) {
    if (file.ok()) {
      if (std::shared_ptr<DocumentAccess> access = documents(); access && !access->MayRead(*file)) {
        return Result<hub::VectorStoreFileInfo>(
            NotFound("No file found with id '{}' in vector store '{}'.", call.item, call.store));
      }
    }
    return file;
  };

  // Stores and batches as the caller sees them: their file counts over the files it may read.
  const auto seen_store = [&](Result<hub::VectorStoreInfo> store) {
    std::shared_ptr<DocumentAccess> access = documents();
    if (!store.ok() || !access) return store;
    Result<hub::FileCounts> counts = ReadableCounts(service_, tenant, store->id, "", *access);
    if (!counts.ok()) return Result<hub::VectorStoreInfo>(counts.status());
    store->file_counts = *counts;
    if (store->status == "in_progress" && counts->in_progress == 0) store->status = "completed";
    return store;
  };
  const auto seen_batch = [&](Result<hub::FileBatchInfo> batch) {
    std::shared_ptr<DocumentAccess> access = documents();
    if (!batch.ok() || !access) return batch;
    Result<hub::FileCounts> counts =
        ReadableCounts(service_, tenant, batch->vector_store_id, batch->id, *access);
    if (!counts.ok()) return Result<hub::FileBatchInfo>(counts.status());
    batch->file_counts = *counts;
    return batch;
  };

  switch (call.operation) {
    case Operation::kCreateStore: {
      Result<hub::CreateStoreRequest> parsed = vs::ParseCreateStore(parser, request.body);
      if (!parsed.ok()) return fail(parsed.status());
      parsed->redact_pii = caller->redact_pii;
      Result<hub::VectorStoreInfo> created = service_.CreateStore(tenant, *parsed);
      if (created.ok()) {
        if (audit::AuditRecord* record = responder.record()) record->resource = created->id;
      }
      return answer(seen_store(std::move(created)), vs::StoreJson);
    }
    case Operation::kListStores: {
      Result<hub::PageRequest> request_page = page();
      if (!request_page.ok()) return fail(request_page.status());
      Result<hub::Page<hub::VectorStoreInfo>> listed = service_.ListStores(tenant, *request_page);
      for (size_t i = 0; listed.ok() && i < listed->items.size(); ++i) {
        Result<hub::VectorStoreInfo> seen = seen_store(std::move(listed->items[i]));
        if (!seen.ok()) return fail(seen.status());
        listed->items[i] = std::move(seen).value();
      }
      return answer(listed, vs::StoreListJson);
    }
    case Operation::kGetStore:
      return answer(seen_store(service_.GetStore(tenant, call.store)), vs::StoreJson);
    case Operation::kModifyStore: {
      Result<hub::ModifyStoreRequest> parsed = vs::ParseModifyStore(parser, request.body);
      if (!parsed.ok()) return fail(parsed.status());
      return answer(seen_store(service_.ModifyStore(tenant, call.store, *parsed)), vs::StoreJson);
    }
    case Operation::kDeleteStore: {
      const Status deleted = service_.DeleteStore(tenant, call.store);
      if (!deleted.ok()) return fail(deleted);
      responder.Send(Answer(vs::DeletedJson(call.store, "vector_store.deleted"), request_id));
      return;
    }
    case Operation::kAddFile: {
      Result<hub::AddFileRequest> parsed = vs::ParseAddFile(parser, request.body);
      if (!parsed.ok()) return fail(parsed.status());
      parsed->redact_pii = caller->redact_pii;
      return answer(service_.AddFile(tenant, call.store, *parsed), vs::FileJson);
    }
    case Operation::kListFiles:
    case Operation::kListBatchFiles: {
      Result<hub::PageRequest> request_page = page();
      if (!request_page.ok()) return fail(request_page.status());
      Result<std::optional<hub::IngestStatus>> status = vs::ParseStatusFilter(request.query());
      if (!status.ok()) return fail(status.status());
      Result<hub::Page<hub::VectorStoreFileInfo>> listed =
          service_.ListFiles(tenant, call.store, *request_page, *status, call.item);
      // Files the caller may not read are left out (a page may come back shorter).
      if (std::shared_ptr<DocumentAccess> access = documents(); access && listed.ok()) {
        std::erase_if(listed->items,
                      [&](const hub::VectorStoreFileInfo& file) { return !access->MayRead(file); });
      }
      return answer(listed, vs::FileListJson);
    }
    case Operation::kGetFile:
      return answer(readable(service_.GetFile(tenant, call.store, call.item)), vs::FileJson);
    case Operation::kUpdateFile: {
      Result<hub::FileAttributes> attributes = vs::ParseUpdateFile(parser, request.body);
      if (!attributes.ok()) return fail(attributes.status());
      return answer(service_.UpdateFileAttributes(tenant, call.store, call.item, *attributes),
                    vs::FileJson);
    }
    case Operation::kRemoveFile: {
      const Status removed = service_.RemoveFile(tenant, call.store, call.item);
      if (!removed.ok()) return fail(removed);
      responder.Send(Answer(vs::DeletedJson(call.item, "vector_store.file.deleted"), request_id));
      return;
    }
    case Operation::kFileContent: {
      Result<hub::VectorStoreFileInfo> file =
          readable(service_.GetFile(tenant, call.store, call.item));
      if (!file.ok()) return fail(file.status());
      Result<std::vector<std::string>> chunks = service_.FileContent(tenant, call.store, call.item);
      if (!chunks.ok()) return fail(chunks.status());
      responder.Send(Answer(vs::FileContentJson(*file, *chunks), request_id));
      return;
    }
    case Operation::kCreateBatch: {
      Result<hub::CreateBatchRequest> parsed = vs::ParseCreateBatch(parser, request.body);
      if (!parsed.ok()) return fail(parsed.status());
      for (hub::AddFileRequest& file : parsed->files) file.redact_pii = caller->redact_pii;
      return answer(seen_batch(service_.CreateBatch(tenant, call.store, *parsed)), vs::BatchJson);
    }
    case Operation::kGetBatch:
      return answer(seen_batch(service_.GetBatch(tenant, call.store, call.item)), vs::BatchJson);
    case Operation::kCancelBatch:
      return answer(seen_batch(service_.CancelBatch(tenant, call.store, call.item)), vs::BatchJson);
    case Operation::kSearch: return Search(call, *caller, request, responder, request_id);
  }
}

void VectorStoresHttp::Search(const Call& call, const Caller& caller,
                              const net::HttpRequest& request, RecordedResponder& responder,
                              const std::string& request_id) {
  Result<vs::ParsedSearch> parsed = vs::ParseSearch(ThreadParser(), request.body);
  if (!parsed.ok()) {
    responder.Send(vs::ErrorResponse(parsed.status(), request_id));
    return;
  }
  hub::SearchRequest& search = parsed->request;
  if (caller.identity && Enforcing(options_.access)) {
    auto access = std::make_shared<DocumentAccess>(
        *options_.access, *caller.identity,
        request.peer != nullptr ? std::string(request.peer->address) : std::string());
    search.may_read = [access](const hub::VectorStoreFileInfo& file) {
      return access->MayRead(file);
    };
  }
  Result<hub::SearchResults> results = service_.Search(caller.tenant, call.store, search);
  if (!results.ok()) {
    if (results.status().code() == StatusCode::kInternal) {
      LOG_WARN("vector stores: search of {}: {}", call.store, results.status().message());
    }
    responder.Send(vs::ErrorResponse(results.status(), request_id));
    return;
  }
  responder.Send(
      Answer(vs::SearchPageJson(search.queries, parsed->query_was_array, *results), request_id));
}

}  // namespace rampart::api
