#include "api/pinecone_values.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

namespace rampart::api::pinecone {
namespace {

using knowledge::FilterNode;

Result<FilterNode::Scalar> ParseScalar(const json::Value& value, std::string_view what) {
  switch (value.kind()) {
    case json::Kind::kString: {
      ASSIGN_OR_RETURN(std::string_view text, value.GetString(what));
      return FilterNode::Scalar(std::string(text));
    }
    case json::Kind::kNumber: {
      ASSIGN_OR_RETURN(double number, value.GetDouble(what));
      return FilterNode::Scalar(number);
    }
    case json::Kind::kBool: {
      ASSIGN_OR_RETURN(bool flag, value.GetBool(what));
      return FilterNode::Scalar(flag);
    }
    default:
      return InvalidArgument("{}: must be a string, a number or a bool, not {}", what,
                             value.KindName());
  }
}

struct OperatorName {
  std::string_view name;
  FilterNode::Op op;
};
constexpr OperatorName kComparisons[] = {
    {"$eq", FilterNode::Op::kEq},         {"$ne", FilterNode::Op::kNe},
    {"$gt", FilterNode::Op::kGt},         {"$gte", FilterNode::Op::kGte},
    {"$lt", FilterNode::Op::kLt},         {"$lte", FilterNode::Op::kLte},
    {"$in", FilterNode::Op::kIn},         {"$nin", FilterNode::Op::kNin},
    {"$exists", FilterNode::Op::kExists},
};

// {"$op": operand} on `field`.
Result<FilterNode> ParseComparison(std::string_view field, std::string_view name,
                                   const json::Value& operand, std::string_view what) {
  const auto* found =
      std::find_if(std::begin(kComparisons), std::end(kComparisons),
                   [name](const OperatorName& known) { return known.name == name; });
  if (found == std::end(kComparisons)) {
    return InvalidArgument(
        "{}: unknown operator '{}' (known: $eq $ne $gt $gte $lt $lte $in $nin $exists)", what,
        name);
  }
  FilterNode node;
  node.op = found->op;
  node.field = std::string(field);
  switch (node.op) {
    case FilterNode::Op::kGt:
    case FilterNode::Op::kGte:
    case FilterNode::Op::kLt:
    case FilterNode::Op::kLte: {
      if (operand.kind() != json::Kind::kNumber) {
        return InvalidArgument("{}: {} takes a number, not {}", what, name, operand.KindName());
      }
      ASSIGN_OR_RETURN(FilterNode::Scalar scalar, ParseScalar(operand, what));
      node.operands.push_back(std::move(scalar));
      break;
    }
    case FilterNode::Op::kIn:
    case FilterNode::Op::kNin: {
      if (!operand.IsArray()) {
        return InvalidArgument("{}: {} takes an array, not {}", what, name, operand.KindName());
      }
      size_t i = 0;
      for (simdjson::dom::element item : operand.Array()) {
        ASSIGN_OR_RETURN(FilterNode::Scalar scalar,
                         ParseScalar(json::Value(item), fmt::format("{}[{}]", what, i++)));
        node.operands.push_back(std::move(scalar));
      }
      break;
    }
    case FilterNode::Op::kExists: {
      if (operand.kind() != json::Kind::kBool) {
        return InvalidArgument("{}: $exists takes a bool, not {}", what, operand.KindName());
      }
      ASSIGN_OR_RETURN(FilterNode::Scalar scalar, ParseScalar(operand, what));
      node.operands.push_back(std::move(scalar));
      break;
    }
    default: {
      ASSIGN_OR_RETURN(FilterNode::Scalar scalar, ParseScalar(operand, what));
      node.operands.push_back(std::move(scalar));
      break;
    }
  }
  return node;
}

Result<FilterNode> ParseFilterAt(const json::Value& value, std::string_view what, int depth);

// $and / $or: a non-empty array of filters.
Result<FilterNode> ParseCombination(FilterNode::Op op, const json::Value& value,
                                    std::string_view what, int depth) {
  if (!value.IsArray()) {
    return InvalidArgument("{}: must be an array of filters, not {}", what, value.KindName());
  }
  FilterNode node;
  node.op = op;
  size_t i = 0;
  for (simdjson::dom::element item : value.Array()) {
    ASSIGN_OR_RETURN(FilterNode child,
                     ParseFilterAt(json::Value(item), fmt::format("{}[{}]", what, i++), depth + 1));
    node.children.push_back(std::move(child));
  }
  if (node.children.empty()) return InvalidArgument("{}: must not be empty", what);
  return node;
}

// One object of fields, ANDed.
Result<FilterNode> ParseFilterAt(const json::Value& value, std::string_view what, int depth) {
  if (depth > kMaxFilterDepth) {
    return InvalidArgument("{}: filters nest at most {} deep", what, kMaxFilterDepth);
  }
  if (!value.IsObject()) {
    return InvalidArgument("{}: must be an object, not {}", what, value.KindName());
  }
  FilterNode all;
  all.op = FilterNode::Op::kAnd;
  for (auto [key, member] : value.Object()) {
    const std::string where = fmt::format("{}.{}", what, key);
    const json::Value field_value(member);
    if (key == "$and" || key == "$or") {
      ASSIGN_OR_RETURN(FilterNode combined,
                       ParseCombination(key == "$and" ? FilterNode::Op::kAnd : FilterNode::Op::kOr,
                                        field_value, where, depth));
      all.children.push_back(std::move(combined));
      continue;
    }
    if (key.empty()) return InvalidArgument("{}: a field name must not be empty", what);
    if (key.front() == '$') {
      return InvalidArgument("{}: unknown operator '{}' at the top of a filter (use $and or $or)",
                             what, key);
    }
    if (!field_value.IsObject()) {
      // {"f": v} is {"f": {"$eq": v}}.
      if (field_value.IsArray()) {
        return InvalidArgument("{}: compare with an array using $in or $nin", where);
      }
      ASSIGN_OR_RETURN(FilterNode equal, ParseComparison(key, "$eq", field_value, where));
      all.children.push_back(std::move(equal));
      continue;
    }
    size_t operators = 0;
    for (auto [name, operand] : field_value.Object()) {
      ++operators;
      ASSIGN_OR_RETURN(FilterNode comparison, ParseComparison(key, name, json::Value(operand),
                                                              fmt::format("{}.{}", where, name)));
      all.children.push_back(std::move(comparison));
    }
    if (operators == 0) return InvalidArgument("{}: names no operator", where);
  }
  return all;
}

}  // namespace

Result<knowledge::Metadata> ParseMetadata(const json::Value& value, std::string_view what) {
  if (!value.IsObject()) {
    return InvalidArgument("{}: must be an object, not {}", what, value.KindName());
  }
  const size_t bytes = simdjson::minify(value.raw()).size();
  if (bytes > knowledge::kMaxMetadataBytes) {
    return InvalidArgument("{}: {} bytes of JSON, over the limit of {} per record", what, bytes,
                           knowledge::kMaxMetadataBytes);
  }
  knowledge::Metadata metadata;
  for (auto [key, member] : value.Object()) {
    const std::string where = fmt::format("{}.{}", what, key);
    const json::Value field(member);
    knowledge::MetadataValue parsed;
    switch (field.kind()) {
      case json::Kind::kString: parsed = std::string(*field.GetString(where)); break;
      case json::Kind::kNumber: parsed = *field.GetDouble(where); break;
      case json::Kind::kBool: parsed = *field.GetBool(where); break;
      case json::Kind::kArray: {
        std::vector<std::string> list;
        size_t i = 0;
        for (simdjson::dom::element item : field.Array()) {
          ASSIGN_OR_RETURN(std::string_view text,
                           json::Value(item).GetString(fmt::format("{}[{}]", where, i++)));
          list.emplace_back(text);
        }
        parsed = std::move(list);
        break;
      }
      case json::Kind::kNull:
        return InvalidArgument("{}: null is not a metadata value (leave the field out)", where);
      case json::Kind::kObject:
        return InvalidArgument(
            "{}: metadata is flat (strings, numbers, bools, lists of strings), not an object",
            where);
    }
    metadata.emplace_back(std::string(key), std::move(parsed));
  }
  std::sort(metadata.begin(), metadata.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 1; i < metadata.size(); ++i) {
    if (metadata[i].first == metadata[i - 1].first) {
      return InvalidArgument("{}: the field '{}' is given twice", what, metadata[i].first);
    }
  }
  return metadata;
}

void WriteMetadata(json::Writer& writer, const knowledge::Metadata& metadata) {
  writer.StartObject();
  for (const auto& [key, value] : metadata) {
    writer.Key(key);
    if (const auto* text = std::get_if<std::string>(&value)) {
      writer.String(*text);
    } else if (const auto* number = std::get_if<double>(&value)) {
      // Whole numbers read back as integers, as Pinecone writes them.
      if (std::nearbyint(*number) == *number && std::fabs(*number) < 9.007199254740992e15) {
        writer.Int64(static_cast<int64_t>(*number));
      } else {
        writer.Double(*number);
      }
    } else if (const auto* flag = std::get_if<bool>(&value)) {
      writer.Bool(*flag);
    } else {
      writer.StartArray();
      for (const std::string& item : std::get<std::vector<std::string>>(value)) writer.String(item);
      writer.EndArray();
    }
  }
  writer.EndObject();
}

Result<knowledge::FilterNode> ParseFilter(const json::Value& value, std::string_view what) {
  return ParseFilterAt(value, what, 0);
}

}  // namespace rampart::api::pinecone
