#include "policy/roles.h"

#include <algorithm>
#include <set>

#include <fmt/ranges.h>

namespace rampart::policy {
namespace {

using DeclarationMap = std::map<std::pair<std::string, std::string>, const RoleDeclaration*>;

// The declaration of `role` in force in `tenant`: the tenant's own, else the one for "*".
const RoleDeclaration* Declaration(const DeclarationMap& declarations, const std::string& tenant,
                                   const std::string& role) {
  auto found = declarations.find({tenant, role});
  if (found == declarations.end() && tenant != kAnyTenant) {
    found = declarations.find({std::string(kAnyTenant), role});
  }
  return found == declarations.end() ? nullptr : found->second;
}

// Depth-first expansion of one tenant's closures, finding cycles on the way.
class Expander {
 public:
  Expander(const DeclarationMap& declarations, const std::string& tenant,
           const std::map<std::string, uint32_t, std::less<>>& ids)
      : declarations_(declarations), tenant_(tenant), ids_(ids) {}

  Result<RoleTable::Closures> Expand() {
    closures_.assign(ids_.size(), {});
    state_.assign(ids_.size(), State::kNew);
    for (const auto& [name, id] : ids_) RETURN_IF_ERROR(Visit(name, id));
    return std::move(closures_);
  }

 private:
  enum class State : uint8_t { kNew, kOnPath, kDone };

  Status Visit(const std::string& name, uint32_t id) {
    if (state_[id] == State::kDone) return Status::Ok();
    const RoleDeclaration* declaration = Declaration(declarations_, tenant_, name);
    if (state_[id] == State::kOnPath) {
      const auto start = std::find(path_.begin(), path_.end(), name);
      std::vector<std::string> cycle(start, path_.end());
      cycle.push_back(name);
      return InvalidArgument("{}: role inheritance cycle{}: {}", declaration->where,
                             tenant_ == kAnyTenant ? "" : fmt::format(" in tenant '{}'", tenant_),
                             fmt::join(cycle, " -> "));
    }
    state_[id] = State::kOnPath;
    path_.push_back(name);
    std::set<uint32_t> closure = {id};
    if (declaration != nullptr) {
      for (const std::string& parent : declaration->inherits) {
        const uint32_t parent_id = ids_.find(parent)->second;  // every declared name has an id
        RETURN_IF_ERROR(Visit(parent, parent_id));
        closure.insert(closures_[parent_id].begin(), closures_[parent_id].end());
      }
    }
    path_.pop_back();
    state_[id] = State::kDone;
    closures_[id].assign(closure.begin(), closure.end());
    return Status::Ok();
  }

  const DeclarationMap& declarations_;
  const std::string& tenant_;
  const std::map<std::string, uint32_t, std::less<>>& ids_;
  RoleTable::Closures closures_;
  std::vector<State> state_;
  std::vector<std::string> path_;
};

}  // namespace

Result<RoleTable> RoleTable::Build(const std::vector<RoleDeclaration>& declarations,
                                   const std::vector<std::string>& referenced) {
  DeclarationMap by_key;
  std::set<std::string> names(referenced.begin(), referenced.end());
  std::set<std::string> tenants;
  for (const RoleDeclaration& declaration : declarations) {
    const auto [existing, added] =
        by_key.emplace(std::make_pair(declaration.tenant, declaration.name), &declaration);
    if (!added) {
      return InvalidArgument("{}: role '{}' is declared twice for tenant '{}' (first at {})",
                             declaration.where, declaration.name, declaration.tenant,
                             existing->second->where);
    }
    names.insert(declaration.name);
    if (declaration.tenant != kAnyTenant) tenants.insert(declaration.tenant);
  }
  for (const RoleDeclaration& declaration : declarations) {
    for (const std::string& parent : declaration.inherits) {
      if (Declaration(by_key, declaration.tenant, parent) == nullptr) {
        return InvalidArgument(
            "{}: role '{}' inherits unknown role '{}'{}", declaration.where, declaration.name,
            parent,
            declaration.tenant == kAnyTenant
                ? " (a role for every tenant inherits only roles for every tenant)"
                : fmt::format(" (not declared for tenant '{}' nor for every tenant)",
                              declaration.tenant));
      }
    }
  }
  RoleTable table;
  table.names_.assign(names.begin(), names.end());
  for (uint32_t id = 0; id < table.names_.size(); ++id) table.ids_[table.names_[id]] = id;
  const std::string any_tenant(kAnyTenant);
  ASSIGN_OR_RETURN(table.any_tenant_, Expander(by_key, any_tenant, table.ids_).Expand());
  for (const std::string& tenant : tenants) {
    ASSIGN_OR_RETURN(table.by_tenant_[tenant], Expander(by_key, tenant, table.ids_).Expand());
  }
  return table;
}

std::optional<uint32_t> RoleTable::Id(std::string_view name) const {
  const auto found = ids_.find(name);
  if (found == ids_.end()) return std::nullopt;
  return found->second;
}

const RoleTable::Closures& RoleTable::ForTenant(std::string_view tenant) const {
  const auto found = by_tenant_.find(tenant);
  return found == by_tenant_.end() ? any_tenant_ : found->second;
}

}  // namespace rampart::policy
