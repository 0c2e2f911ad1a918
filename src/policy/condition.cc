#include "policy/condition.h"

#include <charconv>
#include <optional>
#include <vector>

#include "core/ip_network.h"
#include "policy/time_window.h"

namespace rampart::policy {

// ---- The parsed form ----

namespace {

enum class PathKind : uint8_t {
  kPrincipalTenant,
  kPrincipalName,
  kPrincipalMethod,
  kPrincipalRoles,
  kPrincipalAttribute,
  kResourceType,
  kResourceName,
  kResourceAttribute,
  kContextSourceIp,
  kContextTime,
  kContextAttribute,
  kAction,
};

struct Operand {
  enum class Kind : uint8_t { kPath, kString, kNumber, kList } kind = Kind::kString;
  PathKind path = PathKind::kAction;
  std::string attribute;  // for the *Attribute paths
  std::string text;       // a string's value, a path's or number's source text
  double number = 0;
  std::vector<Operand> items;       // a list's strings and numbers
  std::vector<IpNetwork> networks;  // a list's items when every one is an IP network
};

enum class Op : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kWithin, kHas, kNot };

}  // namespace

struct Condition::Node {
  Op op = Op::kEq;
  Operand left;
  Operand right;
  std::optional<TimeWindow> window;   // kWithin
  std::shared_ptr<const Node> inner;  // kNot
};

namespace {

using Node = Condition::Node;

// ---- Tokens ----

struct Token {
  enum class Kind : uint8_t { kEnd, kWord, kString, kNumber, kOp, kOpen, kClose, kComma } kind;
  std::string text;  // a string's unescaped value; otherwise the source text
};

bool IsWordCharacter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-' || c == ':';
}

Result<std::vector<Token>> Tokenize(std::string_view text) {
  std::vector<Token> tokens;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == ' ' || c == '\t') {
      ++i;
    } else if (c == '"') {
      std::string value;
      ++i;
      while (i < text.size() && text[i] != '"') {
        if (text[i] == '\\' && i + 1 < text.size()) ++i;
        value += text[i++];
      }
      if (i == text.size()) return InvalidArgument("unterminated string");
      ++i;
      tokens.push_back({Token::Kind::kString, std::move(value)});
    } else if ((c >= '0' && c <= '9') ||
               (c == '-' && i + 1 < text.size() && text[i + 1] >= '0' && text[i + 1] <= '9')) {
      size_t end = i + 1;
      while (end < text.size() && ((text[end] >= '0' && text[end] <= '9') || text[end] == '.')) {
        ++end;
      }
      tokens.push_back({Token::Kind::kNumber, std::string(text.substr(i, end - i))});
      i = end;
    } else if (c == '=' || c == '!' || c == '<' || c == '>') {
      const bool two = i + 1 < text.size() && text[i + 1] == '=';
      const std::string op(text.substr(i, two ? 2 : 1));
      if (op == "=" || op == "!") return InvalidArgument("unknown operator '{}'", op);
      tokens.push_back({Token::Kind::kOp, op});
      i += op.size();
    } else if (c == '[') {
      tokens.push_back({Token::Kind::kOpen, "["});
      ++i;
    } else if (c == ']') {
      tokens.push_back({Token::Kind::kClose, "]"});
      ++i;
    } else if (c == ',') {
      tokens.push_back({Token::Kind::kComma, ","});
      ++i;
    } else if (IsWordCharacter(c)) {
      size_t end = i;
      while (end < text.size() && IsWordCharacter(text[end])) ++end;
      tokens.push_back({Token::Kind::kWord, std::string(text.substr(i, end - i))});
      i = end;
    } else {
      return InvalidArgument("unexpected character '{}'", c);
    }
  }
  tokens.push_back({Token::Kind::kEnd, ""});
  return tokens;
}

std::optional<double> ParseNumber(std::string_view text) {
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

bool IsAttributeName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (const char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '-')) {
      return false;
    }
  }
  return true;
}

