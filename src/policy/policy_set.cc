// The loaded policy set: rules indexed by tenant, action and resource type, decided with Cedar's
// semantics (policy.h), and the engine that swaps sets on reload.

#include <algorithm>
#include <array>
#include <chrono>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/ranges.h>

#include "policy/compiled.h"
#include "policy/policy.h"
#include "policy/roles.h"

namespace rampart::policy {
namespace {

using RuleList = std::vector<uint32_t>;  // indices into the rules, ascending

// The rules of one (tenant, action) cell, by resource type.
struct TypeBuckets {
  std::map<std::string, RuleList, std::less<>> by_type;
  RuleList any_type;

  void Add(const Rule& rule, uint32_t index) {
    RuleList& list = rule.resource_type.empty() ? any_type : by_type[rule.resource_type];
    if (list.empty() || list.back() != index) list.push_back(index);
  }
  template <typename Visit>
  void ForEach(std::string_view type, Visit& visit) const {
    if (const auto found = by_type.find(type); found != by_type.end()) visit(found->second);
    if (!any_type.empty()) visit(any_type);
  }
};

// One tenant's rules (or those for any tenant), by action: exact names in a map, patterns in a
// list scanned per decision (one entry per distinct pattern, so few).
struct ActionIndex {
  std::map<std::string, TypeBuckets, std::less<>> exact;
  std::vector<std::pair<Glob, TypeBuckets>> patterns;

  void Add(const Rule& rule, uint32_t index) {
    for (const Glob& action : rule.actions) {
      if (action.is_literal()) {
        exact[action.text()].Add(rule, index);
        continue;
      }
      auto found = std::find_if(patterns.begin(), patterns.end(), [&](const auto& entry) {
        return entry.first.text() == action.text();
      });
      if (found == patterns.end()) {
        patterns.emplace_back(action, TypeBuckets());
        found = patterns.end() - 1;
      }
      found->second.Add(rule, index);
    }
  }
  template <typename Visit>
  void ForEach(std::string_view action, std::string_view type, Visit& visit) const {
    if (const auto found = exact.find(action); found != exact.end()) {
      found->second.ForEach(type, visit);
    }
    for (const auto& [pattern, buckets] : patterns) {
      if (pattern.Matches(action)) buckets.ForEach(type, visit);
    }
  }
};

// What conditions and rules read for one decision. Lives on the stack; allocates nothing.
class RequestFacts final : public Facts {
 public:
  RequestFacts(const AccessRequest& request, const RoleTable& roles,
               const std::vector<ResourceEntry>* resources)
      : request_(request),
        roles_(roles),
        closures_(roles.ForTenant(request.principal->tenant)),
        resources_(resources) {
    now_ = request.now_unix != 0 ? request.now_unix
                                 : std::chrono::duration_cast<std::chrono::seconds>(
                                       std::chrono::system_clock::now().time_since_epoch())
                                       .count();
    for (const std::string& granted : request.principal->roles) {
      const std::optional<uint32_t> id = roles.Id(granted);
      if (!id) continue;  // neither declared nor named by a rule: implies nothing that matters
      if (granted_count_ == granted_.size()) {
        overflow_ = true;
        break;
      }
      granted_[granted_count_++] = &closures_[*id];
    }
  }

  const AccessRequest& request() const override { return request_; }
  int64_t now_unix() const override { return now_; }

  bool HasRole(std::string_view role) const override {
    if (const std::optional<uint32_t> id = roles_.Id(role)) return ImpliesRole(*id);
    const auto& granted = request_.principal->roles;
    return std::find(granted.begin(), granted.end(), role) != granted.end();
  }

  const std::string* ResourceAttribute(const std::string& name) const override {
    if (resources_ != nullptr) {
      for (const ResourceEntry& entry : *resources_) {  // the most specific pattern first
        const auto found = entry.attributes.find(name);
        if (found != entry.attributes.end() && entry.name.Matches(request_.resource.name)) {
          return &found->second;
        }
      }
    }
    if (request_.resource.attributes == nullptr) return nullptr;
    const auto found = request_.resource.attributes->find(name);
    return found == request_.resource.attributes->end() ? nullptr : &found->second;
  }

