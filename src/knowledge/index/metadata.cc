#include "knowledge/index/metadata.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

namespace rampart::knowledge {

Result<Metadata> ParseMetadata(const json::Value& object, std::string_view what) {
  if (!object.IsObject()) {
    return InvalidArgument("{}: metadata must be an object, not {}", what, object.KindName());
  }
  std::string text = simdjson::minify(object.raw());
  if (text.size() > kMaxMetadataBytes) {
    return InvalidArgument("{}: metadata is {} bytes, over the limit of {} bytes per record", what,
                           text.size(), kMaxMetadataBytes);
  }
  Metadata metadata;
  for (auto [key_view, element] : object.Object()) {
    std::string key{std::string_view(key_view)};
    json::Value value(element);
    std::string path = fmt::format("{}.{}", what, key);
    switch (value.kind()) {
      case json::Kind::kString: {
        ASSIGN_OR_RETURN(std::string_view text_value, value.GetString(path));
        metadata.emplace_back(std::move(key), std::string(text_value));
        break;
      }
      case json::Kind::kNumber: {
        ASSIGN_OR_RETURN(double number, value.GetDouble(path));
        metadata.emplace_back(std::move(key), number);
        break;
      }
      case json::Kind::kBool: {
        ASSIGN_OR_RETURN(bool flag, value.GetBool(path));
        metadata.emplace_back(std::move(key), flag);
        break;
      }
      case json::Kind::kArray: {
        std::vector<std::string> list;
        size_t index = 0;
        for (auto item : value.Array()) {
          json::Value entry(item);
          if (entry.kind() != json::Kind::kString) {
            return InvalidArgument("{}[{}]: metadata lists hold only strings, not {}", path, index,
                                   entry.KindName());
          }
          ASSIGN_OR_RETURN(std::string_view item_text, entry.GetString(path));
          list.emplace_back(item_text);
          ++index;
        }
        metadata.emplace_back(std::move(key), std::move(list));
        break;
      }
      case json::Kind::kNull:
        return InvalidArgument(
            "{}: metadata values cannot be null (use a string, number, boolean or list of strings)",
            path);
      case json::Kind::kObject:
        return InvalidArgument(
            "{}: metadata cannot nest objects (use a string, number, boolean or list of strings)",
            path);
    }
  }
  std::sort(metadata.begin(), metadata.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 1; i < metadata.size(); ++i) {
    if (metadata[i].first == metadata[i - 1].first) {
      return InvalidArgument("{}: metadata key '{}' appears more than once", what,
                             metadata[i].first);
    }
  }
  return metadata;
}

void WriteMetadata(const Metadata& metadata, json::Writer& writer) {
  writer.StartObject();
  for (const auto& [key, value] : metadata) {
    writer.Key(key);
    if (const auto* text = std::get_if<std::string>(&value)) {
      writer.String(*text);
    } else if (const auto* number = std::get_if<double>(&value)) {
      // Integral numbers within float64's exact range print as integers ("2020", not "2020.0").
      if (std::trunc(*number) == *number && std::fabs(*number) < 9007199254740992.0) {
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

size_t MetadataJsonBytes(const Metadata& metadata) {
  json::Writer writer;
  WriteMetadata(metadata, writer);
  return writer.view().size();
}

Status ValidateDense(const std::vector<float>& values, size_t dimension, Metric metric,
                     std::string_view what) {
  if (values.size() != dimension) {
    return InvalidArgument("{}: vector dimension {} does not match the dimension of the index {}",
                           what, values.size(), dimension);
  }
  bool any_nonzero = false;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      return InvalidArgument("{}[{}]: values must be finite numbers", what, i);
    }
    any_nonzero = any_nonzero || values[i] != 0;
  }
  if (metric == Metric::kCosine && !any_nonzero) {
    return InvalidArgument("{}: a cosine index needs at least one non-zero value", what);
  }
  return Status::Ok();
}

Status ValidateSparse(const SparseValues& sparse) {
  if (sparse.indices.size() != sparse.values.size()) {
    return InvalidArgument("sparseValues: indices ({}) and values ({}) must have the same length",
                           sparse.indices.size(), sparse.values.size());
  }
  if (sparse.indices.size() > kMaxSparseValues) {
    return InvalidArgument("sparseValues: {} non-zero values, over the limit of {}",
                           sparse.indices.size(), kMaxSparseValues);
  }
  for (size_t i = 0; i < sparse.indices.size(); ++i) {
    if (i > 0 && sparse.indices[i] <= sparse.indices[i - 1]) {
      return InvalidArgument("sparseValues.indices[{}]: indices must be strictly increasing", i);
    }
    if (!std::isfinite(sparse.values[i])) {
      return InvalidArgument("sparseValues.values[{}]: values must be finite numbers", i);
    }
  }
  return Status::Ok();
}

Status ValidateRecord(const VectorRecord& record, size_t dimension, Metric metric) {
  if (record.id.empty()) return InvalidArgument("id: must not be empty");
  if (record.id.size() > kMaxIdBytes) {
    return InvalidArgument("id: {} bytes, over the limit of {}", record.id.size(), kMaxIdBytes);
  }
  RETURN_IF_ERROR(ValidateDense(record.values, dimension, metric, "values"));
  RETURN_IF_ERROR(ValidateSparse(record.sparse));
  for (size_t i = 1; i < record.metadata.size(); ++i) {
    if (!(record.metadata[i - 1].first < record.metadata[i].first)) {
      return InvalidArgument("metadata: keys must be unique (and sorted), '{}' is not",
                             record.metadata[i].first);
    }
  }
  for (const auto& [key, value] : record.metadata) {
    if (const auto* number = std::get_if<double>(&value); number && !std::isfinite(*number)) {
      return InvalidArgument("metadata.{}: numbers must be finite", key);
    }
  }
  size_t bytes = MetadataJsonBytes(record.metadata);
  if (bytes > kMaxMetadataBytes) {
    return InvalidArgument("metadata: {} bytes, over the limit of {} bytes per record", bytes,
                           kMaxMetadataBytes);
  }
  return Status::Ok();
}

}  // namespace rampart::knowledge
