#pragma once

// Policy conditions (a rule's `when:` list): a small language parsed once, at load, into a tree
// that a decision evaluates without parsing or allocating (docs/policy.md has the reference).
//
//   condition := operand OP operand | "has" path | "not" condition
//   OP        := == != < <= > >= | in | within
//   operand   := path | "string" | number | [ item, ... ]
//   path      := principal.{tenant,name,method,roles,<attribute>} | resource.{type,name,<attr>}
//              | context.{source_ip,time,<attribute>} | action
//
// Evaluation gives true, false or an error: a path whose attribute is missing (unless under
// `has`), a value of the wrong type (an ordering between strings that are neither numbers nor
// classification levels PUBLIC < INTERNAL < CONFIDENTIAL < SECRET, a source address that is not
// an IP address when matched against networks), or a time zone failure. What an error means is
// the policy's business (a forbid that errors denies; a permit that errors does not apply).
//
// Values; Evaluate is const and thread-safe.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "policy/policy.h"

namespace rampart::policy {

// What a condition reads, for one decision.
class Facts {
 public:
  virtual ~Facts() = default;
  virtual const AccessRequest& request() const = 0;
  // context.time, in seconds since the epoch.
  virtual int64_t now_unix() const = 0;
  // Whether the principal holds `role`, granted or inherited in its tenant (principal.roles).
  virtual bool HasRole(std::string_view role) const = 0;
  // A resource's attribute: the policy files' `resources` entries, then the request's own;
  // null when neither has it.
  virtual const std::string* ResourceAttribute(const std::string& name) const = 0;
};

enum class Truth : uint8_t { kFalse, kTrue, kError };

class Condition {
 public:
  // InvalidArgument with the reason and the condition ("unknown path 'principal.x.y' in ...").
  static Result<Condition> Parse(std::string_view text);

  // `why`, when given, receives the reason for an error ("principal.clearance is missing").
  Truth Evaluate(const Facts& facts, std::string* why = nullptr) const;

  const std::string& text() const { return text_; }

  struct Node;  // the parsed tree (condition.cc)

 private:
  std::string text_;
  std::shared_ptr<const Node> root_;
};

// The classification level of `text` (PUBLIC 0 < INTERNAL 1 < CONFIDENTIAL 2 < SECRET 3, any
// letter case), or -1.
int ClassificationLevel(std::string_view text);

}  // namespace rampart::policy
