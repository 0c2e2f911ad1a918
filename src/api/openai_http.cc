#include "api/openai_http.h"

#include "api/access_http.h"
#include "api/audit_http.h"
#include "api/files_http.h"
#include "core/trace.h"
#include "gateway/access_stages.h"
#include "gateway/openai_response.h"
#include "json/writer.h"

namespace rampart::api {
namespace {

std::string RequestIdOf(const net::HttpRequest& request) {
  return gateway::RequestId(request, TraceContext::Start());
}

net::HttpResponse Answer(const net::HttpRequest& request, int status, std::string body,
                         std::string_view content_type = "application/json") {
  net::HttpResponse response;
  response.status = status;
  response.content_type = content_type;
  response.headers.emplace_back("x-request-id", RequestIdOf(request));
  response.body = std::move(body);
  return response;
}

net::HttpResponse Error(const net::HttpRequest& request, int status, std::string_view message,
                        std::string_view param = {}, std::string_view code = {}) {
  return Answer(request, status,
                gateway::ErrorJson(message, gateway::ErrorType(status), param, code));
}

void WriteModel(json::Writer& writer, const gateway::ModelEntry& model) {
  writer.StartObject();
  writer.Key("id");
  writer.String(model.id);
  writer.Key("object");
  writer.String("model");
  writer.Key("created");
  writer.Int64(model.created);
  writer.Key("owned_by");
  writer.String(model.owned_by);
  writer.EndObject();
}

// The gateway's operations (decided as gateway::ActionOf), and this front end's own actions.
constexpr gateway::Operation kOperations[] = {gateway::Operation::kChatCompletions,
                                              gateway::Operation::kCompletions,
                                              gateway::Operation::kEmbeddings};
constexpr std::string_view kModelsRead = "models:read";
constexpr std::string_view kReload = "admin:reload";
constexpr std::string_view kRoutesRead = "admin:routes:read";

}  // namespace

std::vector<std::string_view> OpenAiHttp::Actions() {
  std::vector<std::string_view> actions;
  for (gateway::Operation operation : kOperations) actions.push_back(gateway::ActionOf(operation));
  for (std::string_view own : {kModelsRead, kReload, kRoutesRead}) actions.push_back(own);
  for (std::string_view guard : GuardHttp::Actions()) actions.push_back(guard);
  for (std::string_view admin : AdminHttp::Actions()) actions.push_back(admin);
  for (std::string_view files : FilesHttp::Actions()) actions.push_back(files);
  return actions;
}

OpenAiHttp::OpenAiHttp(gateway::Gateway& gateway, std::function<Status()> reload,
                       const policy::AccessControl* access, AdminHttp* admin,
                       audit::AuditSink* audit)
    : gateway_(gateway),
      access_(access),
      admin_(admin),
      audit_(audit),
      reload_(std::move(reload)) {}

RecordedResponder OpenAiHttp::Recorded(const net::HttpRequest& request, net::Responder responder,
                                       std::string_view action, const policy::Resource& resource) {
  if (audit_ == nullptr) return RecordedResponder(std::move(responder));
  const TraceContext trace = TraceContext::Start();
  RecordedResponder recorded(
      std::move(responder), audit_,
      StartRecord(request, "openai", trace.TraceId(), gateway::RequestId(request, trace), action,
                  resource.type, resource.name),
      request.received);
  recorded.SetRequestContent(request.body);
  return recorded;
}

std::optional<policy::AccessGrant> OpenAiHttp::Check(const net::HttpRequest& request,
                                                     RecordedResponder& responder,
                                                     std::string_view action,
                                                     const policy::Resource& resource) {
  if (!Enforcing(access_)) return policy::AccessGrant{.decision = {.allowed = true}};
  audit::AuditRecord* record = responder.record();
  policy::AccessOutcome outcome =
      record != nullptr ? CheckRecorded(*access_, request, action, resource, 0, *record)
                        : CheckRequest(*access_, request, action, resource);
  if (auto* refusal = std::get_if<policy::AccessRefusal>(&outcome)) {
    responder.Send(RefusalResponse(*refusal, request, ErrorShape::kOpenAi));
    return std::nullopt;
  }
  auto& grant = std::get<policy::AccessGrant>(outcome);
  responder.SetFull(grant.HasObligation(policy::kObligationAuditFull));
  return std::move(grant);
}

bool OpenAiHttp::Owns(std::string_view path) {
  return path == "/v1" || path.substr(0, 4) == "/v1/";
}

void OpenAiHttp::Handle(net::HttpRequest&& request, net::Responder responder) {
  const std::string_view path = request.path();
  const auto operation = [path]() -> std::optional<gateway::Operation> {
    if (path == "/v1/chat/completions") return gateway::Operation::kChatCompletions;
    if (path == "/v1/completions") return gateway::Operation::kCompletions;
    if (path == "/v1/embeddings") return gateway::Operation::kEmbeddings;
    return std::nullopt;
  }();
  if (operation) {
    if (request.method != "POST") {
      responder.Send(Error(request, 405, fmt::format("use POST {}", path)));
      return;
    }
    gateway_.Handle(*operation, std::move(request), std::move(responder));
    return;
  }
  if (path == "/v1/models" || path.substr(0, 11) == "/v1/models/") {
    if (request.method != "GET") {
      responder.Send(Error(request, 405, "use GET /v1/models"));
      return;
    }
    Models(
        request,
        Recorded(request, std::move(responder), kModelsRead, {.type = "server", .name = "models"}),
        path.size() > 11 ? path.substr(11) : "");
    return;
  }
  if (path == "/v1/admin/reload") {
    if (request.method != "POST") {
      responder.Send(Error(request, 405, "use POST /v1/admin/reload"));
      return;
    }
    RecordedResponder recorded =
        Recorded(request, std::move(responder), kReload, {.type = "server"});
    if (!Check(request, recorded, kReload, {.type = "server"})) return;
    auto held = std::make_shared<RecordedResponder>(std::move(recorded));
    auto id = std::make_shared<net::HttpRequest>();
    id->headers = request.headers;
    const Status queued = reloads_.Post([this, held, id] {
      const Status reloaded = reload_();
      if (reloaded.ok()) {
        held->Send(Answer(*id, 200, gateway_.Describe(), "text/plain; charset=utf-8"));
      } else {
        held->Send(Error(*id, 400, reloaded.message()));
      }
    });
    if (!queued.ok()) held->Send(Error(request, 429, "a reload is under way; retry later"));
    return;
  }
  if (GuardHttp::Owns(path)) {
    const std::string action(GuardHttp::ActionOf(path));
    const TraceContext trace = TraceContext::Start();
    const std::string request_id = gateway::RequestId(request, trace);
    RecordedResponder recorded =
        audit_ == nullptr ? RecordedResponder(std::move(responder))
                          : RecordedResponder(std::move(responder), audit_,
                                              StartRecord(request, "guard", trace.TraceId(),
                                                          request_id, action, "server", "guard"),
                                              request.received);
    recorded.SetRequestContent(request.body);
    std::string tenant;
    if (Enforcing(access_)) {
      const policy::Resource resource{.type = "server", .name = "guard"};
      audit::AuditRecord* record = recorded.record();
      policy::AccessOutcome outcome =
          record != nullptr ? CheckRecorded(*access_, request, action, resource, 0, *record)
                            : CheckRequest(*access_, request, action, resource);
      if (auto* refusal = std::get_if<policy::AccessRefusal>(&outcome)) {
        recorded.Send(RefusalResponse(*refusal, request, ErrorShape::kOpenAi));
        return;
      }
      auto& grant = std::get<policy::AccessGrant>(outcome);
      recorded.SetFull(grant.HasObligation(policy::kObligationAuditFull));
      tenant = std::move(grant.identity.tenant);
    }
    net::HttpResponse response = guard_.Answer(request, tenant);
    response.headers.emplace_back("x-request-id", request_id);
    recorded.Send(std::move(response));
    return;
  }
  if (admin_ != nullptr && AdminHttp::Owns(path)) {
    admin_->Handle(std::move(request), std::move(responder));
    return;
  }
  if (path == "/v1/admin/routes") {
    RecordedResponder recorded =
        Recorded(request, std::move(responder), kRoutesRead, {.type = "route", .name = "*"});
    if (!Check(request, recorded, kRoutesRead, {.type = "route", .name = "*"})) return;
    recorded.Send(Answer(request, 200, gateway_.Describe(), "text/plain; charset=utf-8"));
    return;
  }
  responder.Send(Error(request, 404, fmt::format("no route for {} {}", request.method, path)));
}

void OpenAiHttp::Models(const net::HttpRequest& request, RecordedResponder responder,
                        std::string_view id) {
  std::optional<policy::AccessGrant> grant =
      Check(request, responder, kModelsRead, {.type = "server", .name = "models"});
  if (!grant) return;
  std::vector<gateway::ModelEntry> models = gateway_.Models();
  if (Enforcing(access_)) {
    // Only the models the caller may call (a model it may not is as good as absent).
    const std::string_view source =
        request.peer != nullptr ? std::string_view(request.peer->address) : "";
    std::erase_if(models, [&](const gateway::ModelEntry& model) {
      const policy::Resource resource{.type = "model", .name = model.id};
      for (gateway::Operation operation : kOperations) {
        const std::string_view action = gateway::ActionOf(operation);
        if (access_->Authorise(grant->identity, action, resource, source).allowed) return false;
      }
      return true;
    });
  }
  json::Writer writer;
  if (!id.empty()) {
    for (const gateway::ModelEntry& model : models) {
      if (model.id != id) continue;
      WriteModel(writer, model);
      responder.Send(Answer(request, 200, writer.Take()));
      return;
    }
    responder.Send(Error(request, 404, fmt::format("the model '{}' does not exist", id), "model",
                         "model_not_found"));
    return;
  }
  writer.StartObject();
  writer.Key("object");
  writer.String("list");
  writer.Key("data");
  writer.StartArray();
  for (const gateway::ModelEntry& model : models) WriteModel(writer, model);
  writer.EndArray();
  writer.EndObject();
  responder.Send(Answer(request, 200, writer.Take()));
}

}  // namespace rampart::api
