#include "api/admin_http.h"

#include <algorithm>
#include <charconv>

#include "api/access_http.h"
#include "api/admin_audit.h"
#include "api/audit_http.h"
#include "core/clock.h"
#include "core/trace.h"
#include "gateway/access_stages.h"
#include "gateway/gateway.h"
#include "gateway/openai_response.h"
#include "json/reader.h"
#include "json/writer.h"

namespace rampart::api {
namespace {

int64_t UnixNow() { return UnixMillisNow() / 1000; }

net::HttpResponse Json(int status, std::string body) {
  net::HttpResponse response;
  response.status = status;
  response.body = std::move(body);
  return response;
}

net::HttpResponse Error(int status, std::string_view message) {
  return Json(status, gateway::ErrorJson(message, gateway::ErrorType(status), "", ""));
}

int HttpStatusOfStore(const Status& status) {
  switch (status.code()) {
    case StatusCode::kNotFound: return 404;
    case StatusCode::kAlreadyExists: return 409;
    case StatusCode::kInvalidArgument:
    case StatusCode::kFailedPrecondition: return 400;
    case StatusCode::kUnavailable: return 503;
    default: return 500;
  }
}

net::HttpResponse StoreError(const Status& status) {
  return Error(HttpStatusOfStore(status), status.message());
}

void WriteStrings(json::Writer& writer, const std::vector<std::string>& items) {
  writer.StartArray();
  for (const std::string& item : items) writer.String(item);
  writer.EndArray();
}

void WriteAttributes(json::Writer& writer, const store::Attributes& attributes) {
  writer.StartObject();
  for (const auto& [name, value] : attributes) {
    writer.Key(name);
    writer.String(value);
  }
  writer.EndObject();
}

void WriteTenant(json::Writer& writer, const store::Tenant& tenant) {
  writer.StartObject();
  writer.Key("name");
  writer.String(tenant.name);
  writer.Key("attributes");
  WriteAttributes(writer, tenant.attributes);
  writer.Key("created");
  writer.Int64(tenant.created_unix);
  writer.EndObject();
}

void WritePrincipal(json::Writer& writer, const store::Principal& principal) {
  writer.StartObject();
  writer.Key("tenant");
  writer.String(principal.tenant);
  writer.Key("name");
  writer.String(principal.name);
  writer.Key("roles");
  WriteStrings(writer, principal.roles);
  writer.Key("attributes");
  WriteAttributes(writer, principal.attributes);
  writer.Key("disabled");
  writer.Bool(principal.disabled);
  writer.Key("created");
  writer.Int64(principal.created_unix);
  writer.EndObject();
}

// Everything but the salt and the hash.
void WriteKeyFields(json::Writer& writer, const store::ApiKey& key) {
  writer.Key("id");
  writer.String(key.id);
  writer.Key("tenant");
  writer.String(key.tenant);
  writer.Key("principal");
  writer.String(key.principal);
  writer.Key("name");
  writer.String(key.name);
  writer.Key("roles");
  WriteStrings(writer, key.roles);
  writer.Key("created");
  writer.Int64(key.created_unix);
  writer.Key("expires");
  writer.Int64(key.expires_unix);
  writer.Key("revoked");
  writer.Int64(key.revoked_unix);
  writer.Key("last_used");
  writer.Int64(key.last_used_unix);
}

Result<std::vector<std::string>> ReadStrings(const json::Value& value, std::string_view what) {
  if (!value.IsArray()) {
    return InvalidArgument("'{}' must be an array of strings, got {}", what, value.KindName());
  }
  std::vector<std::string> items;
  for (simdjson::dom::element item : value.Array()) {
    ASSIGN_OR_RETURN(std::string_view text, json::Value(item).GetString(what));
    items.emplace_back(text);
  }
  return items;
}

// An object of strings; a list of strings becomes one value joined by ',' (store::Attributes).
Result<store::Attributes> ReadAttributes(const json::Value& value, std::string_view what) {
  if (!value.IsObject()) {
    return InvalidArgument("'{}' must be an object, got {}", what, value.KindName());
  }
  store::Attributes attributes;
  for (auto [key, item] : value.Object()) {
    const std::string name(key);
    const json::Value member(item);
    const std::string field = fmt::format("{}.{}", what, name);
    if (member.IsArray()) {
      ASSIGN_OR_RETURN(std::vector<std::string> items, ReadStrings(member, field));
      attributes[name] = fmt::format("{}", fmt::join(items, ","));
    } else {
      ASSIGN_OR_RETURN(std::string_view text, member.GetString(field));
      attributes[name] = std::string(text);
    }
  }
  return attributes;
}

Result<json::Value> ParseBody(json::Parser& parser, std::string_view body) {
  if (body.empty()) return InvalidArgument("the body must be a JSON object");
  ASSIGN_OR_RETURN(json::Value root, parser.Parse(body));
  if (!root.IsObject()) {
    return InvalidArgument("the body must be a JSON object, got {}", root.KindName());
  }
  return root;
}

Result<std::string> RequiredString(const json::Value& root, std::string_view key) {
  const std::optional<json::Value> value = root.Find(key);
  if (!value) return InvalidArgument("'{}' is required", key);
  ASSIGN_OR_RETURN(std::string_view text, value->GetString(key));
  if (text.empty()) return InvalidArgument("'{}' must not be empty", key);
  return std::string(text);
}

// The value of `name` in a query string ("tenant=acme&x=y"); empty when absent. Values are used
// as given (tenant names need no escaping).
std::string QueryValue(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    const size_t end = query.find('&');
    const std::string_view pair = query.substr(0, end);
    const size_t equals = pair.find('=');
    if (pair.substr(0, equals) == name && equals != std::string_view::npos) {
      return std::string(pair.substr(equals + 1));
    }
    if (end == std::string_view::npos) break;
    query.remove_prefix(end + 1);
  }
  return {};
}

std::vector<std::string_view> Segments(std::string_view path) {
  std::vector<std::string_view> segments;
  size_t start = 0;
  while (start < path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    if (end > start) segments.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return segments;
}

// The actions of this API.
constexpr std::string_view kTenantsRead = "admin:tenants:read";
constexpr std::string_view kTenantsWrite = "admin:tenants:write";
constexpr std::string_view kPrincipalsRead = "admin:principals:read";
constexpr std::string_view kPrincipalsWrite = "admin:principals:write";
constexpr std::string_view kKeysRead = "admin:keys:read";
constexpr std::string_view kKeysWrite = "admin:keys:write";
constexpr std::string_view kKeyringRead = "admin:keyring:read";
constexpr std::string_view kKeyringWrite = "admin:keyring:write";
constexpr std::string_view kAuditRead = "admin:audit:read";

net::HttpResponse NoKeyring() {
  return Error(503,
               "the keyring is not configured: start the server with --master-key-file or "
               "RAMPART_MASTER_KEY");
}

// Reloads (a rotation by the CLI or another replica shows at once) and lists the keys.
net::HttpResponse ListKeyring(crypto::Keyring& keyring) {
  if (Status reloaded = keyring.Reload(); !reloaded.ok()) return StoreError(reloaded);
  json::Writer writer;
  writer.StartObject();
  writer.Key("master_key");
  writer.String(keyring.MasterKeyDescription());
  writer.Key("keys");
  writer.StartArray();
  for (const crypto::KeyStatus& key : keyring.List()) {
    writer.StartObject();
    writer.Key("name");
    writer.String(key.name);
    writer.Key("purpose");
    writer.String(key.purpose == crypto::KeyPurpose::kWrapping ? "wrapping" : "signing");
    writer.Key("algorithm");
    writer.String(key.algorithm);
    writer.Key("current_version");
    writer.Int64(key.current_version);
    writer.Key("min_decryption_version");
    writer.Int64(key.min_decryption_version);
    writer.Key("versions");
    writer.StartArray();
    for (const auto& [version, created] : key.versions) {
      writer.StartObject();
      writer.Key("version");
      writer.Int64(version);
      writer.Key("created");
      writer.Int64(created);
      writer.EndObject();
    }
    writer.EndArray();
    writer.EndObject();
  }
  writer.EndArray();
  writer.EndObject();
  return Json(200, writer.Take());
}

constexpr std::string_view kRolesGrant = "admin:roles:grant";

// One admin request, understood: what it asks and the work that answers it (on the worker).
struct Operation {
  std::string_view action;
  std::string resource_type;
  std::string resource_name;
  store::Attributes resource_attributes;
  UniqueFunction<net::HttpResponse()> work;
  // Run on the worker before the decision, when what is decided lives in the store (the tenant
  // of a key being revoked, the roles of its principal): fills resource_attributes and
  // granted_roles. Empty when the request says it all.
  UniqueFunction<Status(Operation&)> resolve;
  // The roles the operation grants (a new key's, a principal's), each checked against the
  // caller's own; and the tenant they are granted in.
  std::vector<std::string> granted_roles;
  std::string grant_tenant;
};

std::string JoinRoles(const std::vector<std::string>& roles) {
  return fmt::format("{}", fmt::join(roles, ","));
}

// `roles` plus `more`, sorted and unique.
std::vector<std::string> UnionOf(std::vector<std::string> roles,
                                 const std::vector<std::string>& more) {
  roles.insert(roles.end(), more.begin(), more.end());
  std::sort(roles.begin(), roles.end());
  roles.erase(std::unique(roles.begin(), roles.end()), roles.end());
  return roles;
}

// The roles principal `name` of `tenant` holds in the store; empty when there is no such principal.
Result<std::vector<std::string>> StoredRoles(store::Store& db, const std::string& tenant,
                                             const std::string& name) {
  ASSIGN_OR_RETURN(std::optional<store::Principal> principal, db.GetPrincipal(tenant, name));
  return principal ? principal->roles : std::vector<std::string>{};
}

net::HttpResponse Refused(const policy::AccessRefusal& refusal, std::string_view request_id) {
  net::HttpResponse response = Error(refusal.http_status(), refusal.AnswerMessage(request_id));
  response.headers = refusal.HttpHeaders();
  return response;
}

// Whether `caller` may grant every role of `op` (docs/access.md): one it holds itself (with the
// policy's inheritance), or one a policy lets it grant (admin:roles:grant on {type: role}).
// A refusal names the first role that is not the caller's to grant.
std::optional<policy::AccessRefusal> CheckGrants(const policy::AccessControl& access,
                                                 const identity::Identity& caller,
                                                 std::string_view source, const Operation& op) {
  const std::shared_ptr<const policy::PolicySet> policies = access.policy_set();
  for (const std::string& role : op.granted_roles) {
    if (policies != nullptr && policies->Holds(caller.tenant, caller.roles, role)) continue;
    const store::Attributes attributes{{"tenant", op.grant_tenant}};
    const policy::Resource resource{.type = "role", .name = role, .attributes = &attributes};
    policy::Decision decision = access.Authorise(caller, kRolesGrant, resource, source);
    if (decision.allowed) continue;
    decision.reason = fmt::format(
        "role '{}' may not be granted: the caller does not hold it and {}", role, decision.reason);
    return policy::AccessRefusal::Forbidden(decision);
  }
  return std::nullopt;
}

}  // namespace

Result<int64_t> ParseDuration(std::string_view text) {
  if (text.empty()) return InvalidArgument("a duration must not be empty");
  int64_t unit = 1;
  std::string_view digits = text;
  switch (text.back()) {
    case 'd': unit = 86400; break;
    case 'h': unit = 3600; break;
    case 'm': unit = 60; break;
    case 's': unit = 1; break;
    default: unit = 0; break;
  }
  if (unit != 0) {
    digits.remove_suffix(1);
  } else {
    unit = 1;
  }
  int64_t count = 0;
  auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), count);
  if (error != std::errc() || end != digits.data() + digits.size() || count <= 0 ||
      count > int64_t{1} << 40) {
    return InvalidArgument("'{}' is not a duration (like 30d, 12h, 15m or 3600s)", text);
  }
  return count * unit;
}

