#include "gateway/guard_json.h"

#include <array>
#include <vector>

#include "json/reader.h"
#include "json/writer.h"

namespace rampart::gateway {
namespace {

using Pattern = std::vector<std::string_view>;  // member names, "*" for any array item

const std::vector<Pattern>& Patterns(GuardedShape shape) {
  static const std::array<std::vector<Pattern>, 7> patterns = {{
      {{"messages", "*", "content"},
       {"messages", "*", "content", "*", "text"},
       {"messages", "*", "tool_calls", "*", "function", "arguments"},
       {"messages", "*", "function_call", "arguments"}},
      {{"prompt"}, {"prompt", "*"}},
      {{"input"}, {"input", "*"}},
      {{"choices", "*", "message", "content"},
       {"choices", "*", "message", "reasoning_content"},
       {"choices", "*", "message", "tool_calls", "*", "function", "arguments"},
       {"choices", "*", "message", "function_call", "arguments"}},
      {{"choices", "*", "text"}},
      {{"choices", "*", "delta", "content"},
       {"choices", "*", "delta", "reasoning_content"},
       {"choices", "*", "delta", "tool_calls", "*", "function", "arguments"},
       {"choices", "*", "delta", "function_call", "arguments"}},
      {{"choices", "*", "text"}},
  }};
  return patterns[static_cast<size_t>(shape)];
}

struct Step {
  std::string_view key;  // empty for an array item
  int64_t index = -1;    // an array item's "index" member, else its position
};

// Whether `path` is `pattern` (exact) or leads to it (prefix).
bool Fits(const std::vector<Step>& path, const Pattern& pattern, bool exact) {
  if (exact ? path.size() != pattern.size() : path.size() > pattern.size()) return false;
  for (size_t i = 0; i < path.size(); ++i) {
    if (pattern[i] == "*" ? path[i].index < 0 : path[i].index >= 0 || path[i].key != pattern[i]) {
      return false;
    }
  }
  return true;
}

bool AnyFits(const std::vector<Step>& path, GuardedShape shape, bool exact) {
  for (const Pattern& pattern : Patterns(shape)) {
    if (Fits(path, pattern, exact)) return true;
  }
  return false;
}

int64_t ItemIndex(simdjson::dom::element item, size_t position) {
  const json::Value value(item);
  if (const auto index = value.Find("index")) {
    Result<int64_t> number = index->GetInt64("index");
    if (number.ok() && *number >= 0) return *number;
  }
  return static_cast<int64_t>(position);
}

GuardedText Describe(const std::vector<Step>& path, std::string_view text) {
  GuardedText out{.text = text};
  for (size_t i = 0; i < path.size(); ++i) {
    if (!out.path.empty()) out.path.push_back('.');
    if (path[i].index >= 0) {
      out.path += std::to_string(path[i].index);
      if (i > 0 && path[i - 1].key == "choices") out.choice = path[i].index;
      if (i > 0 && path[i - 1].key == "tool_calls") out.tool = path[i].index;
    } else {
      out.path.append(path[i].key);
      out.field = path[i].key;
    }
  }
  return out;
}

// Walks `element`; calls `on_text` for each guarded string. With `writer`, writes the document,
// taking each guarded string's replacement from `replacements` in order.
class Walker {
 public:
  Walker(GuardedShape shape, const TextVisitor* visit, json::Writer* writer,
         const std::vector<std::optional<std::string>>* replacements)
      : shape_(shape), visit_(visit), writer_(writer), replacements_(replacements) {}

  Status Walk(simdjson::dom::element element) {
    if (!path_.empty() && !AnyFits(path_, shape_, false)) return Raw(element);
    if (element.is_string()) {
      if (!AnyFits(path_, shape_, true)) return Raw(element);
      std::string_view text;
      if (element.get_string().get(text) != simdjson::SUCCESS) return Internal("not a string");
      if (writer_ == nullptr) {
        ASSIGN_OR_RETURN(std::optional<std::string> replacement, (*visit_)(Describe(path_, text)));
        found_.push_back(std::move(replacement));
      } else {
        const std::optional<std::string>& replacement = (*replacements_)[next_++];
        writer_->String(replacement ? std::string_view(*replacement) : text);
      }
      return Status::Ok();
    }
    if (element.is_object()) {
      if (writer_) writer_->StartObject();
      for (auto [key, value] : json::Value(element).Object()) {
        if (writer_) writer_->Key(key);
        path_.push_back(Step{.key = key});
        RETURN_IF_ERROR(Walk(value));
        path_.pop_back();
      }
      if (writer_) writer_->EndObject();
      return Status::Ok();
    }
    if (element.is_array()) {
      if (writer_) writer_->StartArray();
      size_t position = 0;
      for (simdjson::dom::element item : json::Value(element).Array()) {
        path_.push_back(Step{.index = ItemIndex(item, position++)});
        RETURN_IF_ERROR(Walk(item));
        path_.pop_back();
      }
      if (writer_) writer_->EndArray();
      return Status::Ok();
    }
    return Raw(element);
  }

  std::vector<std::optional<std::string>> TakeFound() { return std::move(found_); }

 private:
  Status Raw(simdjson::dom::element element) {
    if (writer_) writer_->Raw(simdjson::minify(element));
    return Status::Ok();
  }

  const GuardedShape shape_;
  const TextVisitor* visit_;
  json::Writer* writer_;
  const std::vector<std::optional<std::string>>* replacements_;
  std::vector<Step> path_;
  std::vector<std::optional<std::string>> found_;
  size_t next_ = 0;
};

json::Parser& ThreadParser() {
  thread_local json::Parser parser;
  return parser;
}

}  // namespace

GuardedShape RequestShape(Operation operation) {
  switch (operation) {
    case Operation::kChatCompletions: return GuardedShape::kChatRequest;
    case Operation::kCompletions: return GuardedShape::kCompletionRequest;
    case Operation::kEmbeddings: return GuardedShape::kEmbeddingRequest;
  }
  return GuardedShape::kChatRequest;
}

std::optional<GuardedShape> AnswerShape(Operation operation, bool chunk) {
  switch (operation) {
    case Operation::kChatCompletions:
      return chunk ? GuardedShape::kChatChunk : GuardedShape::kChatAnswer;
    case Operation::kCompletions:
      return chunk ? GuardedShape::kCompletionChunk : GuardedShape::kCompletionAnswer;
    case Operation::kEmbeddings: return std::nullopt;
  }
  return std::nullopt;
}

Result<std::optional<std::string>> RewriteTexts(std::string_view json, GuardedShape shape,
                                                const TextVisitor& visit) {
  ASSIGN_OR_RETURN(json::Value root, ThreadParser().Parse(json));
  Walker reader(shape, &visit, nullptr, nullptr);
  RETURN_IF_ERROR(reader.Walk(root.raw()));
  const std::vector<std::optional<std::string>> replacements = reader.TakeFound();
  if (std::none_of(replacements.begin(), replacements.end(),
                   [](const auto& replacement) { return replacement.has_value(); })) {
    return std::optional<std::string>();
  }
  json::Writer writer;
  writer.Reserve(json.size() + 64);
  Walker rewriter(shape, nullptr, &writer, &replacements);
  RETURN_IF_ERROR(rewriter.Walk(root.raw()));
  return std::optional<std::string>(writer.Take());
}

}  // namespace rampart::gateway
