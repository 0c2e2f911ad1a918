#include "knowledge/index/filter.h"

#include <algorithm>
#include <string>
#include <utility>

namespace rampart::knowledge {
namespace {

using Op = FilterNode::Op;
using Scalar = FilterNode::Scalar;

struct OperatorName {
  std::string_view name;
  Op op;
};
constexpr OperatorName kComparisons[] = {
    {"$eq", Op::kEq},   {"$ne", Op::kNe},   {"$gt", Op::kGt},
    {"$gte", Op::kGte}, {"$lt", Op::kLt},   {"$lte", Op::kLte},
    {"$in", Op::kIn},   {"$nin", Op::kNin}, {"$exists", Op::kExists},
};

class FilterParser {
 public:
  Result<FilterNode> ParseObject(const json::Value& object, const std::string& path, size_t depth) {
    if (depth > kMaxFilterDepth) {
      return InvalidArgument("{}: filters nest at most {} levels deep", path, kMaxFilterDepth);
    }
    if (!object.IsObject()) {
      return InvalidArgument("{}: a filter must be an object, not {}", path, object.KindName());
    }
    FilterNode node;  // an implicit $and of the object's members
    node.op = Op::kAnd;
    for (auto [key_view, element] : object.Object()) {
      std::string_view key = key_view;
      json::Value value(element);
      std::string child_path = fmt::format("{}.{}", path, key);
      if (key == "$and" || key == "$or") {
        ASSIGN_OR_RETURN(FilterNode child, ParseCombination(key, value, child_path, depth));
        node.children.push_back(std::move(child));
      } else if (!key.empty() && key.front() == '$') {
        return InvalidArgument("{}: unknown operator '{}' (field names cannot start with '$')",
                               path, key);
      } else {
        RETURN_IF_ERROR(ParseField(key, value, child_path, depth, node.children));
      }
    }
    if (node.children.size() == 1) return std::move(node.children.front());
    return node;
  }

 private:
  Status CountTerm(const std::string& path) {
    if (++terms_ > kMaxFilterTerms) {
      return InvalidArgument("{}: a filter holds at most {} comparisons and $in/$nin values", path,
                             kMaxFilterTerms);
    }
    return Status::Ok();
  }

  Result<FilterNode> ParseCombination(std::string_view key, const json::Value& value,
                                      const std::string& path, size_t depth) {
    if (!value.IsArray() || value.Array().size() == 0) {
      return InvalidArgument("{}: {} needs a non-empty array of filters", path, key);
    }
    FilterNode node;
    node.op = key == "$and" ? Op::kAnd : Op::kOr;
    size_t index = 0;
    for (auto element : value.Array()) {
      ASSIGN_OR_RETURN(
          FilterNode child,
          ParseObject(json::Value(element), fmt::format("{}[{}]", path, index), depth + 1));
      node.children.push_back(std::move(child));
      ++index;
    }
    return node;
  }

  // A field's condition: a bare value ($eq) or an object of operators (all must hold).
  Status ParseField(std::string_view field, const json::Value& value, const std::string& path,
                    size_t depth, std::vector<FilterNode>& out) {
    if (!value.IsObject()) {
      FilterNode node;
      node.op = Op::kEq;
      node.field = std::string(field);
      ASSIGN_OR_RETURN(Scalar operand, ParseScalar(value, path, "$eq"));
      node.operands.push_back(std::move(operand));
      RETURN_IF_ERROR(CountTerm(path));
      out.push_back(std::move(node));
      return Status::Ok();
    }
    if (depth + 1 > kMaxFilterDepth) {
      return InvalidArgument("{}: filters nest at most {} levels deep", path, kMaxFilterDepth);
    }
    if (value.Object().size() == 0) {
      return InvalidArgument("{}: an operator object needs at least one operator", path);
    }
    for (auto [op_view, element] : value.Object()) {
      std::string_view op_name = op_view;
      json::Value operand(element);
      std::string op_path = fmt::format("{}.{}", path, op_name);
      const OperatorName* found = nullptr;
      for (const OperatorName& candidate : kComparisons) {
        if (candidate.name == op_name) found = &candidate;
      }
      if (found == nullptr) {
        return InvalidArgument("{}: unknown operator '{}'", path, op_name);
      }
      FilterNode node;
      node.op = found->op;
      node.field = std::string(field);
      RETURN_IF_ERROR(CountTerm(op_path));
      switch (found->op) {
        case Op::kEq:
        case Op::kNe: {
          ASSIGN_OR_RETURN(Scalar scalar, ParseScalar(operand, op_path, op_name));
          node.operands.push_back(std::move(scalar));
          break;
        }
        case Op::kGt:
        case Op::kGte:
        case Op::kLt:
        case Op::kLte: {
          if (operand.kind() != json::Kind::kNumber) {
            return InvalidArgument("{}: {} needs a number, not {}", op_path, op_name,
                                   operand.KindName());
          }
          ASSIGN_OR_RETURN(double number, operand.GetDouble(op_path));
          node.operands.emplace_back(number);
          break;
        }
        case Op::kIn:
        case Op::kNin: {
          if (!operand.IsArray()) {
            return InvalidArgument("{}: {} needs an array of strings, numbers or booleans, not {}",
                                   op_path, op_name, operand.KindName());
          }
          size_t index = 0;
          for (auto item : operand.Array()) {
            std::string item_path = fmt::format("{}[{}]", op_path, index++);
            RETURN_IF_ERROR(CountTerm(item_path));
            ASSIGN_OR_RETURN(Scalar scalar, ParseScalar(json::Value(item), item_path, op_name));
            node.operands.push_back(std::move(scalar));
          }
          break;
        }
        case Op::kExists: {
          if (operand.kind() != json::Kind::kBool) {
            return InvalidArgument("{}: $exists needs a boolean, not {}", op_path,
                                   operand.KindName());
          }
          ASSIGN_OR_RETURN(bool exists, operand.GetBool(op_path));
          node.operands.emplace_back(exists);
          break;
        }
        default: break;
      }
      out.push_back(std::move(node));
    }
    return Status::Ok();
  }

