#pragma once

// The parsed form of policy conditions, shared by the parser (condition.cc) and the evaluator
// (condition_eval.cc). Internal to the policy module.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/ip_network.h"
#include "policy/condition.h"
#include "policy/time_window.h"

namespace rampart::policy {
namespace condition_tree {

enum class PathKind : uint8_t {
  kPrincipalTenant,
  kPrincipalName,
  kPrincipalMethod,
  kPrincipalRoles,
  kPrincipalAttribute,
  kResourceType,
  kResourceName,
  kResourceAttribute,
  kContextSourceIp,
  kContextTime,
  kContextAttribute,
  kAction,
};

struct Operand {
  enum class Kind : uint8_t { kPath, kString, kNumber, kList } kind = Kind::kString;
  PathKind path = PathKind::kAction;
  std::string attribute;  // for the *Attribute paths
  std::string text;       // a string's value, a path's or number's source text
  double number = 0;
  std::vector<Operand> items;       // a list's strings and numbers
  std::vector<IpNetwork> networks;  // a list's items when every one is an IP network
};

enum class Op : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kWithin, kHas, kNot };

}  // namespace condition_tree

struct Condition::Node {
  condition_tree::Op op = condition_tree::Op::kEq;
  condition_tree::Operand left;
  condition_tree::Operand right;
  std::optional<TimeWindow> window;   // kWithin
  std::shared_ptr<const Node> inner;  // kNot
};

// The whole text as a number ("12", "-3.5"), or nullopt.
std::optional<double> ParseNumber(std::string_view text);

// Evaluates a parsed condition; `why`, when given, receives the reason for an error.
Truth EvaluateNode(const Condition::Node& node, const Facts& facts, std::string* why);

}  // namespace rampart::policy
