#include "gateway/guard_stages.h"

#include "gateway/guard_json.h"
#include "guard/redact.h"
#include "guard/stream_redactor.h"
#include "json/reader.h"
#include "json/writer.h"

namespace rampart::gateway {

// One streamed answer's redactors, by the path of the text they redact.
struct GuardStreamState {
  struct Field {
    std::unique_ptr<guard::StreamRedactor> redactor;
    int64_t choice = 0;
    int64_t tool = -1;
    std::string field;
  };
  std::map<std::string, Field> fields;
  std::string first_event;  // for the id, model and created of the events added at the end
};

namespace {

bool Redacts(GuardMode mode) { return mode != GuardMode::kOff && mode != GuardMode::kDetect; }

// One direction of one call under its policy: detects, counts, redacts, collects what blocks.
class DirectionGuard {
 public:
  DirectionGuard(const GuardRuntime& runtime, const GuardPolicy& policy, GuardMode mode,
                 std::string_view direction, CallContext& call, GatewayMetrics& metrics)
      : runtime_(runtime),
        mode_(mode),
        direction_(direction),
        call_(call),
        metrics_(metrics),
        types_(TypesOf(policy)) {
    operators_ = Redacts(mode) ? OperatorsFor(policy, mode) : guard::OperatorChoice{};
    for (const std::string& type : policy.block) {
      operators_.by_type[type] = guard::Operator{.kind = guard::OperatorKind::kBlock};
    }
  }

  // The redacted text (nullopt when unchanged).
  Result<std::optional<std::string>> Text(std::string_view text) {
    ASSIGN_OR_RETURN(std::vector<guard::Entity> entities, runtime_.detector->Detect(text, types_));
    if (entities.empty()) return std::optional<std::string>();
    guard::RedactedText redacted =
        guard::Redact(text, entities, operators_, runtime_.KeysFor(call_.identity.tenant));
    Count(redacted.entities);
    if (!Redacts(mode_)) return std::optional<std::string>();
    return std::optional<std::string>(std::move(redacted.text));
  }

  // Counts entities found (in metrics and the call's findings) and notes the blocked ones.
  void Count(const std::vector<guard::Redaction>& found) {
    std::map<std::string_view, int>& findings =
        direction_ == "input" ? call_.guard_findings.input : call_.guard_findings.output;
    for (const guard::Redaction& entity : found) {
      const bool blocks = entity.op == guard::OperatorKind::kBlock;
      if (blocks) blocked_.push_back(entity.type);
      const std::string_view action = blocks ? "blocked" : Redacts(mode_) ? "redacted" : "detected";
      metrics_.guard_entities
          .WithLabels({std::string(entity.type), std::string(direction_), std::string(action)})
          .Increment();
      ++findings[entity.type];
    }
  }

  // The refusal when something blocked, else OK.
  Status Verdict() {
    if (blocked_.empty()) return Status::Ok();
    if (!call_.guard_findings.blocked) {
      call_.guard_findings.blocked = true;
      metrics_.guard_blocked.WithLabels({call_.plan.route.empty() ? "none" : call_.plan.route})
          .Increment();
    }
    return InvalidArgument("{}", guard::BlockedMessage(blocked_));
  }

  const guard::OperatorChoice& operators() const { return operators_; }
  const std::vector<std::string_view>& types() const { return types_; }
  bool redacts() const { return Redacts(mode_); }

 private:
  const GuardRuntime& runtime_;
  const GuardMode mode_;
  const std::string_view direction_;
  CallContext& call_;
  GatewayMetrics& metrics_;
  const std::vector<std::string_view> types_;
  guard::OperatorChoice operators_;
  std::vector<std::string_view> blocked_;
};

class GuardInputStage final : public Stage {
 public:
  explicit GuardInputStage(GatewayMetrics& metrics) : metrics_(metrics) {}
  std::string_view name() const override { return "guard_input"; }

