#include "guard/context.h"

#include <algorithm>
#include <string>

#include "guard/detector.h"

namespace rampart::guard {
namespace {

constexpr size_t kBefore = 64;
constexpr size_t kAfter = 24;

struct TypeWords {
  std::string_view type;
  std::vector<std::string_view> words;  // ASCII words in lower case
};

const std::vector<TypeWords>& Table() {
  static const std::vector<TypeWords> table = {
      {kCnResidentId,
       {"身份证", "身份证号", "证件号", "居民身份", "id card", "id number", "id no"}},
      {kCnMobile, {"手机", "电话", "联系方式", "号码", "mobile", "phone", "tel", "call"}},
      {kPaymentCard,
       {"银行卡", "卡号", "信用卡", "借记卡", "账号", "card", "visa", "mastercard", "unionpay"}},
      {kCnUscc,
       {"统一社会信用代码", "信用代码", "社会信用", "税号", "纳税人识别号", "uscc", "credit code"}},
      {kCnPassport, {"护照", "passport"}},
      {kEmailAddress, {"邮箱", "邮件", "email", "e-mail", "mail"}},
      {kPhoneNumber, {"电话", "手机", "phone", "tel", "call", "mobile", "whatsapp"}},
      {kIpAddress, {"ip", "地址", "address", "host", "server", "服务器"}},
      {kMacAddress, {"mac", "网卡", "物理地址"}},
      {kIbanCode, {"iban", "账号", "account", "bank", "银行"}},
      {kUsSsn, {"ssn", "social security"}},
      {kSecret, {"key", "token", "secret", "password", "密码", "密钥", "credential"}},
  };
  return table;
}

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

}  // namespace

const std::vector<std::string_view>& ContextWords(std::string_view type) {
  static const std::vector<std::string_view> kNone;
  const auto& table = Table();
  // The detector passes the type constants themselves: compare their addresses first.
  for (const auto& entry : table) {
    if (entry.type.data() == type.data() && entry.type.size() == type.size()) return entry.words;
  }
  for (const auto& entry : table) {
    if (entry.type == type) return entry.words;
  }
  return kNone;
}

bool HasContextWord(std::string_view type, std::string_view text, size_t start, size_t end) {
  const auto& words = ContextWords(type);
  if (words.empty()) return false;
  size_t from = start > kBefore ? start - kBefore : 0;
  size_t to = std::min(text.size(), end + kAfter);
  // The window without the candidate itself, lower-cased (on the stack: this runs per candidate).
  char buffer[kBefore + 1 + kAfter];
  size_t size = 0;
  for (size_t i = from; i < start; ++i) buffer[size++] = Lower(text[i]);
  buffer[size++] = '\n';
  for (size_t i = end; i < to; ++i) buffer[size++] = Lower(text[i]);
  std::string_view window(buffer, size);
  for (std::string_view word : words) {
    if (window.find(word) != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace rampart::guard