AdminHttp::AdminHttp(store::Store& store, identity::ApiKeyTable* keys,
                     const policy::AccessControl& access, crypto::Keyring* keyring,
                     audit::AuditSink* audit)
    : store_(store), keys_(keys), access_(access), keyring_(keyring), audit_(audit) {}

AdminHttp::~AdminHttp() { worker_.Stop(); }

std::vector<std::string_view> AdminHttp::Actions() {
  return {kTenantsRead, kTenantsWrite, kPrincipalsRead, kPrincipalsWrite, kKeysRead,
          kKeysWrite,   kKeyringRead,  kKeyringWrite,   kAuditRead};
}

bool AdminHttp::Owns(std::string_view path) {
  for (std::string_view prefix : {"/v1/admin/tenants", "/v1/admin/principals", "/v1/admin/keys",
                                  "/v1/admin/keyring", "/v1/admin/audit"}) {
    if (path.substr(0, prefix.size()) == prefix &&
        (path.size() == prefix.size() || path[prefix.size()] == '/')) {
      return true;
    }
  }
  return false;
}

void AdminHttp::Handle(net::HttpRequest&& request, net::Responder plain) {
  const TraceContext trace = TraceContext::Start();
  const std::string request_id = gateway::RequestId(request, trace);
  const auto send = [&request_id](RecordedResponder& to, net::HttpResponse response) {
    response.headers.emplace_back("x-request-id", request_id);
    to.Send(std::move(response));
  };
  const std::vector<std::string_view> path = Segments(request.path());  // v1 admin <what> ...
  const std::string_view what = path.size() > 2 ? path[2] : "";
  const std::string_view method = request.method;
  const size_t rest = path.size() - 3;
  const auto record = [&](std::string_view action, std::string_view type, std::string_view name) {
    if (audit_ == nullptr) return RecordedResponder(std::move(plain));
    RecordedResponder recorded(
        std::move(plain), audit_,
        StartRecord(request, "admin", trace.TraceId(), request_id, action, type, name),
        request.received);
    recorded.SetRequestContent(request.body);
    return recorded;
  };
  // Who asks comes first: an unauthenticated caller learns nothing of the request's shape (no
  // 404 for an unknown route, no 400 naming a field), only 401 (recorded without an action: the
  // request is not read).
  std::optional<identity::Identity> caller;
  if (Enforcing(&access_)) {
    Result<identity::Identity> identity = access_.Authenticate(gateway::CredentialsOf(request));
    if (!identity.ok()) {
      RecordedResponder responder = record("", "", "");
      if (audit::AuditRecord* noted = responder.record()) noted->allowed = false;
      responder.Send(RefusalResponse(policy::AccessRefusal::Unauthenticated(identity.status()),
                                     request, ErrorShape::kOpenAi));
      return;
    }
    caller = std::move(identity).value();
  }
  thread_local json::Parser parser;
  store::Store* db = &store_;
  identity::ApiKeyTable* keys = keys_;
  // Refreshes the key table after a write, so the change holds for the next request.
  const auto refreshed = [keys](net::HttpResponse response) {
    if (keys != nullptr && response.status < 300) {
      if (Status status = keys->Refresh(); !status.ok()) {
        return Error(503, fmt::format("written, but the key table could not be reloaded: {}",
                                      status.message()));
      }
    }
    return response;
  };

  Result<Operation> understood = [&]() -> Result<Operation> {
    Operation op;
    if (what == "tenants" && rest == 0 && method == "GET") {
      op = {kTenantsRead, "tenant", "*", {}, [db] {
              Result<std::vector<store::Tenant>> tenants = db->ListTenants();
              if (!tenants.ok()) return StoreError(tenants.status());
              json::Writer writer;
              writer.StartObject();
              writer.Key("tenants");
              writer.StartArray();
              for (const store::Tenant& tenant : *tenants) WriteTenant(writer, tenant);
              writer.EndArray();
              writer.EndObject();
              return Json(200, writer.Take());
            }};
      return op;
    }
    if (what == "tenants" && rest == 0 && method == "POST") {
      ASSIGN_OR_RETURN(json::Value root, ParseBody(parser, request.body));
      store::Tenant tenant;
      ASSIGN_OR_RETURN(tenant.name, RequiredString(root, "name"));
      if (auto attributes = root.Find("attributes")) {
        ASSIGN_OR_RETURN(tenant.attributes, ReadAttributes(*attributes, "attributes"));
      }
      op = {kTenantsWrite, "tenant", tenant.name, {}, [db, tenant] {
              const Status created = db->CreateTenant(tenant);
              if (!created.ok()) return StoreError(created);
              json::Writer writer;
              WriteTenant(writer, tenant);
              return Json(201, writer.Take());
            }};
      return op;
    }
    if (what == "tenants" && rest == 1 && method == "DELETE") {
      std::string name(path[3]);
      op = {kTenantsWrite, "tenant", name, {}, [db, name, refreshed] {
              const Status deleted = db->DeleteTenant(name);
              return deleted.ok() ? refreshed(Json(200, "{}")) : StoreError(deleted);
            }};
      return op;
    }
    if (what == "principals" && rest == 0 && method == "GET") {
      std::string tenant = QueryValue(request.query(), "tenant");
      op = {kPrincipalsRead, "principal", "*", {{"tenant", tenant}}, [db, tenant] {
              Result<std::vector<store::Principal>> principals = db->ListPrincipals(tenant);
              if (!principals.ok()) return StoreError(principals.status());
              json::Writer writer;
              writer.StartObject();
              writer.Key("principals");
              writer.StartArray();
              for (const store::Principal& each : *principals) WritePrincipal(writer, each);
              writer.EndArray();
              writer.EndObject();
              return Json(200, writer.Take());
            }};
      return op;
    }
    if (what == "principals" && rest == 2 && (method == "PUT" || method == "DELETE")) {
      store::Principal principal;
      principal.tenant = std::string(path[3]);
      principal.name = std::string(path[4]);
      const store::Attributes where{{"tenant", principal.tenant}};
      if (method == "DELETE") {
        op = {kPrincipalsWrite, "principal", principal.name, where, [db, principal, refreshed] {
                const Status deleted = db->DeletePrincipal(principal.tenant, principal.name);
                return deleted.ok() ? refreshed(Json(200, "{}")) : StoreError(deleted);
              }};
        op.resolve = [db, principal](Operation& self) -> Status {
          ASSIGN_OR_RETURN(std::optional<store::Principal> stored,
                           db->GetPrincipal(principal.tenant, principal.name));
          if (stored) self.resource_attributes["roles"] = JoinRoles(stored->roles);
          return Status::Ok();
        };
        return op;
      }
      ASSIGN_OR_RETURN(json::Value root, ParseBody(parser, request.body));
      if (auto roles = root.Find("roles")) {
        ASSIGN_OR_RETURN(principal.roles, ReadStrings(*roles, "roles"));
      }
      if (auto attributes = root.Find("attributes")) {
        ASSIGN_OR_RETURN(principal.attributes, ReadAttributes(*attributes, "attributes"));
      }
      if (auto disabled = root.Find("disabled")) {
        ASSIGN_OR_RETURN(principal.disabled, disabled->GetBool("disabled"));
      }
      principal.roles = UnionOf(std::move(principal.roles), {});
      store::Attributes attributes = where;
      attributes["roles"] = JoinRoles(principal.roles);
      op = {kPrincipalsWrite, "principal", principal.name, attributes, [db, principal, refreshed] {
              const Status put = db->PutPrincipal(principal);
              if (!put.ok()) return StoreError(put);
              json::Writer writer;
              WritePrincipal(writer, principal);
              return refreshed(Json(200, writer.Take()));
            }};
      op.granted_roles = principal.roles;
      op.grant_tenant = principal.tenant;
      return op;
    }
    if (what == "keys" && rest == 0 && method == "GET") {
      std::string tenant = QueryValue(request.query(), "tenant");
      op = {kKeysRead, "key", "*", {{"tenant", tenant}}, [db, tenant] {
              Result<std::vector<store::ApiKey>> listed = db->ListApiKeys(tenant);
              if (!listed.ok()) return StoreError(listed.status());
              json::Writer writer;
              writer.StartObject();
              writer.Key("keys");
              writer.StartArray();
              for (const store::ApiKey& key : *listed) {
                writer.StartObject();
                WriteKeyFields(writer, key);
                writer.EndObject();
              }
              writer.EndArray();
              writer.EndObject();
              return Json(200, writer.Take());
            }};
      return op;
    }
    if (what == "keys" && rest == 0 && method == "POST") {
      ASSIGN_OR_RETURN(json::Value root, ParseBody(parser, request.body));
      ASSIGN_OR_RETURN(std::string tenant, RequiredString(root, "tenant"));
      ASSIGN_OR_RETURN(std::string name, RequiredString(root, "name"));
      std::string principal = name;
      if (root.Find("principal")) {
        ASSIGN_OR_RETURN(principal, RequiredString(root, "principal"));
      }
      std::vector<std::string> roles;
      if (auto given = root.Find("roles")) {
        ASSIGN_OR_RETURN(roles, ReadStrings(*given, "roles"));
      }
      int64_t expires_unix = 0;
      if (auto expires = root.Find("expires_in")) {
        ASSIGN_OR_RETURN(std::string_view text, expires->GetString("expires_in"));
        ASSIGN_OR_RETURN(int64_t seconds, ParseDuration(text));
        expires_unix = UnixNow() + seconds;
      }
      identity::NewApiKey made =
          identity::GenerateApiKey(tenant, principal, name, roles, UnixNow(), expires_unix);
      op = {kKeysWrite, "key", "*", {{"tenant", tenant}}, [db, made = std::move(made), refreshed] {
              const Status created = db->CreateApiKey(made.record);
              if (!created.ok()) return StoreError(created);
              json::Writer writer;
              writer.StartObject();
              writer.Key("key");  // shown this once; never stored, never logged
              writer.String(made.key);
              WriteKeyFields(writer, made.record);
              writer.EndObject();
              return refreshed(Json(201, writer.Take()));
            }};
      // The key carries its principal's roles too (ApiKeyTable::Verify), so those are granted
      // with it: a key for an existing admin principal is an admin key.
      op.resolve = [db, tenant, principal, roles](Operation& self) -> Status {
        ASSIGN_OR_RETURN(std::vector<std::string> stored, StoredRoles(*db, tenant, principal));
        self.granted_roles = UnionOf(roles, stored);
        self.resource_attributes["roles"] = JoinRoles(self.granted_roles);
        return Status::Ok();
      };
      op.grant_tenant = tenant;
      return op;
    }
    if (what == "keys" && rest == 1 && method == "DELETE") {
      std::string id(path[3]);
      op = {kKeysWrite, "key", id, {}, [db, id, refreshed] {
              const Status revoked = db->RevokeApiKey(id, UnixNow());
              return revoked.ok() ? refreshed(Json(200, "{}")) : StoreError(revoked);
            }};
      // Decided on the key's tenant and roles; an unknown id is decided without them (a rule
      // that needs them does not apply) and, when allowed, answered 404.
      op.resolve = [db, id](Operation& self) -> Status {
        ASSIGN_OR_RETURN(std::optional<store::ApiKey> key, db->GetApiKey(id));
        if (!key) return Status::Ok();
        ASSIGN_OR_RETURN(std::vector<std::string> stored,
                         StoredRoles(*db, key->tenant, key->principal));
        self.resource_attributes["tenant"] = key->tenant;
        self.resource_attributes["roles"] = JoinRoles(UnionOf(key->roles, stored));
        return Status::Ok();
      };
      return op;
    }
    crypto::Keyring* keyring = keyring_;
    if (what == "keyring" && rest == 0 && method == "GET") {
      op = {kKeyringRead, "keyring", "*", {}, [keyring] {
              return keyring != nullptr ? ListKeyring(*keyring) : NoKeyring();
            }};
      return op;
    }
    if (what == "keyring" && rest == 2 && path[4] == "rotate" && method == "POST") {
      std::string name(path[3]);
      op = {kKeyringWrite, "keyring", name, {}, [keyring, name] {
              if (keyring == nullptr) return NoKeyring();
              Result<int> version = keyring->Rotate(name);
              if (!version.ok()) return StoreError(version.status());
              json::Writer writer;
              writer.StartObject();
              writer.Key("name");
              writer.String(name);
              writer.Key("version");
              writer.Int64(*version);
              writer.EndObject();
              return Json(200, writer.Take());
            }};
      return op;
    }
    if (what == "audit" && rest == 0 && method == "GET") {
      ASSIGN_OR_RETURN(store::AuditQuery query, ParseAuditQuery(request.query()));
      op = {kAuditRead, "audit", "*", {{"tenant", query.tenant}}, [db, query] {
              Result<std::string> body = QueryAuditRecordsJson(*db, query);
              return body.ok() ? Json(200, std::move(body).value()) : StoreError(body.status());
            }};
      return op;
    }
    return NotFound("no route for {} {}", request.method, request.path());
  }();
  if (!understood.ok()) {
    RecordedResponder responder = record("", "", "");
    send(responder, understood.status().code() == StatusCode::kNotFound
                        ? Error(404, understood.status().message())
                        : Error(400, understood.status().message()));
    return;
  }
  Operation& op = *understood;
  RecordedResponder recorded = record(op.action, op.resource_type, op.resource_name);
  if (caller && recorded.record() != nullptr) NoteIdentity(*caller, *recorded.record());
  // The rest runs on the worker: the store lookups that name the resource, the decision, the
  // grant check, the quota (its reservation held until the work is done), then the work.
  const std::string source = request.peer != nullptr ? request.peer->address : "";
  auto held = std::make_shared<RecordedResponder>(std::move(recorded));
  const policy::AccessControl* access = &access_;
  const Status queued = worker_.Post(
      [held, op = std::move(op), caller = std::move(caller), source, access, request_id]() mutable {
        audit::AuditRecord* noted = held->record();
        net::HttpResponse response = [&] {
          if (op.resolve && caller) {  // open: nothing to decide on
            if (Status resolved = op.resolve(op); !resolved.ok()) return StoreError(resolved);
          }
          if (!caller) return op.work();  // open: nothing decided, nothing counted
          const policy::Resource resource{.type = op.resource_type,
                                          .name = op.resource_name,
                                          .attributes = &op.resource_attributes};
          policy::Decision decision = access->Authorise(*caller, op.action, resource, source);
          if (noted != nullptr) NoteDecision(decision, *noted);
          if (!decision.allowed) {
            return Refused(policy::AccessRefusal::Forbidden(decision), request_id);
          }
          if (auto refusal = CheckGrants(*access, *caller, source, op)) {
            if (noted != nullptr) noted->allowed = false;
            return Refused(*refusal, request_id);
          }
          policy::QuotaLedger::Admission admission = access->Admit(*caller, 0);
          if (!admission.admitted()) {
            if (noted != nullptr) noted->allowed = false;
            return Refused(policy::AccessRefusal::Quota(*admission.refusal), request_id);
          }
          const auto& obligations = decision.obligations;
          held->SetFull(std::find(obligations.begin(), obligations.end(),
                                  policy::kObligationAuditFull) != obligations.end());
          return op.work();  // the reservation is given back when `admission` goes, after the work
        }();
        response.headers.emplace_back("x-request-id", request_id);
        held->Send(std::move(response));
      });
  if (!queued.ok()) {
    net::HttpResponse refusal = Error(queued.code() == StatusCode::kResourceExhausted ? 429 : 503,
                                      "the admin API is busy; retry later");
    if (refusal.status == 429) refusal.headers.emplace_back("Retry-After", "1");
    send(*held, std::move(refusal));
  }
}

}  // namespace rampart::api