  Status OnRequest(CallContext& call) override {
    if (call.guard == nullptr || call.guard->detector == nullptr) return Status::Ok();
    const GuardPolicy& policy =
        call.guard_policy ? *call.guard_policy : call.guard->PolicyFor(call.plan.route);
    if (policy.input == GuardMode::kOff) return Status::Ok();
    DirectionGuard guard(*call.guard, policy, policy.input, "input", call, metrics_);
    std::vector<std::string> texts;  // every text as it goes on, in order (embedding inputs)
    const auto visit = [&](const GuardedText& text) -> Result<std::optional<std::string>> {
      ASSIGN_OR_RETURN(std::optional<std::string> redacted, guard.Text(text.text));
      texts.emplace_back(redacted ? std::string_view(*redacted) : text.text);
      return redacted;
    };
    ASSIGN_OR_RETURN(std::optional<std::string> body,
                     RewriteTexts(call.request.body, RequestShape(call.operation), visit));
    RETURN_IF_ERROR(guard.Verdict());
    if (!body) return Status::Ok();
    call.request.body = std::move(*body);
    // A local model reads the parsed inputs, not the body.
    if (call.operation == Operation::kEmbeddings && !call.request.input_is_tokens &&
        texts.size() == call.request.inputs.size()) {
      call.request.inputs = std::move(texts);
    }
    return Status::Ok();
  }

 private:
  GatewayMetrics& metrics_;
};

class GuardOutputStage final : public Stage {
 public:
  explicit GuardOutputStage(GatewayMetrics& metrics) : metrics_(metrics) {}
  std::string_view name() const override { return "guard_output"; }

  Status OnAnswer(CallContext& call, std::string& data) override {
    const GuardPolicy* policy = Policy(call);
    if (policy == nullptr) return Status::Ok();
    const std::optional<GuardedShape> shape = AnswerShape(call.operation, call.request.stream);
    if (!shape) return Status::Ok();
    DirectionGuard guard(*call.guard, *policy, policy->output, "output", call, metrics_);
    std::optional<std::string> rewritten;
    if (!call.request.stream) {
      ASSIGN_OR_RETURN(rewritten, RewriteTexts(data, *shape, [&guard](const GuardedText& text) {
                         return guard.Text(text.text);
                       }));
    } else {
      if (data == "[DONE]") return Status::Ok();
      if (!call.guard_stream) call.guard_stream = std::make_shared<GuardStreamState>();
      GuardStreamState& state = *call.guard_stream;
      if (state.first_event.empty()) state.first_event = data;
      const auto visit = [&](const GuardedText& text) -> Result<std::optional<std::string>> {
        GuardStreamState::Field& field = state.fields[text.path];
        if (!field.redactor) {
          field.redactor = std::make_unique<guard::StreamRedactor>(
              *call.guard->detector, guard.operators(), call.guard->KeysFor(call.identity.tenant),
              guard.types());
          field.choice = text.choice;
          field.tool = text.tool;
          field.field = std::string(text.field);
        }
        ASSIGN_OR_RETURN(std::string released, field.redactor->Push(text.text));
        guard.Count(field.redactor->TakeReleased());
        if (!guard.redacts() || released == text.text) return std::optional<std::string>();
        return std::optional<std::string>(std::move(released));
      };
      ASSIGN_OR_RETURN(rewritten, RewriteTexts(data, *shape, visit));
    }
    RETURN_IF_ERROR(guard.Verdict());
    if (rewritten) data = std::move(*rewritten);
    return Status::Ok();
  }

  Status OnAnswerEnd(CallContext& call, std::vector<std::string>& events) override {
    const GuardPolicy* policy = Policy(call);
    if (policy == nullptr || !call.guard_stream) return Status::Ok();
    DirectionGuard guard(*call.guard, *policy, policy->output, "output", call, metrics_);
    GuardStreamState& state = *call.guard_stream;
    for (auto& [path, field] : state.fields) {
      ASSIGN_OR_RETURN(std::string rest, field.redactor->Finish());
      guard.Count(field.redactor->TakeReleased());
      if (guard.redacts() && !rest.empty()) events.push_back(Event(call, state, field, rest));
    }
    return guard.Verdict();
  }

