// Reading policy files: YAML into PolicySource, every fault reported as
// "<file>:<line>: <reason>" (yaml-cpp's marks give the lines).

#include <algorithm>
#include <initializer_list>

#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "policy/compiled.h"

namespace rampart::policy {
namespace {

// Reads one file; every error carries the file name and a node's line.
class FileReader {
 public:
  explicit FileReader(std::string_view name) : name_(name) {}

  Status Read(std::string_view text, PolicySource& into) {
    YAML::Node root;
    try {
      root = YAML::Load(std::string(text));
    } catch (const YAML::ParserException& error) {
      return InvalidArgument("{}:{}: {}", name_, error.mark.line + 1, error.msg);
    }
    if (!root || root.IsNull()) return Status::Ok();  // an empty file: nothing to add
    if (!root.IsMap()) return Error(root, "a policy file is a map of roles, resources and rules");
    RETURN_IF_ERROR(CheckKeys(root, {"roles", "resources", "rules"}));
    RETURN_IF_ERROR(ForEach(root["roles"], "roles",
                            [&](const YAML::Node& node) { return ReadRole(node, into); }));
    RETURN_IF_ERROR(ForEach(root["resources"], "resources",
                            [&](const YAML::Node& node) { return ReadResource(node, into); }));
    return ForEach(root["rules"], "rules",
                   [&](const YAML::Node& node) { return ReadRule(node, into); });
  }

 private:
  template <typename... Args>
  Status Error(const YAML::Node& node, fmt::format_string<Args...> format, Args&&... args) const {
    return InvalidArgument("{}:{}: {}", name_, node.Mark().line + 1,
                           fmt::format(format, std::forward<Args>(args)...));
  }
  // A Status from elsewhere (a glob, a condition), placed at `node`.
  Status At(const YAML::Node& node, const Status& status) const {
    if (status.ok()) return status;
    return InvalidArgument("{}:{}: {}", name_, node.Mark().line + 1, status.message());
  }
  std::string Where(const YAML::Node& node) const {
    return fmt::format("{}:{}", name_, node.Mark().line + 1);
  }

  Status CheckKeys(const YAML::Node& map, std::initializer_list<std::string_view> known) const {
    for (const auto& entry : map) {
      if (!entry.first.IsScalar()) return Error(entry.first, "a key must be a plain name");
      const std::string& key = entry.first.Scalar();
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        return Error(entry.first, "unknown key '{}' (known: {})", key, fmt::join(known, ", "));
      }
    }
    return Status::Ok();
  }

  template <typename Function>
  Status ForEach(const YAML::Node& list, std::string_view what, Function&& read) const {
    if (!list || list.IsNull()) return Status::Ok();
    if (!list.IsSequence()) return Error(list, "'{}' must be a list", what);
    for (const YAML::Node& item : list) {
      if (!item.IsMap()) return Error(item, "each entry of '{}' must be a map", what);
      RETURN_IF_ERROR(read(item));
    }
    return Status::Ok();
  }

  Result<std::string> Scalar(const YAML::Node& node, std::string_view key) const {
    if (!node.IsScalar()) return Error(node, "'{}' must be a single value", key);
    if (node.Scalar().empty()) return Error(node, "'{}' must not be empty", key);
    return node.Scalar();
  }

  // A value that may be one scalar or a list of them.
  Result<std::vector<std::string>> OneOrMany(const YAML::Node& node, std::string_view key) const {
    std::vector<std::string> values;
    if (node.IsSequence()) {
      if (node.size() == 0) return Error(node, "'{}' must not be an empty list", key);
      for (const YAML::Node& item : node) {
        ASSIGN_OR_RETURN(std::string value, Scalar(item, key));
        values.push_back(std::move(value));
      }
    } else {
      ASSIGN_OR_RETURN(std::string value, Scalar(node, key));
      values.push_back(std::move(value));
    }
    return values;
  }

  static bool IsName(std::string_view text, std::string_view extra, size_t max_size) {
    if (text.empty() || text.size() > max_size) return false;
    return std::all_of(text.begin(), text.end(), [&](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             extra.find(c) != std::string_view::npos;
    });
  }

  Result<std::vector<std::string>> Tenants(const YAML::Node& node) const {
    ASSIGN_OR_RETURN(std::vector<std::string> tenants, OneOrMany(node, "tenant"));
    for (const std::string& tenant : tenants) {
      if (!IsName(tenant, "_.-", 64)) {
        return Error(node, "bad tenant name '{}' ([A-Za-z0-9_.-], at most 64)", tenant);
      }
    }
    return tenants;
  }

