#include "knowledge/index/metadata_index.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace rampart::knowledge {
namespace {

using Op = FilterNode::Op;
using Postings = MetadataIndex::Postings;

constexpr size_t kEntryBytes = sizeof(uint32_t);
constexpr size_t kValueBytes = 64;  // a hash or tree node and its key, roughly

Postings Union(std::vector<const Postings*> parts) {
  Postings merged;
  for (const Postings* part : parts) {
    Postings next;
    next.reserve(merged.size() + part->size());
    std::set_union(merged.begin(), merged.end(), part->begin(), part->end(),
                   std::back_inserter(next));
    merged.swap(next);
  }
  return merged;
}

}  // namespace

bool MetadataIndex::Insert(Postings& postings, uint32_t slot) {
  if (postings.empty() || postings.back() < slot) {
    postings.push_back(slot);  // the usual case: slots are handed out in increasing order
    return true;
  }
  auto it = std::lower_bound(postings.begin(), postings.end(), slot);
  if (it != postings.end() && *it == slot) return false;
  postings.insert(it, slot);
  return true;
}

bool MetadataIndex::Erase(Postings& postings, uint32_t slot) {
  auto it = std::lower_bound(postings.begin(), postings.end(), slot);
  if (it == postings.end() || *it != slot) return false;
  postings.erase(it);
  return true;
}

void MetadataIndex::Add(uint32_t slot, const Metadata& metadata) {
  for (const auto& [key, value] : metadata) {
    auto [field_it, inserted] = fields_.try_emplace(key);
    if (inserted) bytes_ += kValueBytes + key.size();
    Field& field = field_it->second;
    ++field.records;
    if (const auto* text = std::get_if<std::string>(&value)) {
      auto [it, added] = field.strings.try_emplace(*text);
      if (added) bytes_ += kValueBytes + text->size();
      Insert(it->second, slot);
      bytes_ += kEntryBytes;
    } else if (const auto* number = std::get_if<double>(&value)) {
      auto [it, added] = field.numbers.try_emplace(*number);
      if (added) bytes_ += kValueBytes;
      Insert(it->second, slot);
      bytes_ += kEntryBytes;
    } else if (const auto* flag = std::get_if<bool>(&value)) {
      Insert(*flag ? field.true_slots : field.false_slots, slot);
      bytes_ += kEntryBytes;
    } else {
      const auto& list = std::get<std::vector<std::string>>(value);
      if (list.empty()) {
        Insert(field.empty_lists, slot);
        bytes_ += kEntryBytes;
      }
      for (const std::string& item : list) {
        auto [it, added] = field.strings.try_emplace(item);
        if (added) bytes_ += kValueBytes + item.size();
        if (Insert(it->second, slot)) bytes_ += kEntryBytes;
      }
    }
  }
}

void MetadataIndex::Remove(uint32_t slot, const Metadata& metadata) {
  auto drop_string = [&](Field& field, const std::string& text) {
    auto it = field.strings.find(text);
    if (it == field.strings.end() || !Erase(it->second, slot)) return;
    bytes_ -= std::min(bytes_, kEntryBytes);
    if (it->second.empty()) {
      bytes_ -= std::min(bytes_, kValueBytes + text.size());
      field.strings.erase(it);
    }
  };
  for (const auto& [key, value] : metadata) {
    auto field_it = fields_.find(key);
    if (field_it == fields_.end()) continue;
    Field& field = field_it->second;
    if (const auto* text = std::get_if<std::string>(&value)) {
      drop_string(field, *text);
    } else if (const auto* number = std::get_if<double>(&value)) {
      auto it = field.numbers.find(*number);
      if (it != field.numbers.end()) {
        Erase(it->second, slot);
        bytes_ -= std::min(bytes_, kEntryBytes);
        if (it->second.empty()) {
          bytes_ -= std::min(bytes_, kValueBytes);
          field.numbers.erase(it);
        }
      }
    } else if (const auto* flag = std::get_if<bool>(&value)) {
      Erase(*flag ? field.true_slots : field.false_slots, slot);
      bytes_ -= std::min(bytes_, kEntryBytes);
    } else {
      const auto& list = std::get<std::vector<std::string>>(value);
      if (list.empty()) {
        Erase(field.empty_lists, slot);
        bytes_ -= std::min(bytes_, kEntryBytes);
      }
      for (const std::string& item : list) drop_string(field, item);
    }
    if (--field.records == 0) {
      bytes_ -= std::min(bytes_, kValueBytes + key.size());
      fields_.erase(field_it);
    }
  }
}

