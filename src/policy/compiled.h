#pragma once

// The policy files' contents once read and checked (policy_load.cc), before and after indexing
// (policy_set.cc). Internal to the policy module.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "policy/condition.h"
#include "policy/glob.h"
#include "store/store.h"

namespace rampart::policy {

inline constexpr std::string_view kAnyTenant = "*";

struct Rule {
  std::string id;
  bool forbid = false;
  std::string where;                     // "main.yaml:12"
  std::vector<std::string> tenants;      // empty = any tenant
  std::vector<std::string> role_names;   // any of (with inheritance); empty = any
  std::vector<uint32_t> roles;           // role_names as role ids (set when indexed)
  std::vector<std::string> names;        // principal names; empty = any
  std::vector<Glob> actions;             // never empty
  std::string resource_type;             // empty = any
  std::vector<Glob> resource_names;      // empty = any
  std::vector<Condition> when;           // all must hold
  std::vector<std::string> obligations;  // permits only; sorted, unique
};

struct RoleDeclaration {
  std::string name;
  std::string tenant;  // kAnyTenant: the role exists in every tenant
  std::vector<std::string> inherits;
  std::string where;
};

struct ResourceEntry {
  std::string type;
  Glob name;
  store::Attributes attributes;
  std::string where;
};

// Everything the files say, merged; nothing checked across files yet.
struct PolicySource {
  std::vector<RoleDeclaration> roles;
  std::vector<ResourceEntry> resources;
  std::vector<Rule> rules;
};

// Reads one policy file's text into `into`. InvalidArgument "<name>:<line>: <reason>".
Status ReadPolicyText(std::string_view text, std::string_view name, PolicySource& into);

// Checks what spans files (duplicate ids, roles and their inheritance) and indexes the rules.
// InvalidArgument "<file>:<line>: <reason>".
Result<std::shared_ptr<const PolicySet>> BuildPolicySet(PolicySource source);

}  // namespace rampart::policy
