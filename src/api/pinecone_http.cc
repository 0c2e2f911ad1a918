#include "api/pinecone_http.h"

#include <utility>

#include "api/access_http.h"
#include "api/pinecone_codec.h"
#include "core/trace.h"
#include "gateway/access_stages.h"
#include "gateway/gateway.h"
#include "json/reader.h"
#include "json/writer.h"

namespace rampart::api {
namespace {

namespace pc = pinecone;

constexpr std::string_view kPrefix = "/pinecone";
constexpr std::string_view kIndexes = "/pinecone/indexes";
constexpr std::string_view kIndexCreate = "index:create";
constexpr std::string_view kIndexDelete = "index:delete";
constexpr std::string_view kIndexRead = "index:read";
constexpr std::string_view kIndexConfigure = "index:configure";
constexpr std::string_view kVectorsRead = "vectors:read";
constexpr std::string_view kVectorsWrite = "vectors:write";

// One parser per worker thread; its buffers shrink back after a large document.
json::Parser& ThreadParser() {
  thread_local json::Parser parser;
  return parser;
}
constexpr size_t kKeptParserBytes = 256 * 1024;

net::HttpResponse Json(std::string body, int status = 200) {
  net::HttpResponse response;
  response.status = status;
  response.body = std::move(body);
  return response;
}

}  // namespace

PineconeHttp::PineconeHttp(knowledge::IndexCatalog& catalog, PineconeHttpOptions options)
    : catalog_(catalog),
      options_(std::move(options)),
      workers_("pinecone", options_.worker_threads, options_.max_queued_requests) {}

bool PineconeHttp::Owns(std::string_view path) {
  return path == kPrefix || (path.starts_with(kPrefix) && path[kPrefix.size()] == '/');
}

std::vector<std::string_view> PineconeHttp::Actions() {
  return {kIndexCreate, kIndexDelete, kIndexRead, kIndexConfigure, kVectorsRead, kVectorsWrite};
}

void PineconeHttp::Handle(net::HttpRequest&& request, net::Responder responder) {
  const std::string_view path = request.path();
  const std::string_view method = request.method;
  // What the path and method ask for; nullopt after answering 404 or 405.
  const auto route = [&]() -> std::optional<std::pair<Call, std::string_view>> {
    const auto refuse = [&](int status, std::string message) {
      responder.Send(pc::ErrorResponse(status, message));
      return std::nullopt;
    };
    if (path == kIndexes || path == std::string(kIndexes) + "/") {
      if (method == "POST") return std::pair{Call{Operation::kCreate, {}}, kIndexCreate};
      if (method == "GET") return std::pair{Call{Operation::kList, {}}, kIndexRead};
      return refuse(405, fmt::format("use GET or POST {}", kIndexes));
    }
    if (!path.starts_with(std::string(kIndexes) + "/")) {
      return refuse(404, fmt::format("no route for {} {}", method, path));
    }
    std::string_view rest = path.substr(kIndexes.size() + 1);
    const size_t slash = rest.find('/');
    const std::string name(rest.substr(0, slash));
    const std::string_view operation =
        slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
    if (operation.empty()) {
      if (method == "GET") return std::pair{Call{Operation::kDescribe, name}, kIndexRead};
      if (method == "DELETE") return std::pair{Call{Operation::kDeleteIndex, name}, kIndexDelete};
      if (method == "PATCH") return std::pair{Call{Operation::kConfigure, name}, kIndexConfigure};
      return refuse(405, fmt::format("use GET, PATCH or DELETE {}", path));
    }
    struct DataRoute {
      std::string_view path;
      std::string_view method;
      Operation operation;
      std::string_view action;
    };
    static constexpr DataRoute kRoutes[] = {
        {"vectors/upsert", "POST", Operation::kUpsert, kVectorsWrite},
        {"vectors/update", "POST", Operation::kUpdate, kVectorsWrite},
        {"vectors/delete", "POST", Operation::kDelete, kVectorsWrite},
        {"query", "POST", Operation::kQuery, kVectorsRead},
        {"vectors/fetch", "GET", Operation::kFetch, kVectorsRead},
        {"vectors/list", "GET", Operation::kListIds, kVectorsRead},
        {"describe_index_stats", "POST", Operation::kStats, kIndexRead},
    };
    for (const DataRoute& known : kRoutes) {
      if (known.path != operation) continue;
      const bool stats_get = known.operation == Operation::kStats && method == "GET";
      if (method != known.method && !stats_get) {
        return refuse(405, fmt::format("use {} {}", known.method, path));
      }
      return std::pair{Call{known.operation, name}, known.action};
    }
    return refuse(404, fmt::format("no route for {} {}", method, path));
  }();
  if (!route) return;
  auto [call, action] = *route;

  const auto start_recorded = [&]() -> RecordedResponder {
    if (options_.audit == nullptr) return RecordedResponder(std::move(responder));
    const TraceContext trace = TraceContext::Start();
    RecordedResponder recorded(
        std::move(responder), options_.audit,
        StartRecord(request, "pinecone", trace.TraceId(), gateway::RequestId(request, trace),
                    action, "index", call.index.empty() ? "*" : call.index),
        request.received);
    recorded.SetRequestContent(request.body);
    return recorded;
  };
  RecordedResponder recorded = start_recorded();
  auto held = std::make_shared<std::pair<net::HttpRequest, RecordedResponder>>(std::move(request),
                                                                               std::move(recorded));
  const Status queued = workers_.Post([this, call = std::move(call), held]() mutable {
    Run(std::move(call), held->first, std::move(held->second));
  });
  if (!queued.ok()) {
    held->second.Send(
        pc::ErrorResponse(queued.code() == StatusCode::kUnavailable ? 503 : 429,
                          queued.code() == StatusCode::kUnavailable
                              ? "the server is shutting down"
                              : fmt::format("too many Pinecone requests at once ({}); retry later",
                                            queued.message())));
  }
}

bool PineconeHttp::Allowed(const net::HttpRequest& request, RecordedResponder& responder,
                           std::string_view action, std::string_view index) {
  if (!Enforcing(options_.access)) return true;
  const policy::Resource resource{.type = "index", .name = index};
  audit::AuditRecord* record = responder.record();
  policy::AccessOutcome outcome =
      record != nullptr ? CheckRecorded(*options_.access, request, action, resource, 0, *record)
                        : CheckRequest(*options_.access, request, action, resource);
  if (auto* refusal = std::get_if<policy::AccessRefusal>(&outcome)) {
    responder.Send(RefusalResponse(*refusal, request, ErrorShape::kPinecone));
    return false;
  }
  responder.SetFull(
      std::get<policy::AccessGrant>(outcome).HasObligation(policy::kObligationAuditFull));
  return true;
}

std::string PineconeHttp::HostOf(const net::HttpRequest& request, std::string_view name) const {
  std::string base = options_.public_url;
  if (base.empty()) {
    const std::optional<std::string_view> host = request.Header("host");
    base = fmt::format("{}://{}", options_.tls ? "https" : "http",
                       host && !host->empty() ? *host : std::string_view("localhost"));
  }
  while (!base.empty() && base.back() == '/') base.pop_back();
  return fmt::format("{}{}/{}", base, kIndexes, name);
}

void PineconeHttp::Run(Call call, const net::HttpRequest& request, RecordedResponder responder) {
  switch (call.operation) {
    case Operation::kCreate: Create(request, std::move(responder)); return;
    case Operation::kList: List(request, std::move(responder)); return;
    case Operation::kDescribe: {
      if (!Allowed(request, responder, kIndexRead, call.index)) return;
      Result<std::shared_ptr<knowledge::IndexBackend>> index = catalog_.Get(call.index);
      if (!index.ok()) {
        responder.Send(pc::ErrorResponse(index.status()));
        return;
      }
      json::Writer writer;
      pc::WriteIndexDescription(writer, (*index)->spec(), HostOf(request, call.index));
      responder.Send(Json(writer.Take()));
      return;
    }
    case Operation::kDeleteIndex: {
      if (!Allowed(request, responder, kIndexDelete, call.index)) return;
      const Status deleted = catalog_.Delete(call.index);
      responder.Send(deleted.ok() ? Json("", 202) : pc::ErrorResponse(deleted));
      return;
    }
    case Operation::kConfigure: {
      if (!Allowed(request, responder, kIndexConfigure, call.index)) return;
      responder.Send(pc::ErrorResponse(
          501, "configuring an index is not supported; create a new one with other settings"));
      return;
    }
    default: DataPlane(std::move(call), request, std::move(responder)); return;
  }
}

void PineconeHttp::Create(const net::HttpRequest& request, RecordedResponder responder) {
  json::Parser& parser = ThreadParser();
  Result<knowledge::IndexSpec> spec =
      pc::ParseCreateIndex(parser, request.body, options_.engine_defaults);
  parser.ShrinkTo(kKeptParserBytes);
  // Authenticated first: a bad body from an unknown caller is a 401, not a 400.
  if (!Allowed(request, responder, kIndexCreate, spec.ok() ? std::string_view(spec->name) : "*")) {
    return;
  }
  if (!spec.ok()) {
    responder.Send(pc::ErrorResponse(spec.status()));
    return;
  }
  if (audit::AuditRecord* record = responder.record()) record->resource = spec->name;
  Result<std::shared_ptr<knowledge::IndexBackend>> created = catalog_.Create(*spec);
  if (!created.ok()) {
    responder.Send(pc::ErrorResponse(created.status()));
    return;
  }
  json::Writer writer;
  pc::WriteIndexDescription(writer, (*created)->spec(), HostOf(request, spec->name));
  responder.Send(Json(writer.Take(), 201));
}

void PineconeHttp::List(const net::HttpRequest& request, RecordedResponder responder) {
  std::optional<identity::Identity> caller;
  if (Enforcing(options_.access)) {
    Result<identity::Identity> identity =
        options_.access->Authenticate(gateway::CredentialsOf(request));
    if (!identity.ok()) {
      const policy::AccessRefusal refusal =
          policy::AccessRefusal::Unauthenticated(identity.status());
      if (audit::AuditRecord* record = responder.record()) record->allowed = false;
      responder.Send(RefusalResponse(refusal, request, ErrorShape::kPinecone));
      return;
    }
    if (audit::AuditRecord* record = responder.record()) NoteIdentity(*identity, *record);
    caller = std::move(identity).value();
  }
  const std::string_view source =
      request.peer != nullptr ? std::string_view(request.peer->address) : "";
  json::Writer writer;
  writer.StartObject();
  writer.Key("indexes");
  writer.StartArray();
  for (const knowledge::IndexSpec& spec : catalog_.List()) {
    // Only the indexes the caller may read (one it may not is as good as absent).
    if (caller &&
        !options_.access
             ->Authorise(*caller, kIndexRead, {.type = "index", .name = spec.name}, source)
             .allowed) {
      continue;
    }
    pc::WriteIndexDescription(writer, spec, HostOf(request, spec.name));
  }
  writer.EndArray();
  writer.EndObject();
  responder.Send(Json(writer.Take()));
}

void PineconeHttp::DataPlane(Call call, const net::HttpRequest& request,
                             RecordedResponder responder) {
  const bool writes = call.operation == Operation::kUpsert ||
                      call.operation == Operation::kUpdate || call.operation == Operation::kDelete;
  const std::string_view action = writes                                ? kVectorsWrite
                                  : call.operation == Operation::kStats ? kIndexRead
                                                                        : kVectorsRead;
  if (!Allowed(request, responder, action, call.index)) return;
  Result<std::shared_ptr<knowledge::IndexBackend>> found = catalog_.Get(call.index);
  if (!found.ok()) {
    responder.Send(pc::ErrorResponse(found.status()));
    return;
  }
  knowledge::IndexBackend& index = **found;
  const size_t dimension = index.spec().engine.dimension;
  json::Parser& parser = ThreadParser();
  struct ShrinkAfter {
    json::Parser& parser;
    ~ShrinkAfter() { parser.ShrinkTo(kKeptParserBytes); }
  } shrink{parser};
  // Answers a write once it is durable, from the index's thread; keeps the index open until then.
  const auto answer_when_done = [&found](RecordedResponder waiting, std::string body) {
    return [index = *found, responder = std::move(waiting),
            body = std::move(body)](Status written) mutable {
      responder.Send(written.ok() ? Json(std::move(body)) : pc::ErrorResponse(written));
    };
  };

  switch (call.operation) {
    case Operation::kUpsert: {
      Result<pc::UpsertRequest> upsert = pc::ParseUpsert(parser, request.body, dimension);
      if (!upsert.ok()) {
        responder.Send(pc::ErrorResponse(upsert.status()));
        return;
      }
      const size_t count = upsert->records.size();
      index.Upsert(std::move(upsert->name_space), std::move(upsert->records),
                   answer_when_done(std::move(responder), pc::UpsertAnswer(count)));
      return;
    }
    case Operation::kUpdate: {
      Result<knowledge::UpdateRequest> update = pc::ParseUpdate(parser, request.body, dimension);
      if (!update.ok()) {
        responder.Send(pc::ErrorResponse(update.status()));
        return;
      }
      index.Update(std::move(update).value(), answer_when_done(std::move(responder), "{}"));
      return;
    }
    case Operation::kDelete: {
      Result<knowledge::DeleteRequest> remove = pc::ParseDelete(parser, request.body);
      if (!remove.ok()) {
        responder.Send(pc::ErrorResponse(remove.status()));
        return;
      }
      index.Delete(std::move(remove).value(), answer_when_done(std::move(responder), "{}"));
      return;
    }
    case Operation::kQuery: {
      Result<knowledge::QueryRequest> query = pc::ParseQuery(parser, request.body, dimension);
      if (!query.ok()) {
        responder.Send(pc::ErrorResponse(query.status()));
        return;
      }
      Result<knowledge::QueryResult> result = index.Query(*query);
      if (!result.ok()) {
        // A query by an id the namespace lacks is the request's fault, not a missing route.
        const Status why = result.status().code() == StatusCode::kNotFound
                               ? InvalidArgument("{}", result.status().message())
                               : result.status();
        responder.Send(pc::ErrorResponse(why));
        return;
      }
      responder.Send(Json(pc::QueryAnswer(*result, pc::ReportedNamespace(query->name_space))));
      return;
    }
    case Operation::kFetch: {
      Result<pc::FetchRequest> fetch = pc::ParseFetchQuery(request.query());
      if (!fetch.ok()) {
        responder.Send(pc::ErrorResponse(fetch.status()));
        return;
      }
      const std::vector<knowledge::VectorRecord> records =
          index.Fetch(fetch->name_space, fetch->ids);
      responder.Send(Json(pc::FetchAnswer(records, pc::ReportedNamespace(fetch->name_space))));
      return;
    }
    case Operation::kListIds: {
      Result<pc::ListRequest> list = pc::ParseListQuery(request.query());
      Result<knowledge::ListPage> page = list.ok() ? index.List(list->name_space, list->prefix,
                                                                list->limit, list->pagination_token)
                                                   : Result<knowledge::ListPage>(list.status());
      if (!page.ok()) {
        responder.Send(pc::ErrorResponse(page.status()));
        return;
      }
      responder.Send(Json(pc::ListAnswer(*page, pc::ReportedNamespace(list->name_space))));
      return;
    }
    case Operation::kStats: {
      Result<std::optional<knowledge::FilterNode>> filter =
          request.method == "GET" ? Result<std::optional<knowledge::FilterNode>>(std::nullopt)
                                  : pc::ParseStatsRequest(parser, request.body);
      Result<knowledge::IndexStats> stats =
          filter.ok() ? index.Stats(filter->has_value() ? &**filter : nullptr)
                      : Result<knowledge::IndexStats>(filter.status());
      if (!stats.ok()) {
        responder.Send(pc::ErrorResponse(stats.status()));
        return;
      }
      responder.Send(Json(pc::StatsAnswer(*stats)));
      return;
    }
    default: responder.Send(pc::ErrorResponse(500, "unknown operation")); return;
  }
}

}  // namespace rampart::api