  // Whether a granted role is `role` or inherits it in the principal's tenant.
  bool ImpliesRole(uint32_t role) const {
    for (size_t i = 0; i < granted_count_; ++i) {
      if (std::binary_search(granted_[i]->begin(), granted_[i]->end(), role)) return true;
    }
    if (!overflow_) return false;
    for (const std::string& granted : request_.principal->roles) {  // the rare long role list
      const std::optional<uint32_t> id = roles_.Id(granted);
      if (id && std::binary_search(closures_[*id].begin(), closures_[*id].end(), role)) {
        return true;
      }
    }
    return false;
  }

 private:
  const AccessRequest& request_;
  const RoleTable& roles_;
  const RoleTable::Closures& closures_;
  const std::vector<ResourceEntry>* resources_;
  int64_t now_ = 0;
  std::array<const std::vector<uint32_t>*, 8> granted_{};
  size_t granted_count_ = 0;
  bool overflow_ = false;
};

template <typename T>
bool Contains(const std::vector<T>& list, std::string_view value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

// Whether `rule` applies to the request whose scope (tenant, action, resource type) the index
// already matched. Conditions combine as Kleene's "and": any false makes the rule not apply,
// else any error makes it an error, whatever their order. `detail`, when given, receives the
// first part that did not match, or the error.
Truth Applies(const Rule& rule, const RequestFacts& facts, std::string* detail) {
  const AccessRequest& request = facts.request();
  const identity::Identity& principal = *request.principal;
  // The first part that did not match, for explanations (formatted only when asked for).
  const auto no = [detail](auto&& describe) {
    if (detail != nullptr) *detail = describe();
    return Truth::kFalse;
  };
  if (!rule.tenants.empty() && !Contains(rule.tenants, principal.tenant)) {
    return no([&] {
      return fmt::format("principal tenant '{}' is not one of [{}]", principal.tenant,
                         fmt::join(rule.tenants, ", "));
    });
  }
  if (!rule.roles.empty() && std::none_of(rule.roles.begin(), rule.roles.end(),
                                          [&](uint32_t id) { return facts.ImpliesRole(id); })) {
    return no([&] {
      return fmt::format("principal holds none of the roles [{}] (granted: [{}])",
                         fmt::join(rule.role_names, ", "), fmt::join(principal.roles, ", "));
    });
  }
  if (!rule.names.empty() && !Contains(rule.names, principal.principal)) {
    return no([&] {
      return fmt::format("principal name '{}' is not one of [{}]", principal.principal,
                         fmt::join(rule.names, ", "));
    });
  }
  if (!rule.resource_names.empty() &&
      std::none_of(rule.resource_names.begin(), rule.resource_names.end(),
                   [&](const Glob& name) { return name.Matches(request.resource.name); })) {
    return no([&] {
      std::vector<std::string_view> names;
      for (const Glob& name : rule.resource_names) names.push_back(name.text());
      return fmt::format("resource name '{}' matches none of [{}]", request.resource.name,
                         fmt::join(names, ", "));
    });
  }
  const Condition* erring = nullptr;
  std::string why;
  for (const Condition& condition : rule.when) {
    const Truth truth =
        condition.Evaluate(facts, erring == nullptr && detail != nullptr ? &why : nullptr);
    if (truth == Truth::kFalse) {
      return no([&] { return fmt::format("condition '{}' is false", condition.text()); });
    }
    if (truth == Truth::kError && erring == nullptr) erring = &condition;
  }
  if (erring != nullptr) {
    if (detail != nullptr) *detail = fmt::format("condition '{}': {}", erring->text(), why);
    return Truth::kError;
  }
  return Truth::kTrue;
}

void SortUnique(std::vector<std::string>& values) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
}

class CompiledPolicySet final : public PolicySet {
 public:
  static Result<std::shared_ptr<const PolicySet>> Build(PolicySource source);

