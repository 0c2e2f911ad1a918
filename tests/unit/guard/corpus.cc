#include "guard/corpus.h"

#include <cstdio>
#include <random>

#include "guard/detector.h"
#include "guard/validators.h"

namespace rampart::guard::testing {
namespace {

using Rng = std::mt19937;

int Uniform(Rng& rng, int low, int high) {
  return std::uniform_int_distribution<int>(low, high)(rng);
}
template <typename T>
const T& Pick(Rng& rng, const std::vector<T>& items) {
  return items[Uniform(rng, 0, static_cast<int>(items.size()) - 1)];
}
std::string Digits(Rng& rng, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>('0' + Uniform(rng, 0, 9)));
  return out;
}
std::string FromAlphabet(Rng& rng, std::string_view alphabet, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out.push_back(alphabet[Uniform(rng, 0, alphabet.size() - 1)]);
  return out;
}
std::string Group(std::string_view s, const std::vector<int>& sizes, char separator) {
  std::string out;
  size_t at = 0;
  for (int size : sizes) {
    if (at >= s.size()) break;
    if (!out.empty()) out.push_back(separator);
    out.append(s.substr(at, size));
    at += size;
  }
  if (at < s.size()) out.append(s.substr(at));
  return out;
}

const std::vector<int> kProvinces = {11, 12, 13, 14, 15, 21, 22, 23, 31, 32, 33, 34,
                                     35, 36, 37, 41, 42, 43, 44, 45, 46, 50, 51, 52,
                                     53, 54, 61, 62, 63, 64, 65, 71, 81, 82};

std::string Date(Rng& rng, int low_year, int high_year) {
  char buffer[16];
  std::snprintf(buffer, sizeof(buffer), "%04d%02d%02d", Uniform(rng, low_year, high_year),
                Uniform(rng, 1, 12), Uniform(rng, 1, 28));
  return buffer;
}

std::string ResidentId(Rng& rng) {
  std::string id = std::to_string(Pick(rng, kProvinces)) + Digits(rng, 4) + Date(rng, 1950, 2010) +
                   Digits(rng, 3);
  return id + ResidentIdCheckCharacter(id);
}

std::string Mobile(Rng& rng) {
  static const std::vector<std::string> prefixes = {"130", "135", "138", "139", "147", "150",
                                                    "158", "166", "177", "186", "188", "199"};
  std::string number = Pick(rng, prefixes) + Digits(rng, 8);
  switch (Uniform(rng, 0, 3)) {
    case 0: return number;
    case 1: return Group(number, {3, 4, 4}, ' ');
    case 2: return "+86-" + Group(number, {3, 4, 4}, '-');
    default: return "+86 " + number;
  }
}

std::string CardDigits(Rng& rng) {
  struct Range {
    std::string prefix;
    int length;
  };
  static const std::vector<Range> ranges = {{"4", 16},    {"51", 16},   {"55", 16},  {"2221", 16},
                                            {"34", 15},   {"37", 15},   {"622", 16}, {"622", 19},
                                            {"3530", 16}, {"6011", 16}, {"65", 16},  {"36", 14}};
  const Range& range = Pick(rng, ranges);
  std::string number = range.prefix + Digits(rng, range.length - 1 - range.prefix.size());
  for (char check = '0'; check <= '9'; ++check) {
    if (LuhnValid(number + check)) return number + check;
  }
  return number;
}

std::string FormatCard(Rng& rng, const std::string& digits) {
  switch (Uniform(rng, 0, 2)) {
    case 0: return digits;
    case 1: return Group(digits, {4, 4, 4, 4}, ' ');
    default: return Group(digits, {4, 4, 4, 4}, '-');
  }
}

std::string Uscc(Rng& rng) {
  std::string code = "91" + std::to_string(Pick(rng, kProvinces)) + Digits(rng, 4) +
                     FromAlphabet(rng, "0123456789ABCDEFGHJKLMNPQRTUWXY", 8) +
                     FromAlphabet(rng, "ABCDEFGHJKLMNPQRTUWXY", 1);
  return code + UsccCheckCharacter(code);
}

std::string Iban(Rng& rng, bool valid) {
  struct Country {
    std::string code;
    int digits;
    int letters;
  };
  static const std::vector<Country> countries = {{"DE", 18, 0}, {"GB", 14, 4}, {"NL", 10, 4},
                                                 {"FR", 23, 0}, {"ES", 20, 0}, {"IT", 22, 0}};
  const Country& country = Pick(rng, countries);
  std::string bban = FromAlphabet(rng, "ABCDEFGHIJKLMNOPQRSTUVWXYZ", country.letters) +
                     Digits(rng, country.digits);
  if (country.code == "IT") bban = "X" + bban.substr(1);
  int check = 0;
  for (int candidate = 2; candidate <= 98; ++candidate) {
    char buffer[3];
    std::snprintf(buffer, sizeof(buffer), "%02d", candidate);
    if (IsValidIban(country.code + buffer + bban) == valid) {
      check = candidate;
      if (valid || candidate > 2) break;
    }
  }
  char buffer[3];
  std::snprintf(buffer, sizeof(buffer), "%02d", check);
  std::string iban = country.code + buffer + bban;
  return Uniform(rng, 0, 1) == 0 ? iban : Group(iban, {4, 4, 4, 4, 4, 4, 4, 4}, ' ');
}

std::string Ssn(Rng& rng) {
  int area = Uniform(rng, 1, 899);
  if (area == 666) area = 667;
  char buffer[16];
  std::snprintf(buffer, sizeof(buffer), "%03d-%02d-%04d", area, Uniform(rng, 1, 99),
                Uniform(rng, 1, 9999));
  return buffer;
}

std::string Word(Rng& rng, int low, int high) {
  return FromAlphabet(rng, "abcdefghijklmnopqrstuvwxyz", Uniform(rng, low, high));
}

// A secret; `standalone`: one that is recognised without a key word before it (an access key
// id, a JWT, a PEM block), otherwise a token for "Bearer" or "api_key=".
std::string Secret(Rng& rng, bool standalone) {
  static const std::string kAlnum =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  int kind = Uniform(rng, 0, 2);
  if (standalone) kind = kind == 1 ? 3 : kind;
  switch (kind) {
    case 0: return "AKIA" + FromAlphabet(rng, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16);
    case 1: return FromAlphabet(rng, kAlnum, 32);
    case 2:  // JWT: {"alg":"HS256","typ":"JWT"}
      return "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ" + FromAlphabet(rng, kAlnum, 30) + "." +
             FromAlphabet(rng, kAlnum + "-_", 43);
    default:
      return "-----BEGIN PRIVATE KEY-----\n" + FromAlphabet(rng, kAlnum + "+/", 64) + "\n" +
             FromAlphabet(rng, kAlnum + "+/", 40) + "==\n-----END PRIVATE KEY-----";
  }
}

struct Template {
  std::string_view type;
  std::string_view text;  // "{}" is the entity
};

// Where each type's value appears: customer service, HR, finance, logs, code; Chinese and
// English. Secrets' templates hold their key word (Bearer, api_key=) before the slot.
const std::vector<Template>& Templates() {
  static const std::vector<Template> templates = {
      {kCnResidentId, "客户身份证号：{}，请核实后办理。"},
      {kCnResidentId, "HR: new hire's ID card number is {} (verified)."},
      {kCnResidentId, "[INFO] kyc passed id_no={} channel=app"},
      {kCnResidentId, "员工{}的入职材料已归档"},
      {kCnMobile, "客服：请留下您的手机号{}，我们稍后回电。"},
      {kCnMobile, "Please call me at {} after 6pm."},
      {kCnMobile, "用户手机号码 {} 已绑定微信"},
      {kCnMobile, "log: sms sent to={} status=ok"},
      {kPaymentCard, "您的银行卡号{}已成功绑定。"},
      {kPaymentCard, "Refund issued to card {} within 5 days."},
      {kPaymentCard, "财务：报销打款至卡号 {} 。"},
      {kPaymentCard, "payment.card_number = \"{}\""},
      {kCnUscc, "公司统一社会信用代码：{}"},
      {kCnUscc, "Vendor registered, USCC {}, invoice attached."},
      {kCnPassport, "护照号码 {}，有效期至2030年。"},
      {kCnPassport, "Passport No. {} was scanned at the counter."},
      {kEmailAddress, "请发邮件到{}，我们会尽快处理。"},
      {kEmailAddress, "Contact: {} (HR department)"},
      {kEmailAddress, "2024-05-01T10:00:00Z user={} action=login"},
      {kPhoneNumber, "Our London office: {}."},
      {kPhoneNumber, "海外客户电话 {} 已回访"},
      {kIpAddress, "[WARN] login failed from {} (3 attempts)"},
      {kIpAddress, "服务器公网地址 {} 已加入白名单"},
      {kMacAddress, "设备网卡MAC地址 {} 已登记"},
      {kMacAddress, "dhcp: lease for {} renewed"},
      {kIbanCode, "Please wire the invoice amount to IBAN {} by Friday."},
      {kIbanCode, "收款账号(IBAN)：{}"},
      {kUsSsn, "Employee SSN {} on file."},
      {kUsSsn, "W-2 form: social security number {}"},
      {kSecret, "config: api_key={} # rotate monthly"},
      {kSecret, "curl -H \"Authorization: Bearer {}\" https://api.example.com"},
      {kSecret, "不要把密钥 {} 提交到仓库"},
      {kInternalEndpoint, "内部接口 http://{}:8080/health 返回 500"},
      {kInternalEndpoint, "clone from https://{}/team/repo.git"},
      {kInternalEndpoint, "日志在 {} 下面"},
  };
  return templates;
}

// Look-alikes and near-misses that must not be reported (the slot is labelled "").
const std::vector<Template>& LookAlikeTemplates() {
  static const std::vector<Template> templates = {
      {"", "订单号 {} 已发货，请注意查收。"},
      {"", "Order #{} has shipped."},
      {"", "tracking={} carrier=sf"},
      {"", "流水号：{}"},
      {"", "build {} released"},
      {"", "版本 {} 修复了若干问题"},
  };
  return templates;
}

bool ValidAnywhere(std::string_view digits) {
  return IsValidResidentId18(digits) || IsValidResidentId15(digits) || IsValidUscc(digits) ||
         (LuhnValid(digits) && IsKnownCardRange(digits));
}

std::string LookAlike(Rng& rng) {
  while (true) {
    std::string value;
    switch (Uniform(rng, 0, 9)) {
      case 0: {  // an ID with a wrong check character
        std::string id = ResidentId(rng);
        id.back() = id.back() == '0' ? '1' : '0';
        value = id;
        break;
      }
      case 1: {  // an impossible date (30 February) with a right check character
        std::string id =
            std::to_string(Pick(rng, kProvinces)) + Digits(rng, 4) + "19900230" + Digits(rng, 3);
        value = id + ResidentIdCheckCharacter(id);
        break;
      }
      case 2: {  // bad Luhn
        std::string card = CardDigits(rng);
        card.back() = static_cast<char>('0' + (card.back() - '0' + 1) % 10);
        value = FormatCard(rng, card);
        break;
      }
      case 3: value = Iban(rng, false); break;
      case 4: value = "000-" + Digits(rng, 2) + "-" + Digits(rng, 4); break;
      case 5:
        value = std::to_string(Uniform(rng, 1, 9)) + "." + std::to_string(Uniform(rng, 0, 20)) +
                "." + std::to_string(Uniform(rng, 0, 99));
        break;
      case 6: value = "1.2." + std::to_string(Uniform(rng, 0, 9)) + ".4.5"; break;
      case 7: value = "20240501" + Digits(rng, 10); break;  // an 18-digit order number
      case 8: value = Digits(rng, 25); break;               // a long reference number
      default: {                                            // a USCC with a wrong check character
        std::string code = Uscc(rng);
        code.back() = code.back() == 'A' ? 'B' : 'A';
        value = code;
      }
    }
    std::string digits;
    for (char c : value) {
      if (c != ' ' && c != '-') digits.push_back(c);
    }
    if (!ValidAnywhere(digits)) return value;
  }
}

std::string Value(Rng& rng, std::string_view type) {
  if (type == kCnResidentId) return ResidentId(rng);
  if (type == kCnMobile) return Mobile(rng);
  if (type == kPaymentCard) return FormatCard(rng, CardDigits(rng));
  if (type == kCnUscc) return Uscc(rng);
  if (type == kCnPassport) {
    return Uniform(rng, 0, 1) == 0 ? "E" + Digits(rng, 8)
                                   : "E" + FromAlphabet(rng, "ABCDEFGH", 1) + Digits(rng, 7);
  }
  if (type == kEmailAddress) {
    return Word(rng, 3, 8) + "." + Word(rng, 2, 6) + "@" +
           Pick(rng,
                std::vector<std::string>{"example.com", "163.com", "qq.com", "mail.example.org"});
  }
  if (type == kPhoneNumber) {
    switch (Uniform(rng, 0, 2)) {
      case 0: return "+44 20 " + Digits(rng, 4) + " " + Digits(rng, 4);
      case 1: return "+1 415-" + std::to_string(Uniform(rng, 200, 999)) + "-" + Digits(rng, 4);
      default: return "+49 30 " + Digits(rng, 7);
    }
  }
  if (type == kIpAddress) {
    if (Uniform(rng, 0, 2) == 0) {
      return "2001:db8:" + FromAlphabet(rng, "0123456789abcdef", 4) +
             "::" + FromAlphabet(rng, "123456789abcdef", 1);
    }
    return std::to_string(Uniform(rng, 11, 99)) + "." + std::to_string(Uniform(rng, 0, 255)) + "." +
           std::to_string(Uniform(rng, 0, 255)) + "." + std::to_string(Uniform(rng, 1, 254));
  }
  if (type == kMacAddress) {
    char separator = Uniform(rng, 0, 1) == 0 ? ':' : '-';
    std::string mac = FromAlphabet(rng, "0123456789ABCDEF", 12);
    return Group(mac, {2, 2, 2, 2, 2, 2}, separator);
  }
  if (type == kIbanCode) return Iban(rng, true);
  if (type == kUsSsn) return Ssn(rng);
  if (type == kSecret) return Secret(rng, true);
  switch (Uniform(rng, 0, 2)) {  // kInternalEndpoint
    case 0:
      return "10." + std::to_string(Uniform(rng, 0, 255)) + "." +
             std::to_string(Uniform(rng, 0, 255)) + "." + std::to_string(Uniform(rng, 1, 254));
    case 1: return "svc-" + Word(rng, 3, 6) + ".corp.example.com";
    default: return "/srv/secret/" + Word(rng, 3, 8) + "/" + Word(rng, 3, 8) + ".log";
  }
}

}  // namespace

