#include "knowledge/hub/vector_stores.h"

#include <algorithm>

namespace rampart::knowledge::hub {
namespace {

constexpr size_t kMaxAttributes = 16;
constexpr size_t kMaxAttributeKeyBytes = 64;
constexpr size_t kMaxAttributeStringBytes = 512;
constexpr int kMaxFilterDepth = 8;
constexpr size_t kMaxFilterItems = 1000;

bool IsCompound(AttributeFilter::Op op) {
  return op == AttributeFilter::Op::kAnd || op == AttributeFilter::Op::kOr;
}

Status ValidateFilterAt(const AttributeFilter& filter, int depth, size_t& items) {
  if (depth > kMaxFilterDepth) {
    return InvalidArgument("filters: nested deeper than {} levels", kMaxFilterDepth);
  }
  if (IsCompound(filter.op)) {
    if (filter.filters.empty()) return InvalidArgument("filters: a compound filter is empty");
    items += filter.filters.size();
    if (items > kMaxFilterItems) {
      return InvalidArgument("filters: more than {} filters and values", kMaxFilterItems);
    }
    for (const AttributeFilter& child : filter.filters) {
      RETURN_IF_ERROR(ValidateFilterAt(child, depth + 1, items));
    }
    return Status::Ok();
  }
  if (filter.key.empty()) return InvalidArgument("filters: a comparison has an empty key");
  items += filter.values.size();
  if (items > kMaxFilterItems) {
    return InvalidArgument("filters: more than {} filters and values", kMaxFilterItems);
  }
  return Status::Ok();
}

bool Equal(const AttributeValue& a, const AttributeValue& b) { return a == b; }

// -1, 0, 1, or nullopt when the two are not both numbers or both strings.
std::optional<int> Compare(const AttributeValue& a, const AttributeValue& b) {
  if (a.index() != b.index() || std::holds_alternative<bool>(a)) return std::nullopt;
  if (a < b) return -1;
  if (b < a) return 1;
  return 0;
}

}  // namespace

Status ValidateFileAttributes(const FileAttributes& attributes) {
  if (attributes.size() > kMaxAttributes) {
    return InvalidArgument("attributes: at most {} keys", kMaxAttributes);
  }
  for (const auto& [key, value] : attributes) {
    if (key.empty() || key.size() > kMaxAttributeKeyBytes) {
      return InvalidArgument("attributes: key '{}' is not 1 to {} bytes", key,
                             kMaxAttributeKeyBytes);
    }
    const auto* text = std::get_if<std::string>(&value);
    if (text != nullptr && text->size() > kMaxAttributeStringBytes) {
      return InvalidArgument("attributes: the value of '{}' is over {} bytes", key,
                             kMaxAttributeStringBytes);
    }
  }
  return Status::Ok();
}

Status ValidateFilter(const AttributeFilter& filter) {
  size_t items = 1;
  return ValidateFilterAt(filter, 1, items);
}

bool FilterMatches(const AttributeFilter& filter, const FileAttributes& attributes) {
  using Op = AttributeFilter::Op;
  if (filter.op == Op::kAnd) {
    return std::all_of(filter.filters.begin(), filter.filters.end(),
                       [&](const AttributeFilter& f) { return FilterMatches(f, attributes); });
  }
  if (filter.op == Op::kOr) {
    return std::any_of(filter.filters.begin(), filter.filters.end(),
                       [&](const AttributeFilter& f) { return FilterMatches(f, attributes); });
  }
  const auto found = attributes.find(filter.key);
  if (found == attributes.end()) return false;
  const AttributeValue& value = found->second;
  const auto in = [&] {
    return std::any_of(filter.values.begin(), filter.values.end(),
                       [&](const AttributeValue& v) { return Equal(value, v); });
  };
  switch (filter.op) {
    case Op::kEq: return Equal(value, filter.value);
    case Op::kNe: return !Equal(value, filter.value);
    case Op::kIn: return in();
    case Op::kNin: return !in();
    default: break;
  }
  const std::optional<int> order = Compare(value, filter.value);
  if (!order.has_value()) return false;
  switch (filter.op) {
    case Op::kGt: return *order > 0;
    case Op::kGte: return *order >= 0;
    case Op::kLt: return *order < 0;
    case Op::kLte: return *order <= 0;
    default: return false;
  }
}

void FileCounts::Add(IngestStatus status) {
  switch (status) {
    case IngestStatus::kInProgress: ++in_progress; break;
    case IngestStatus::kCompleted: ++completed; break;
    case IngestStatus::kFailed: ++failed; break;
    case IngestStatus::kCancelled: ++cancelled; break;
  }
  ++total;
}

std::string_view IngestStatusName(IngestStatus status) {
  switch (status) {
    case IngestStatus::kInProgress: return "in_progress";
    case IngestStatus::kCompleted: return "completed";
    case IngestStatus::kCancelled: return "cancelled";
    case IngestStatus::kFailed: return "failed";
  }
  return "in_progress";
}

}  // namespace rampart::knowledge::hub
