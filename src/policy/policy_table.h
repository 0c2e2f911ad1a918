#pragma once

// Requests written down: the input of `rampart policy explain` and the cases of golden decision
// tables (`rampart policy test`, RunPolicyTests in policy.h). Formats in docs/policy.md:
//
//   name: analyst may infer simple          # tables only
//   principal: {tenant: acme, name: alice, roles: [analyst], method: api_key,
//               attributes: {department: research, clearance: SECRET, groups: [a, b]}}
//   action: model:infer
//   resource: {type: model, name: simple, attributes: {classification: INTERNAL}}
//   context: {source_ip: 10.1.2.3, time: "2026-12-01T10:00:00+08:00", attributes: {k: v}}
//
// A list attribute is stored as its items joined by ',' (as the store keeps them).

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"
#include "identity/identity.h"
#include "policy/policy.h"
#include "store/store.h"

namespace rampart::policy {

// One request, owning what an AccessRequest only views.
struct RequestCase {
  std::string name;
  identity::Identity principal;
  std::string action;
  std::string resource_type;
  std::string resource_name;
  store::Attributes resource_attributes;
  std::string source_ip;
  int64_t now_unix = 0;  // 0: the wall clock at decision time
  store::Attributes context;

  // Views into this case: valid while it lives unchanged.
  AccessRequest View() const;
};

// Reads a request from YAML or JSON text (`name` names it in errors). The keys `expect`, `rules`
// and `obligations` are a table's and are refused here. InvalidArgument "<name>:<line>: <reason>".
Result<RequestCase> ParseRequest(std::string_view text, std::string_view name = "<request>");

// explain's REQUEST: inline text when it starts with '{', else the path of a file holding one.
Result<RequestCase> ReadRequest(const std::string& file_or_text);

// A readable account of a decision: the decision, its reason, the deciding rules, obligations,
// then the matched, unmatched and erroring rules with file:line and why. Ends with a newline.
std::string FormatExplanation(const Explanation& explanation);

// RFC 3339 date-time with an offset ("2026-12-01T10:00:00+08:00", "...Z", fractions ignored)
// to seconds since the epoch. InvalidArgument for anything else.
Result<int64_t> ParseRfc3339(std::string_view text);

}  // namespace rampart::policy