 private:
  const GuardPolicy* Policy(const CallContext& call) const {
    if (call.guard == nullptr || call.guard->detector == nullptr) return nullptr;
    const GuardPolicy& policy =
        call.guard_policy ? *call.guard_policy : call.guard->PolicyFor(call.plan.route);
    return policy.output == GuardMode::kOff ? nullptr : &policy;
  }

  // An event carrying `text` for one field, shaped like the stream's first event.
  static std::string Event(const CallContext& call, const GuardStreamState& state,
                           const GuardStreamState::Field& field, std::string_view text) {
    json::Parser parser;
    Result<json::Value> first = parser.Parse(state.first_event);
    json::Writer writer;
    writer.StartObject();
    for (std::string_view key : {"id", "object", "created", "model", "system_fingerprint"}) {
      if (!first.ok() || !first->IsObject()) break;
      if (const auto value = first->Find(key)) {
        writer.Key(key);
        writer.Raw(simdjson::minify(value->raw()));
      }
    }
    writer.Key("choices");
    writer.StartArray();
    writer.StartObject();
    writer.Key("index");
    writer.Int64(field.choice);
    if (call.operation == Operation::kCompletions) {
      writer.Key("text");
      writer.String(text);
    } else {
      writer.Key("delta");
      writer.StartObject();
      if (field.tool >= 0) {
        writer.Key("tool_calls");
        writer.StartArray();
        writer.StartObject();
        writer.Key("index");
        writer.Int64(field.tool);
        writer.Key("function");
        writer.StartObject();
        writer.Key("arguments");
        writer.String(text);
        writer.EndObject();
        writer.EndObject();
        writer.EndArray();
      } else if (field.field == "arguments") {  // function_call
        writer.Key("function_call");
        writer.StartObject();
        writer.Key("arguments");
        writer.String(text);
        writer.EndObject();
      } else {
        writer.Key(field.field);
        writer.String(text);
      }
      writer.EndObject();
    }
    writer.Key("finish_reason");
    writer.Null();
    writer.EndObject();
    writer.EndArray();
    writer.EndObject();
    return writer.Take();
  }

  GatewayMetrics& metrics_;
};

}  // namespace

guard::OperatorChoice OperatorsFor(const GuardPolicy& policy, GuardMode mode) {
  guard::OperatorChoice choice;
  for (const auto& [type, op] : policy.operators) choice.by_type.emplace(type, op);
  switch (mode) {
    case GuardMode::kReplace:
      choice.all = guard::Operator{.kind = guard::OperatorKind::kReplace};
      break;
    case GuardMode::kMask: choice.all = guard::Operator{.kind = guard::OperatorKind::kMask}; break;
    case GuardMode::kHash: choice.all = guard::Operator{.kind = guard::OperatorKind::kHash}; break;
    case GuardMode::kTokenize:
      choice.all = guard::Operator{.kind = guard::OperatorKind::kTokenize};
      break;
    case GuardMode::kBlock:
      choice.all = guard::Operator{.kind = guard::OperatorKind::kBlock};
      break;
    case GuardMode::kOff:
    case GuardMode::kDetect:
    case GuardMode::kRedact: break;
  }
  return choice;
}

std::vector<std::string_view> TypesOf(const GuardPolicy& policy) {
  std::vector<std::string_view> types;
  for (const std::string& type : policy.types) {
    if (auto known = guard::KnownEntityType(type)) types.push_back(*known);
  }
  return types;
}

std::unique_ptr<Stage> MakeGuardInputStage(GatewayMetrics& metrics) {
  return std::make_unique<GuardInputStage>(metrics);
}

std::unique_ptr<Stage> MakeGuardOutputStage(GatewayMetrics& metrics) {
  return std::make_unique<GuardOutputStage>(metrics);
}

}  // namespace rampart::gateway