Result<Operand> ReadPath(std::string_view word) {
  Operand operand;
  operand.kind = Operand::Kind::kPath;
  operand.text = std::string(word);
  if (word == "action") {
    operand.path = PathKind::kAction;
    return operand;
  }
  const size_t dot = word.find('.');
  const std::string_view root = word.substr(0, dot);
  const std::string_view leaf =
      dot == std::string_view::npos ? std::string_view() : word.substr(dot + 1);
  if (!IsAttributeName(leaf) || (root != "principal" && root != "resource" && root != "context")) {
    return InvalidArgument(
        "unknown path '{}' (principal.<name>, resource.<name>, context.<name> or action)", word);
  }
  operand.attribute = std::string(leaf);
  struct Builtin {
    std::string_view root;
    std::string_view leaf;
    PathKind path;
  };
  static constexpr Builtin kBuiltins[] = {
      {"principal", "tenant", PathKind::kPrincipalTenant},
      {"principal", "name", PathKind::kPrincipalName},
      {"principal", "method", PathKind::kPrincipalMethod},
      {"principal", "roles", PathKind::kPrincipalRoles},
      {"resource", "type", PathKind::kResourceType},
      {"resource", "name", PathKind::kResourceName},
      {"context", "source_ip", PathKind::kContextSourceIp},
      {"context", "time", PathKind::kContextTime},
  };
  for (const Builtin& builtin : kBuiltins) {
    if (builtin.root == root && builtin.leaf == leaf) {
      operand.path = builtin.path;
      return operand;
    }
  }
  operand.path = root == "principal"  ? PathKind::kPrincipalAttribute
                 : root == "resource" ? PathKind::kResourceAttribute
                                      : PathKind::kContextAttribute;
  return operand;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Result<std::shared_ptr<const Node>> Parse() {
    ASSIGN_OR_RETURN(std::shared_ptr<const Node> node, ParseCondition());
    if (Peek().kind != Token::Kind::kEnd) {
      return InvalidArgument("unexpected '{}' after the condition", Peek().text);
    }
    return node;
  }

 private:
  const Token& Peek() const { return tokens_[position_]; }
  const Token& Next() { return tokens_[position_ < tokens_.size() - 1 ? position_++ : position_]; }
  bool IsWord(std::string_view word) const {
    return Peek().kind == Token::Kind::kWord && Peek().text == word;
  }

  Result<std::shared_ptr<const Node>> ParseCondition() {
    auto node = std::make_shared<Node>();
    if (IsWord("not")) {
      Next();
      node->op = Op::kNot;
      ASSIGN_OR_RETURN(node->inner, ParseCondition());
      return std::shared_ptr<const Node>(std::move(node));
    }
    if (IsWord("has")) {
      Next();
      node->op = Op::kHas;
      if (Peek().kind != Token::Kind::kWord) return InvalidArgument("'has' needs a path");
      ASSIGN_OR_RETURN(node->left, ReadPath(Next().text));
      return std::shared_ptr<const Node>(std::move(node));
    }
    ASSIGN_OR_RETURN(node->left, ParseOperand());
    const Token op = Next();
    if (op.kind == Token::Kind::kOp) {
      static constexpr std::pair<std::string_view, Op> kComparisons[] = {
          {"==", Op::kEq}, {"!=", Op::kNe}, {"<", Op::kLt},
          {"<=", Op::kLe}, {">", Op::kGt},  {">=", Op::kGe}};
      for (const auto& [name, value] : kComparisons) {
        if (op.text == name) node->op = value;
      }
    } else if (op.kind == Token::Kind::kWord && op.text == "in") {
      node->op = Op::kIn;
    } else if (op.kind == Token::Kind::kWord && op.text == "within") {
      node->op = Op::kWithin;
    } else {
      return InvalidArgument("expected an operator (== != < <= > >= in within) instead of '{}'",
                             op.kind == Token::Kind::kEnd ? "the end" : op.text);
    }
    ASSIGN_OR_RETURN(node->right, ParseOperand());
    RETURN_IF_ERROR(Check(*node));
    return std::shared_ptr<const Node>(std::move(node));
  }

  Result<Operand> ParseOperand() {
    const Token token = Next();
    Operand operand;
    switch (token.kind) {
      case Token::Kind::kString:
        operand.kind = Operand::Kind::kString;
        operand.text = token.text;
        return operand;
      case Token::Kind::kNumber: {
        const std::optional<double> number = ParseNumber(token.text);
        if (!number) return InvalidArgument("bad number '{}'", token.text);
        operand.kind = Operand::Kind::kNumber;
        operand.text = token.text;
        operand.number = *number;
        return operand;
      }
      case Token::Kind::kWord: return ReadPath(token.text);
      case Token::Kind::kOpen: return ParseList();
      default:
        return InvalidArgument("expected a path, a string, a number or a list instead of '{}'",
                               token.kind == Token::Kind::kEnd ? "the end" : token.text);
    }
  }

  Result<Operand> ParseList() {
    Operand list;
    list.kind = Operand::Kind::kList;
    if (Peek().kind == Token::Kind::kClose) {
      Next();
      return list;
    }
    while (true) {
      const Token& item = Peek();
      if (item.kind != Token::Kind::kString && item.kind != Token::Kind::kNumber) {
        return InvalidArgument("a list holds strings and numbers, not '{}'",
                               item.kind == Token::Kind::kEnd ? "the end" : item.text);
      }
      ASSIGN_OR_RETURN(Operand operand, ParseOperand());
      list.items.push_back(std::move(operand));
      const Token separator = Next();
      if (separator.kind == Token::Kind::kClose) break;
      if (separator.kind != Token::Kind::kComma) {
        return InvalidArgument("expected ',' or ']' in a list instead of '{}'",
                               separator.kind == Token::Kind::kEnd ? "the end" : separator.text);
      }
    }
    return list;
  }

  // What the grammar allows but the types do not.
  static Status Check(Node& node) {
    const auto is_path = [](const Operand& operand, PathKind path) {
      return operand.kind == Operand::Kind::kPath && operand.path == path;
    };
    if (node.op == Op::kWithin) {
      if (!is_path(node.left, PathKind::kContextTime) ||
          node.right.kind != Operand::Kind::kString) {
        return InvalidArgument("'within' reads context.time within \"<time window>\"");
      }
      ASSIGN_OR_RETURN(node.window, TimeWindow::Parse(node.right.text));
      return Status::Ok();
    }
    if (is_path(node.left, PathKind::kContextTime) || is_path(node.right, PathKind::kContextTime)) {
      return InvalidArgument("context.time is only read by 'within'");
    }
    if (is_path(node.left, PathKind::kPrincipalRoles)) {
      return InvalidArgument("principal.roles is a list: write '\"role\" in principal.roles'");
    }
    if (node.left.kind == Operand::Kind::kList) {
      return InvalidArgument("a list can only be on the right of 'in'");
    }
    if (node.op == Op::kIn) {
      if (node.right.kind == Operand::Kind::kString || node.right.kind == Operand::Kind::kNumber) {
        return InvalidArgument("'in' needs a list or a path on its right");
      }
      if (node.right.kind == Operand::Kind::kList) return ReadNetworks(node);
      return Status::Ok();
    }
    if (node.right.kind == Operand::Kind::kList || is_path(node.right, PathKind::kPrincipalRoles)) {
      return InvalidArgument("a list cannot be compared with '{}': use 'in'",
                             node.op == Op::kEq ? "==" : "an ordering");
    }
    return Status::Ok();
  }

  // A list matched against context.source_ip must be networks; any other list whose items are
  // all networks matches addresses by network too.
  static Status ReadNetworks(Node& node) {
    const bool source_ip =
        node.left.kind == Operand::Kind::kPath && node.left.path == PathKind::kContextSourceIp;
    std::vector<IpNetwork> networks;
    for (const Operand& item : node.right.items) {
      Result<IpNetwork> network =
          item.kind == Operand::Kind::kString
              ? IpNetwork::Parse(item.text)
              : Result<IpNetwork>(InvalidArgument("not an IP network: '{}'", item.text));
      if (!network.ok()) {
        if (source_ip) return network.status();
        return Status::Ok();
      }
      networks.push_back(std::move(network).value());
    }
    node.right.networks = std::move(networks);
    return Status::Ok();
  }

  std::vector<Token> tokens_;
  size_t position_ = 0;
};