std::string MakeEntity(std::string_view type, uint32_t seed) {
  Rng rng(seed);
  return Value(rng, type);
}

std::vector<Sample> MakeCorpus(uint32_t seed, size_t count) {
  Rng rng(seed);
  std::vector<Sample> samples;
  for (size_t n = 0; n < count; ++n) {
    Sample sample;
    int sentences = Uniform(rng, 1, 3);
    for (int s = 0; s < sentences; ++s) {
      bool look_alike = Uniform(rng, 0, 3) == 0;
      const Template& t = look_alike ? Pick(rng, LookAlikeTemplates()) : Pick(rng, Templates());
      std::string value = look_alike ? LookAlike(rng) : Value(rng, t.type);
      // A secret's template decides the form: Bearer and api_key take a token, "密钥" anything.
      if (t.type == kSecret && t.text.find("密钥") == std::string_view::npos) {
        value = Secret(rng, false);
      }
      if (t.type == kInternalEndpoint) {
        bool path = t.text.find("日志") != std::string_view::npos;
        bool url_host = t.text.find("clone") != std::string_view::npos;
        value = path ? "/srv/secret/" + Word(rng, 3, 8) + "/app.log"
                     : (url_host ? "git.corp.example.com"
                                 : "10." + std::to_string(Uniform(rng, 0, 255)) + ".0." +
                                       std::to_string(Uniform(rng, 1, 254)));
      }
      if (!sample.text.empty()) sample.text += Uniform(rng, 0, 1) == 0 ? " " : "\n";
      size_t slot = t.text.find("{}");
      sample.text.append(t.text.substr(0, slot));
      size_t start = sample.text.size();
      sample.text += value;
      sample.labels.push_back({t.type, start, sample.text.size()});
      sample.text.append(t.text.substr(slot + 2));
    }
    samples.push_back(std::move(sample));
  }
  return samples;
}

}  // namespace rampart::guard::testing