  Decision Decide(const AccessRequest& request) const override {
    Decision decision;
    if (request.principal == nullptr) {
      decision.reason = "no principal";
      return decision;
    }
    const RequestFacts facts(request, roles_, Resources(request.resource.type));
    // Forbids first: one that applies, or whose condition errs, denies.
    auto forbids = [&](const RuleList& list) {
      for (const uint32_t index : list) {
        if (index >= first_permit_) break;
        if (Applies(rules_[index], facts, nullptr) != Truth::kFalse) {
          decision.rules.push_back(rules_[index].id);
        }
      }
    };
    ForEachCandidateList(request, forbids);
    if (!decision.rules.empty()) {
      SortUnique(decision.rules);
      decision.reason = fmt::format("denied by rule '{}'", decision.rules.front());
      return decision;
    }
    auto permits = [&](const RuleList& list) {
      for (auto it = std::lower_bound(list.begin(), list.end(), first_permit_); it != list.end();
           ++it) {
        const Rule& rule = rules_[*it];
        if (Applies(rule, facts, nullptr) != Truth::kTrue) continue;
        decision.rules.push_back(rule.id);
        decision.obligations.insert(decision.obligations.end(), rule.obligations.begin(),
                                    rule.obligations.end());
      }
    };
    ForEachCandidateList(request, permits);
    if (decision.rules.empty()) {
      decision.reason = fmt::format("no rule permits {} on {} '{}'", request.action,
                                    request.resource.type, request.resource.name);
      return decision;
    }
    decision.allowed = true;
    SortUnique(decision.rules);
    SortUnique(decision.obligations);
    return decision;
  }

  Explanation Explain(const AccessRequest& request) const override {
    Explanation explanation;
    explanation.decision = Decide(request);
    if (request.principal == nullptr) return explanation;
    const RequestFacts facts(request, roles_, Resources(request.resource.type));
    std::set<uint32_t> candidates;
    auto collect = [&](const RuleList& list) { candidates.insert(list.begin(), list.end()); };
    ForEachCandidateList(request, collect);
    for (const uint32_t index : candidates) {
      const Rule& rule = rules_[index];
      Explanation::RuleTrace trace{rule.id, rule.forbid ? "forbid" : "permit", rule.where, ""};
      switch (Applies(rule, facts, &trace.detail)) {
        case Truth::kTrue: explanation.matched.push_back(std::move(trace)); break;
        case Truth::kFalse: explanation.unmatched.push_back(std::move(trace)); break;
        case Truth::kError: explanation.erroring.push_back(std::move(trace)); break;
      }
    }
    return explanation;
  }

  size_t rule_count() const override { return rules_.size(); }

  bool Holds(std::string_view tenant, const std::vector<std::string>& granted,
             std::string_view role) const override {
    if (std::find(granted.begin(), granted.end(), role) != granted.end()) return true;
    const std::optional<uint32_t> wanted = roles_.Id(role);
    if (!wanted) return false;  // a role the policy never names is held only as itself
    const RoleTable::Closures& closures = roles_.ForTenant(tenant);
    return std::any_of(granted.begin(), granted.end(), [&](const std::string& each) {
      const std::optional<uint32_t> id = roles_.Id(each);
      return id && std::binary_search(closures[*id].begin(), closures[*id].end(), *wanted);
    });
  }

 private:
  explicit CompiledPolicySet(RoleTable roles) : roles_(std::move(roles)) {}

  const std::vector<ResourceEntry>* Resources(std::string_view type) const {
    const auto found = resources_.find(type);
    return found == resources_.end() ? nullptr : &found->second;
  }

  template <typename Visit>
  void ForEachCandidateList(const AccessRequest& request, Visit& visit) const {
    any_tenant_.ForEach(request.action, request.resource.type, visit);
    if (const auto found = by_tenant_.find(request.principal->tenant); found != by_tenant_.end()) {
      found->second.ForEach(request.action, request.resource.type, visit);
    }
  }