  Result<std::vector<std::string>> Roles(const YAML::Node& node, std::string_view key) const {
    ASSIGN_OR_RETURN(std::vector<std::string> roles, OneOrMany(node, key));
    for (const std::string& role : roles) {
      if (!IsName(role, "_.:-", 64)) {
        return Error(node, "bad role name '{}' ([A-Za-z0-9_.:-], at most 64)", role);
      }
    }
    return roles;
  }

  Result<std::string> ResourceType(const YAML::Node& node) const {
    ASSIGN_OR_RETURN(std::string type, Scalar(node, "type"));
    const auto& known = KnownResourceTypes();
    if (std::find(known.begin(), known.end(), type) == known.end()) {
      return Error(node, "unknown resource type '{}' (known: {})", type, fmt::join(known, ", "));
    }
    return type;
  }

  Result<std::vector<Glob>> Globs(const YAML::Node& node, std::string_view key) const {
    ASSIGN_OR_RETURN(std::vector<std::string> texts, OneOrMany(node, key));
    std::vector<Glob> globs;
    for (const std::string& text : texts) {
      Result<Glob> glob = Glob::Parse(text);
      if (!glob.ok()) return At(node, glob.status());
      globs.push_back(std::move(glob).value());
    }
    return globs;
  }

  Status ReadRole(const YAML::Node& node, PolicySource& into) const {
    RETURN_IF_ERROR(CheckKeys(node, {"name", "tenant", "inherits", "description"}));
    RoleDeclaration role;
    role.where = Where(node);
    role.tenant = std::string(kAnyTenant);
    if (!node["name"]) return Error(node, "a role needs a 'name'");
    ASSIGN_OR_RETURN(std::vector<std::string> name, Roles(node["name"], "name"));
    if (name.size() != 1) return Error(node["name"], "a role has one name");
    role.name = std::move(name.front());
    if (const YAML::Node tenant = node["tenant"]) {
      ASSIGN_OR_RETURN(role.tenant, Scalar(tenant, "tenant"));
      if (role.tenant != kAnyTenant && !IsName(role.tenant, "_.-", 64)) {
        return Error(tenant, "bad tenant name '{}' ([A-Za-z0-9_.-], at most 64, or *)",
                     role.tenant);
      }
    }
    if (const YAML::Node inherits = node["inherits"]) {
      ASSIGN_OR_RETURN(role.inherits, Roles(inherits, "inherits"));
    }
    into.roles.push_back(std::move(role));
    return Status::Ok();
  }

  Status ReadResource(const YAML::Node& node, PolicySource& into) const {
    RETURN_IF_ERROR(CheckKeys(node, {"type", "name", "attributes"}));
    if (!node["type"] || !node["name"]) return Error(node, "a resource needs 'type' and 'name'");
    ASSIGN_OR_RETURN(std::string type, ResourceType(node["type"]));
    ASSIGN_OR_RETURN(std::vector<Glob> names, Globs(node["name"], "name"));
    store::Attributes attributes;
    if (const YAML::Node map = node["attributes"]) {
      if (!map.IsMap()) return Error(map, "'attributes' must be a map of names to values");
      for (const auto& entry : map) {
        ASSIGN_OR_RETURN(std::string key, Scalar(entry.first, "attributes"));
        ASSIGN_OR_RETURN(std::vector<std::string> values, OneOrMany(entry.second, key));
        attributes[key] = fmt::format("{}", fmt::join(values, ","));
      }
    }
    for (Glob& name : names) {
      into.resources.push_back({type, std::move(name), attributes, Where(node)});
    }
    return Status::Ok();
  }

