// Parsing conditions: tokens, then a recursive-descent parser into condition_tree.h's nodes, with
// the type checks the grammar cannot express.

#include <charconv>
#include <optional>
#include <vector>

#include "policy/condition.h"
#include "policy/condition_tree.h"

namespace rampart::policy {

using condition_tree::Op;
using condition_tree::Operand;
using condition_tree::PathKind;

std::optional<double> ParseNumber(std::string_view text) {
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

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
  static constexpr int kMaxNotDepth = 8;

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

  Result<std::shared_ptr<const Node>> ParseCondition(int depth = 0) {
    auto node = std::make_shared<Node>();
    if (IsWord("not")) {
      // Bounded, so a hostile file cannot exhaust the stack (here, or in evaluation).
      if (depth == kMaxNotDepth) return InvalidArgument("more than {} 'not's", kMaxNotDepth);
      Next();
      node->op = Op::kNot;
      ASSIGN_OR_RETURN(node->inner, ParseCondition(depth + 1));
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

}  // namespace

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

}  // namespace rampart::policy