  static Result<Scalar> ParseScalar(const json::Value& value, const std::string& path,
                                    std::string_view op_name) {
    switch (value.kind()) {
      case json::Kind::kString: {
        ASSIGN_OR_RETURN(std::string_view text, value.GetString(path));
        return Scalar(std::string(text));
      }
      case json::Kind::kNumber: {
        ASSIGN_OR_RETURN(double number, value.GetDouble(path));
        return Scalar(number);
      }
      case json::Kind::kBool: {
        ASSIGN_OR_RETURN(bool flag, value.GetBool(path));
        return Scalar(flag);
      }
      default:
        return InvalidArgument("{}: {} needs a string, number or boolean, not {}", path, op_name,
                               value.KindName());
    }
  }

  size_t terms_ = 0;
};

// Whether a stored value equals an operand: same type and value; a list equals when one of its
// elements does.
bool ValueEquals(const MetadataValue& value, const Scalar& operand) {
  if (const auto* list = std::get_if<std::vector<std::string>>(&value)) {
    const auto* text = std::get_if<std::string>(&operand);
    return text != nullptr && std::find(list->begin(), list->end(), *text) != list->end();
  }
  if (value.index() != operand.index()) return false;
  switch (value.index()) {
    case 0: return std::get<std::string>(value) == std::get<std::string>(operand);
    case 1: return std::get<double>(value) == std::get<double>(operand);
    case 2: return std::get<bool>(value) == std::get<bool>(operand);
  }
  return false;
}

bool AnyEquals(const MetadataValue& value, const std::vector<Scalar>& operands) {
  return std::any_of(operands.begin(), operands.end(),
                     [&](const Scalar& operand) { return ValueEquals(value, operand); });
}

bool CompareNumber(Op op, const MetadataValue& value, const Scalar& operand) {
  const double* number = std::get_if<double>(&value);
  const double* bound = std::get_if<double>(&operand);
  if (number == nullptr || bound == nullptr) return false;
  switch (op) {
    case Op::kGt: return *number > *bound;
    case Op::kGte: return *number >= *bound;
    case Op::kLt: return *number < *bound;
    case Op::kLte: return *number <= *bound;
    default: return false;
  }
}

}  // namespace

Result<FilterNode> ParseFilter(const json::Value& filter) {
  FilterParser parser;
  return parser.ParseObject(filter, "filter", 1);
}

const MetadataValue* FindField(const Metadata& metadata, std::string_view key) {
  auto it = std::lower_bound(metadata.begin(), metadata.end(), key,
                             [](const std::pair<std::string, MetadataValue>& entry,
                                std::string_view wanted) { return entry.first < wanted; });
  if (it == metadata.end() || it->first != key) return nullptr;
  return &it->second;
}

bool FilterMatches(const FilterNode& filter, const Metadata& metadata) {
  switch (filter.op) {
    case Op::kAnd:
      return std::all_of(filter.children.begin(), filter.children.end(),
                         [&](const FilterNode& child) { return FilterMatches(child, metadata); });
    case Op::kOr:
      return std::any_of(filter.children.begin(), filter.children.end(),
                         [&](const FilterNode& child) { return FilterMatches(child, metadata); });
    default: break;
  }
  const MetadataValue* value = FindField(metadata, filter.field);
  switch (filter.op) {
    case Op::kEq:
      return value != nullptr && !filter.operands.empty() &&
             ValueEquals(*value, filter.operands.front());
    case Op::kNe:
      return value == nullptr || filter.operands.empty() ||
             !ValueEquals(*value, filter.operands.front());
    case Op::kGt:
    case Op::kGte:
    case Op::kLt:
    case Op::kLte:
      return value != nullptr && !filter.operands.empty() &&
             CompareNumber(filter.op, *value, filter.operands.front());
    case Op::kIn: return value != nullptr && AnyEquals(*value, filter.operands);
    case Op::kNin: return value == nullptr || !AnyEquals(*value, filter.operands);
    case Op::kExists: {
      const bool* wanted =
          filter.operands.empty() ? nullptr : std::get_if<bool>(&filter.operands[0]);
      bool want = wanted == nullptr || *wanted;
      return (value != nullptr) == want;
    }
    default: return false;
  }
}

}  // namespace rampart::knowledge