  Status ReadRule(const YAML::Node& node, PolicySource& into) const {
    RETURN_IF_ERROR(CheckKeys(node, {"id", "description", "effect", "principal", "action",
                                     "resource", "when", "obligations"}));
    Rule rule;
    rule.where = Where(node);
    if (!node["id"]) return Error(node, "a rule needs an 'id'");
    ASSIGN_OR_RETURN(rule.id, Scalar(node["id"], "id"));
    if (!IsName(rule.id, "_.:-", 128)) {
      return Error(node["id"], "bad rule id '{}' ([A-Za-z0-9_.:-], at most 128)", rule.id);
    }
    if (!node["effect"]) return Error(node, "rule '{}' needs an 'effect'", rule.id);
    ASSIGN_OR_RETURN(const std::string effect, Scalar(node["effect"], "effect"));
    if (effect != "permit" && effect != "forbid") {
      return Error(node["effect"], "unknown effect '{}' (permit or forbid)", effect);
    }
    rule.forbid = effect == "forbid";
    if (const YAML::Node principal = node["principal"]) {
      if (!principal.IsMap()) return Error(principal, "'principal' must be a map");
      RETURN_IF_ERROR(CheckKeys(principal, {"tenant", "role", "name"}));
      if (principal["tenant"]) {
        ASSIGN_OR_RETURN(rule.tenants, Tenants(principal["tenant"]));
      }
      if (principal["role"]) {
        ASSIGN_OR_RETURN(rule.role_names, Roles(principal["role"], "role"));
      }
      if (principal["name"]) {
        ASSIGN_OR_RETURN(rule.names, OneOrMany(principal["name"], "name"));
      }
    }
    if (!node["action"]) {
      return Error(node, "rule '{}' needs an 'action' (\"*\" for every action)", rule.id);
    }
    ASSIGN_OR_RETURN(rule.actions, Globs(node["action"], "action"));
    for (const Glob& action : rule.actions) {
      const auto& known = KnownActions();
      if (std::none_of(known.begin(), known.end(),
                       [&](std::string_view name) { return action.Matches(name); })) {
        return Error(node["action"], "action '{}' matches no known action (docs/policy.md)",
                     action.text());
      }
    }
    if (const YAML::Node resource = node["resource"]) {
      if (!resource.IsMap()) return Error(resource, "'resource' must be a map");
      RETURN_IF_ERROR(CheckKeys(resource, {"type", "name"}));
      if (resource["type"]) {
        ASSIGN_OR_RETURN(rule.resource_type, ResourceType(resource["type"]));
      }
      if (resource["name"]) {
        ASSIGN_OR_RETURN(rule.resource_names, Globs(resource["name"], "name"));
      }
    }
    if (const YAML::Node when = node["when"]) {
      if (!when.IsSequence()) return Error(when, "'when' must be a list of conditions");
      for (const YAML::Node& item : when) {
        ASSIGN_OR_RETURN(const std::string text, Scalar(item, "when"));
        Result<Condition> condition = Condition::Parse(text);
        if (!condition.ok()) return At(item, condition.status());
        rule.when.push_back(std::move(condition).value());
      }
    }
    if (const YAML::Node obligations = node["obligations"]) {
      if (rule.forbid) {
        return Error(obligations, "rule '{}' is a forbid: only permits carry obligations", rule.id);
      }
      ASSIGN_OR_RETURN(rule.obligations, OneOrMany(obligations, "obligations"));
      for (const std::string& obligation : rule.obligations) {
        if (!IsName(obligation, "_:.-", 64)) {
          return Error(obligations, "bad obligation '{}' (as in redact:pii, local_only)",
                       obligation);
        }
      }
      std::sort(rule.obligations.begin(), rule.obligations.end());
      rule.obligations.erase(std::unique(rule.obligations.begin(), rule.obligations.end()),
                             rule.obligations.end());
    }
    into.rules.push_back(std::move(rule));
    return Status::Ok();
  }

  std::string name_;
};

}  // namespace

const std::vector<std::string_view>& KnownActions() {
  static const std::vector<std::string_view> kActions = {
      "model:infer",
      "model:read",
      "model:load",
      "model:unload",
      "model:canary",
      "repository:read",
      "server:read",
      "server:write",
      "chat:create",
      "completions:create",
      "embeddings:create",
      "models:read",
      "guard:detect",
      "guard:redact",
      "guard:restore",
      "admin:reload",
      "admin:routes:read",
      "admin:tenants:read",
      "admin:tenants:write",
      "admin:principals:read",
      "admin:principals:write",
      "admin:keys:read",
      "admin:keys:write",
      "admin:keyring:read",
      "admin:keyring:write",
      "admin:roles:grant",
      "admin:audit:read",
      "admin:policy:read",
      // Vector indexes (api/pinecone_http.h), on resource type "index".
      "index:create",
      "index:delete",
      "index:read",
      "index:configure",
      "vectors:read",
      "vectors:write",
      "files:create",
      "files:read",
      "files:delete",
      // OpenAI's Vector Stores API (api/vector_stores_http.h), on resource type "vector_store".
      "vector_stores:create",
      "vector_stores:read",
      "vector_stores:update",
      "vector_stores:delete",
      "vector_stores:search",
  };
  return kActions;
}

const std::vector<std::string_view>& KnownResourceTypes() {
  static const std::vector<std::string_view> kTypes = {
      "model",    "route", "server",  "repository", "tenant", "principal", "key",         "policy",
      "document", "role",  "keyring", "audit",      "index",  "file",      "vector_store"};
  return kTypes;
}

Status ReadPolicyText(std::string_view text, std::string_view name, PolicySource& into) {
  try {
    return FileReader(name).Read(text, into);
  } catch (const YAML::Exception& error) {  // a conversion yaml-cpp refused
    return InvalidArgument("{}:{}: {}", name, error.mark.line + 1, error.msg);
  }
}

}  // namespace rampart::policy
