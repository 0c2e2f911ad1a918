#include "guard/redact.h"

#include <algorithm>

#include <fmt/ranges.h>

#include "guard/text.h"

namespace rampart::guard {

RedactedText Redact(std::string_view text, const std::vector<Entity>& entities,
                    const OperatorChoice& operators, const TenantKeys& keys) {
  RedactedText out;
  out.text.reserve(text.size());
  size_t copied = 0;
  const auto boundary = [text](size_t pos) {
    return pos == text.size() || (pos < text.size() && !text::IsContinuation(text[pos]));
  };
  for (const Entity& entity : entities) {
    if (entity.start < copied || entity.start >= entity.end || entity.end > text.size() ||
        !boundary(entity.start) || !boundary(entity.end)) {
      continue;
    }
    const Operator op = operators.For(entity.type);
    Redaction redaction{.type = entity.type,
                        .start = entity.start,
                        .end = entity.end,
                        .score = entity.score,
                        .op = op.kind};
    redaction.replacement =
        ApplyOperator(op, entity.type, text.substr(entity.start, entity.end - entity.start), keys);
    out.text.append(text.substr(copied, entity.start - copied));
    out.text.append(redaction.replacement);
    copied = entity.end;
    out.entities.push_back(std::move(redaction));
  }
  out.text.append(text.substr(copied));
  return out;
}

Result<RedactedText> RedactText(const Detector& detector, const GuardKeys& keys,
                                std::string_view text, const RedactOptions& options) {
  ASSIGN_OR_RETURN(std::vector<Entity> entities, detector.Detect(text, options.types));
  std::vector<std::string_view> blocked;
  for (const Entity& entity : entities) {
    if (options.operators.For(entity.type).kind == OperatorKind::kBlock) {
      blocked.push_back(entity.type);
    }
  }
  if (!blocked.empty()) return InvalidArgument("{}", BlockedMessage(blocked));
  return Redact(text, entities, options.operators, keys.ForTenant(options.tenant));
}

std::string BlockedMessage(const std::vector<std::string_view>& types) {
  std::vector<std::string_view> distinct = types;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  return fmt::format("the text contains data the guard blocks: {}", fmt::join(distinct, ", "));
}

}  // namespace rampart::guard