  std::vector<Rule> rules_;  // forbids first, each effect by id: the files' order plays no part
  uint32_t first_permit_ = 0;
  RoleTable roles_;
  std::map<std::string, std::vector<ResourceEntry>, std::less<>> resources_;  // by type
  ActionIndex any_tenant_;
  std::map<std::string, ActionIndex, std::less<>> by_tenant_;
};

Result<std::shared_ptr<const PolicySet>> CompiledPolicySet::Build(PolicySource source) {
  std::map<std::string_view, const Rule*> ids;
  std::vector<std::string> referenced_roles;
  for (const Rule& rule : source.rules) {
    const auto [existing, added] = ids.emplace(rule.id, &rule);
    if (!added) {
      return InvalidArgument("{}: duplicate rule id '{}' (first at {})", rule.where, rule.id,
                             existing->second->where);
    }
    referenced_roles.insert(referenced_roles.end(), rule.role_names.begin(), rule.role_names.end());
  }
  ASSIGN_OR_RETURN(RoleTable roles, RoleTable::Build(source.roles, referenced_roles));
  std::shared_ptr<CompiledPolicySet> set(new CompiledPolicySet(std::move(roles)));

  for (ResourceEntry& entry : source.resources) {
    std::vector<ResourceEntry>& entries = set->resources_[entry.type];
    for (const ResourceEntry& other : entries) {
      if (other.name.text() == entry.name.text()) {
        return InvalidArgument("{}: resource {} '{}' is described twice (first at {})", entry.where,
                               entry.type, entry.name.text(), other.where);
      }
    }
    entries.push_back(std::move(entry));
  }
  for (auto& [type, entries] : set->resources_) {
    std::sort(entries.begin(), entries.end(), [](const ResourceEntry& a, const ResourceEntry& b) {
      if (a.name.literal_characters() != b.name.literal_characters()) {
        return a.name.literal_characters() > b.name.literal_characters();
      }
      return a.name.text() < b.name.text();
    });
  }

  set->rules_ = std::move(source.rules);
  std::sort(set->rules_.begin(), set->rules_.end(), [](const Rule& a, const Rule& b) {
    return a.forbid != b.forbid ? a.forbid : a.id < b.id;
  });
  set->first_permit_ = static_cast<uint32_t>(std::find_if(set->rules_.begin(), set->rules_.end(),
                                                          [](const Rule& r) { return !r.forbid; }) -
                                             set->rules_.begin());
  for (uint32_t index = 0; index < set->rules_.size(); ++index) {
    Rule& rule = set->rules_[index];
    for (const std::string& role : rule.role_names) rule.roles.push_back(*set->roles_.Id(role));
    if (rule.tenants.empty()) {
      set->any_tenant_.Add(rule, index);
    } else {
      for (const std::string& tenant : rule.tenants) set->by_tenant_[tenant].Add(rule, index);
    }
  }
  return std::shared_ptr<const PolicySet>(std::move(set));
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return InvalidArgument("{}: cannot open the policy file", path);
  std::ostringstream text;
  text << file.rdbuf();
  if (file.bad()) return InvalidArgument("{}: cannot read the policy file", path);
  return text.str();
}

}  // namespace

Result<std::shared_ptr<const PolicySet>> BuildPolicySet(PolicySource source) {
  return CompiledPolicySet::Build(std::move(source));
}

Result<std::shared_ptr<const PolicySet>> PolicySet::LoadFiles(
    const std::vector<std::string>& paths) {
  PolicySource source;
  for (const std::string& path : paths) {
    ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
    RETURN_IF_ERROR(ReadPolicyText(text, path, source));
  }
  return BuildPolicySet(std::move(source));
}

Result<std::shared_ptr<const PolicySet>> PolicySet::LoadText(std::string_view text,
                                                             std::string_view name) {
  PolicySource source;
  RETURN_IF_ERROR(ReadPolicyText(text, name, source));
  return BuildPolicySet(std::move(source));
}

std::shared_ptr<const PolicySet> PolicySet::Empty() {
  static const std::shared_ptr<const PolicySet> kEmpty = *BuildPolicySet(PolicySource());
  return kEmpty;
}

Result<std::unique_ptr<PolicyEngine>> PolicyEngine::Open(std::vector<std::string> paths) {
  std::unique_ptr<PolicyEngine> engine(new PolicyEngine(std::move(paths)));
  ASSIGN_OR_RETURN(engine->current_, PolicySet::LoadFiles(engine->paths_));
  return engine;
}

std::shared_ptr<const PolicySet> PolicyEngine::Current() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return current_;
}

Status PolicyEngine::Reload() {
  ASSIGN_OR_RETURN(std::shared_ptr<const PolicySet> loaded, PolicySet::LoadFiles(paths_));
  std::lock_guard<std::mutex> lock(mutex_);
  current_ = std::move(loaded);
  return Status::Ok();
}

}  // namespace rampart::policy
