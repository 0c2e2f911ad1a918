// Evaluating conditions: paths resolved against the request, typed comparisons, membership and
// time windows. Allocates nothing unless an error's reason is asked for.

#include <optional>
#include <string>

#include "core/ip_network.h"
#include "policy/condition.h"
#include "policy/condition_tree.h"

namespace rampart::policy {

using condition_tree::Op;
using condition_tree::Operand;
using condition_tree::PathKind;
namespace {

struct Value {
  enum class Kind : uint8_t { kString, kNumber, kList, kRoles } kind = Kind::kString;
  std::string_view text;
  double number = 0;
  const Operand* list = nullptr;
};

const std::string* Find(const store::Attributes* attributes, const std::string& name) {
  if (attributes == nullptr) return nullptr;
  const auto found = attributes->find(name);
  return found == attributes->end() ? nullptr : &found->second;
}

// The value of `operand`, or nullopt when its attribute is missing.
std::optional<Value> Resolve(const Operand& operand, const Facts& facts) {
  const AccessRequest& request = facts.request();
  const auto text = [](std::string_view value) { return Value{Value::Kind::kString, value}; };
  const auto attribute = [&](const std::string* value) -> std::optional<Value> {
    if (value == nullptr) return std::nullopt;
    return text(*value);
  };
  switch (operand.kind) {
    case Operand::Kind::kString: return text(operand.text);
    case Operand::Kind::kNumber: return Value{Value::Kind::kNumber, operand.text, operand.number};
    case Operand::Kind::kList: return Value{Value::Kind::kList, {}, 0, &operand};
    case Operand::Kind::kPath: break;
  }
  switch (operand.path) {
    case PathKind::kPrincipalTenant: return text(request.principal->tenant);
    case PathKind::kPrincipalName: return text(request.principal->principal);
    case PathKind::kPrincipalMethod: return text(identity::MethodName(request.principal->method));
    case PathKind::kPrincipalRoles: return Value{Value::Kind::kRoles};
    case PathKind::kPrincipalAttribute:
      return attribute(Find(&request.principal->attributes, operand.attribute));
    case PathKind::kResourceType: return text(request.resource.type);
    case PathKind::kResourceName: return text(request.resource.name);
    case PathKind::kResourceAttribute: return attribute(facts.ResourceAttribute(operand.attribute));
    case PathKind::kContextSourceIp:
      if (request.source_address.empty()) return std::nullopt;
      return text(request.source_address);
    case PathKind::kContextTime:
      return Value{Value::Kind::kNumber, {}, static_cast<double>(facts.now_unix())};
    case PathKind::kContextAttribute: return attribute(Find(request.context, operand.attribute));
    case PathKind::kAction: return text(request.action);
  }
  return std::nullopt;
}

std::optional<double> AsNumber(const Value& value) {
  if (value.kind == Value::Kind::kNumber) return value.number;
  if (value.kind == Value::Kind::kString) return ParseNumber(value.text);
  return std::nullopt;
}

Truth FromBool(bool value) { return value ? Truth::kTrue : Truth::kFalse; }

// An evaluation error; its reason is formatted only when the caller asked for it (`why`), so a
// decision allocates nothing for it.
template <typename... Args>
Truth Fail(std::string* why, fmt::format_string<Args...> format, Args&&... args) {
  if (why != nullptr) *why = fmt::format(format, std::forward<Args>(args)...);
  return Truth::kError;
}

template <typename T>
bool Order(Op op, const T& a, const T& b) {
  switch (op) {
    case Op::kEq: return a == b;
    case Op::kNe: return a != b;
    case Op::kLt: return a < b;
    case Op::kLe: return a <= b;
    case Op::kGt: return a > b;
    case Op::kGe: return a >= b;
    default: return false;
  }
}

Truth Compare(Op op, const Value& left, const Value& right, std::string* why) {
  if (left.kind == Value::Kind::kNumber || right.kind == Value::Kind::kNumber) {
    const std::optional<double> a = AsNumber(left);
    const std::optional<double> b = AsNumber(right);
    if (!a || !b) {
      return Fail(why, "'{}' is not a number", !a ? left.text : right.text);
    }
    return FromBool(Order(op, *a, *b));
  }
  const int left_level = ClassificationLevel(left.text);
  const int right_level = ClassificationLevel(right.text);
  if (left_level >= 0 && right_level >= 0) return FromBool(Order(op, left_level, right_level));
  if (op == Op::kEq || op == Op::kNe) return FromBool(Order(op, left.text, right.text));
  const std::optional<double> a = AsNumber(left);
  const std::optional<double> b = AsNumber(right);
  if (a && b) return FromBool(Order(op, *a, *b));
  return Fail(why, "'{}' and '{}' are neither numbers nor classification levels", left.text,
              right.text);
}

bool IsIpAddress(std::string_view text) {
  static const IpNetwork kAnyV4 = *IpNetwork::Parse("0.0.0.0/0");
  static const IpNetwork kAnyV6 = *IpNetwork::Parse("::/0");
  return kAnyV4.Contains(text) || kAnyV6.Contains(text);
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  return text;
}

Truth Member(const Value& item, const Value& collection, const Facts& facts, std::string* why) {
  if (item.kind == Value::Kind::kList || item.kind == Value::Kind::kRoles) {
    return Fail(why, "a list cannot be on the left of 'in'");
  }
  switch (collection.kind) {
    case Value::Kind::kRoles:
      return FromBool(item.kind == Value::Kind::kString && facts.HasRole(item.text));
    case Value::Kind::kString: {  // an attribute holding a list: its items joined by ','
      std::string_view rest = collection.text;
      while (true) {
        const size_t comma = rest.find(',');
        const std::string_view element = Trim(rest.substr(0, comma));
        if (item.kind == Value::Kind::kNumber) {
          const std::optional<double> number = ParseNumber(element);
          if (number && *number == item.number) return Truth::kTrue;
        } else if (element == item.text) {
          return Truth::kTrue;
        }
        if (comma == std::string_view::npos) return Truth::kFalse;
        rest.remove_prefix(comma + 1);
      }
    }
    case Value::Kind::kList: {
      const Operand& list = *collection.list;
      if (!list.networks.empty()) {
        for (const IpNetwork& network : list.networks) {
          if (network.Contains(item.text)) return Truth::kTrue;
        }
        if (item.kind != Value::Kind::kString || !IsIpAddress(item.text)) {
          return Fail(why, "'{}' is not an IP address", item.text);
        }
        return Truth::kFalse;
      }
      for (const Operand& element : list.items) {
        if (element.kind == Operand::Kind::kNumber) {
          const std::optional<double> number = AsNumber(item);
          if (number && *number == element.number) return Truth::kTrue;
        } else if (item.kind == Value::Kind::kString && element.text == item.text) {
          return Truth::kTrue;
        }
      }
      return Truth::kFalse;
    }
    case Value::Kind::kNumber: break;
  }
  return Fail(why, "'in' needs a list on its right");
}

}  // namespace

Truth EvaluateNode(const Condition::Node& node, const Facts& facts, std::string* why) {
  switch (node.op) {
    case Op::kNot: {
      const Truth inner = EvaluateNode(*node.inner, facts, why);
      if (inner == Truth::kError) return inner;
      return inner == Truth::kTrue ? Truth::kFalse : Truth::kTrue;
    }
    case Op::kHas: return FromBool(Resolve(node.left, facts).has_value());
    case Op::kWithin: {
      const std::optional<bool> inside = node.window->Contains(facts.now_unix());
      if (!inside) return Fail(why, "the time zone data could not give the offset");
      return FromBool(*inside);
    }
    default: break;
  }
  const std::optional<Value> left = Resolve(node.left, facts);
  if (!left) return Fail(why, "{} is missing", node.left.text);
  const std::optional<Value> right = Resolve(node.right, facts);
  if (!right) return Fail(why, "{} is missing", node.right.text);
  if (node.op == Op::kIn) return Member(*left, *right, facts, why);
  return Compare(node.op, *left, *right, why);
}

int ClassificationLevel(std::string_view text) {
  static constexpr std::string_view kLevels[] = {"PUBLIC", "INTERNAL", "CONFIDENTIAL", "SECRET"};
  for (int level = 0; level < 4; ++level) {
    const std::string_view name = kLevels[level];
    if (name.size() != text.size()) continue;
    bool same = true;
    for (size_t i = 0; i < name.size() && same; ++i) {
      same = (text[i] & ~0x20) == name[i];
    }
    if (same) return level;
  }
  return -1;
}

Truth Condition::Evaluate(const Facts& facts, std::string* why) const {
  return EvaluateNode(*root_, facts, why);
}

}  // namespace rampart::policy
