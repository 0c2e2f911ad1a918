#pragma once

// Roles with per-tenant inheritance, expanded at load: for every tenant that declares roles of
// its own (and for every other tenant, through the roles declared for "*"), each role's closure,
// the roles it implies itself included. A decision then checks "does a granted role imply the
// rule's role" by a binary search, with no graph walk. Internal to the policy module; immutable
// once built, so thread-safe to read.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "policy/compiled.h"

namespace rampart::policy {

class RoleTable {
 public:
  // By role id: the sorted ids the role implies, itself included.
  using Closures = std::vector<std::vector<uint32_t>>;

  // Checks the declarations (one per name and tenant; every role named in `inherits` declared
  // for the same tenant or for "*"; no cycle) and expands them. `referenced` are the role names
  // the rules use, which get ids too (an undeclared role implies only itself).
  // InvalidArgument "<file>:<line>: <reason>".
  static Result<RoleTable> Build(const std::vector<RoleDeclaration>& declarations,
                                 const std::vector<std::string>& referenced);

  // The id of a role the policy declares or a rule names; nullopt for any other.
  std::optional<uint32_t> Id(std::string_view name) const;
  const std::string& Name(uint32_t id) const { return names_[id]; }
  // The closures in force in `tenant` (its own declarations over those for every tenant).
  const Closures& ForTenant(std::string_view tenant) const;

 private:
  std::vector<std::string> names_;  // by id, sorted
  std::map<std::string, uint32_t, std::less<>> ids_;
  Closures any_tenant_;
  std::map<std::string, Closures, std::less<>> by_tenant_;  // tenants with their own roles
};

}  // namespace rampart::policy
