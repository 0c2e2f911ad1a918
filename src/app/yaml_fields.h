#pragma once

// Reading one section of the YAML config file field by field, with errors that name the key
// (its dotted path, "gateway.retry.max_attempts") and its line: shared by the config readers
// (gateway_config.cc, access_config.cc). yaml-cpp's exceptions never escape these helpers.

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "core/status.h"

namespace rampart::app::yaml {

// A YAML map whose keys must all be in `known`; `where` names it in errors.
inline Status CheckKeys(const YAML::Node& node, std::string_view where,
                        std::initializer_list<std::string_view> known) {
  if (!node.IsMap()) {
    return InvalidArgument("'{}' must be a map (line {})", where, node.Mark().line + 1);
  }
  for (const auto& entry : node) {
    const std::string key = entry.first.as<std::string>();
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      return InvalidArgument("unknown key '{}.{}' (line {}); known: {}", where, key,
                             entry.first.Mark().line + 1, fmt::join(known, ", "));
    }
  }
  return Status::Ok();
}

// `node[key]` into `into` when present (else `into` keeps its value).
template <typename T>
Status Read(const YAML::Node& node, std::string_view key, std::string_view where, T& into) {
  const YAML::Node value = node[std::string(key)];
  if (!value) return Status::Ok();
  try {
    into = value.as<T>();
  } catch (const YAML::Exception& error) {
    return InvalidArgument("'{}.{}' has the wrong type (line {})", where, key,
                           value.Mark().line + 1);
  }
  return Status::Ok();
}

// A list of items, each read by `read` (which is told its place, "where.key[i]").
template <typename Item>
Status ReadList(const YAML::Node& node, std::string_view key, std::string_view where,
                std::vector<Item>& into,
                const std::function<Status(const YAML::Node&, std::string_view, Item&)>& read) {
  const YAML::Node list = node[std::string(key)];
  if (!list) return Status::Ok();
  if (!list.IsSequence()) {
    return InvalidArgument("'{}.{}' must be a list (line {})", where, key, list.Mark().line + 1);
  }
  for (size_t i = 0; i < list.size(); ++i) {
    Item item;
    RETURN_IF_ERROR(read(list[i], fmt::format("{}.{}[{}]", where, key, i), item));
    into.push_back(std::move(item));
  }
  return Status::Ok();
}

}  // namespace rampart::app::yaml