const Postings* MetadataIndex::ValuePostings(const Field& field,
                                             const FilterNode::Scalar& value) const {
  if (const auto* text = std::get_if<std::string>(&value)) {
    auto it = field.strings.find(*text);
    return it == field.strings.end() ? nullptr : &it->second;
  }
  if (const auto* number = std::get_if<double>(&value)) {
    auto it = field.numbers.find(*number);
    return it == field.numbers.end() ? nullptr : &it->second;
  }
  return std::get<bool>(value) ? &field.true_slots : &field.false_slots;
}

std::optional<Postings> MetadataIndex::FieldCandidates(const FilterNode& filter,
                                                       size_t limit) const {
  auto field_it = fields_.find(filter.field);
  const Field* field = field_it == fields_.end() ? nullptr : &field_it->second;
  switch (filter.op) {
    case Op::kEq:
    case Op::kIn: {
      if (field == nullptr) return Postings();
      std::vector<const Postings*> parts;
      size_t total = 0;
      for (const FilterNode::Scalar& operand : filter.operands) {
        const Postings* postings = ValuePostings(*field, operand);
        if (postings == nullptr) continue;
        total += postings->size();
        if (total > limit) return std::nullopt;
        parts.push_back(postings);
      }
      return Union(std::move(parts));
    }
    case Op::kGt:
    case Op::kGte:
    case Op::kLt:
    case Op::kLte: {
      if (field == nullptr) return Postings();
      const double* bound =
          filter.operands.empty() ? nullptr : std::get_if<double>(&filter.operands[0]);
      if (bound == nullptr) return Postings();
      auto begin = field->numbers.begin();
      auto end = field->numbers.end();
      switch (filter.op) {
        case Op::kGt: begin = field->numbers.upper_bound(*bound); break;
        case Op::kGte: begin = field->numbers.lower_bound(*bound); break;
        case Op::kLt: end = field->numbers.lower_bound(*bound); break;
        default: end = field->numbers.upper_bound(*bound); break;
      }
      std::vector<const Postings*> parts;
      size_t total = 0;
      for (auto it = begin; it != end; ++it) {
        total += it->second.size();
        if (total > limit) return std::nullopt;
        parts.push_back(&it->second);
      }
      return Union(std::move(parts));
    }
    case Op::kExists: {
      const bool* wanted =
          filter.operands.empty() ? nullptr : std::get_if<bool>(&filter.operands[0]);
      if (wanted != nullptr && !*wanted) return std::nullopt;
      if (field == nullptr) return Postings();
      if (field->records > limit) return std::nullopt;
      std::vector<const Postings*> parts{&field->true_slots, &field->false_slots,
                                         &field->empty_lists};
      for (const auto& [value, postings] : field->strings) parts.push_back(&postings);
      for (const auto& [value, postings] : field->numbers) parts.push_back(&postings);
      return Union(std::move(parts));
    }
    default: return std::nullopt;  // $ne, $nin: the complement of what the indexes hold
  }
}

std::optional<Postings> MetadataIndex::Candidates(const FilterNode& filter, size_t limit,
                                                  bool* exact) const {
  bool ignored = false;
  bool& is_exact = exact != nullptr ? *exact : ignored;
  switch (filter.op) {
    case Op::kAnd: {
      // The smallest bounded part; exact only when it is the one part.
      std::optional<Postings> best;
      bool best_exact = false;
      for (const FilterNode& child : filter.children) {
        bool child_exact = false;
        std::optional<Postings> part =
            Candidates(child, best ? std::min(limit, best->size()) : limit, &child_exact);
        if (part && (!best || part->size() < best->size())) {
          best = std::move(part);
          best_exact = child_exact;
        }
        if (best && best->empty()) break;
      }
      is_exact = best.has_value() && best_exact && filter.children.size() == 1;
      return best;
    }
    case Op::kOr: {
      Postings merged;
      bool all_exact = true;
      for (const FilterNode& child : filter.children) {
        bool child_exact = false;
        std::optional<Postings> part = Candidates(child, limit, &child_exact);
        if (!part) return std::nullopt;
        all_exact = all_exact && child_exact;
        Postings next;
        std::set_union(merged.begin(), merged.end(), part->begin(), part->end(),
                       std::back_inserter(next));
        if (next.size() > limit) return std::nullopt;
        merged.swap(next);
      }
      is_exact = all_exact;
      return merged;
    }
    default: {
      std::optional<Postings> found = FieldCandidates(filter, limit);
      is_exact = found.has_value();  // every bounded comparison is answered exactly
      return found;
    }
  }
}

}  // namespace rampart::knowledge