// ---- Evaluation ----

struct Value {
  enum class Kind : uint8_t { kString, kNumber, kList, kRoles } kind = Kind::kString;
  std::string_view text;
  double number = 0;
  const Operand* list = nullptr;
};

std::string_view MethodText(identity::Method method) {
  switch (method) {
    case identity::Method::kAnonymous: return "anonymous";
    case identity::Method::kApiKey: return "api_key";
    case identity::Method::kJwt: return "jwt";
    case identity::Method::kMtls: return "mtls";
  }
  return "unknown";
}

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
    case PathKind::kPrincipalMethod: return text(MethodText(request.principal->method));
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

Truth Evaluate(const Node& node, const Facts& facts, std::string* why) {
  switch (node.op) {
    case Op::kNot: {
      const Truth inner = Evaluate(*node.inner, facts, why);
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

}  // namespace

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

Result<Condition> Condition::Parse(std::string_view text) {
  const auto bad = [&](const Status& status) {
    return InvalidArgument("bad condition '{}': {}", text, status.message());
  };
  Result<std::vector<Token>> tokens = Tokenize(text);
  if (!tokens.ok()) return bad(tokens.status());
  if (tokens->size() == 1) return InvalidArgument("bad condition '': empty");
  Result<std::shared_ptr<const Node>> root = Parser(std::move(tokens).value()).Parse();
  if (!root.ok()) return bad(root.status());
  Condition condition;
  condition.text_ = std::string(text);
  condition.root_ = std::move(root).value();
  return condition;
}

Truth Condition::Evaluate(const Facts& facts, std::string* why) const {
  return policy::Evaluate(*root_, facts, why);
}

}  // namespace rampart::policy
