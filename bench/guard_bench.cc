// PII detection throughput: MB/s per core of Detector::Detect on mixed Chinese/English text with
// no entities and with dense entities (one every ~100 bytes), Hyperscan against the RE2
// fallback, and against a naive scan (each pattern in turn with std::regex, matches not even
// validated) of the same patterns over the same text in the same run. Single thread.
// Usage: guard_bench [--mb N] [--profile plain|dense] (default 8 MB of each text; the naive
// scan reads 1/16 of it). --profile runs only Hyperscan's Detect on one text for ~5 s, for
// `perf record`.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <string>
#include <vector>

#include "guard/detector.h"
#include "guard/patterns.h"
#include "guard/scanner.h"

namespace {

using rampart::guard::Detector;
using rampart::guard::DetectorOptions;

const char* kPlain[] = {
    "您好，这里是客服中心，请问有什么可以帮您？我们的工作时间是周一至周五。",
    "The quarterly report shows revenue growth across all regions this year. ",
    "系统日志：服务启动完成，耗时较短，所有模块均已就绪。",
    "Please review the attached design document before Thursday's meeting. ",
    "员工培训将于下周举行，请各部门负责人提前安排好工作。",
    "INFO request handled route=/v1/chat status=ok latency=short ",
    "def handle(request):\n    return render(request, \"index.html\")\n",
};
const char* kEntities[] = {
    "身份证号11010519491231002X",
    "手机 138 0013 8000",
    "card 4111 1111 1111 1111",
    "邮箱 zhang.san@example.com",
    "IBAN GB82 WEST 1234 5698 7654 32",
    "from 203.0.113.7",
    "mac 00:1A:2B:3C:4D:5E",
    "SSN 123-45-6789",
    "护照 E12345678",
    "+44 20 7946 0958",
    "api_key=Zx9Qm2Lp8Rt4Vw7Y",
    "http://10.1.2.3:8080/x",
    "USCC 91350100M000100Y43",
};

std::string MakeText(size_t bytes, bool dense) {
  std::string text;
  size_t plain = 0, entity = 0;
  while (text.size() < bytes) {
    text += kPlain[plain++ % std::size(kPlain)];
    if (dense) {
      text += " ";
      text += kEntities[entity++ % std::size(kEntities)];
      text += "。";
    }
  }
  return text;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// MB/s of Detect over `text`, repeated until at least 0.5 s have passed.
double DetectRate(const Detector& detector, const std::string& text, size_t* entities) {
  auto begin = std::chrono::steady_clock::now();
  size_t bytes = 0;
  do {
    auto found = detector.Detect(text);
    if (!found.ok()) {
      std::fprintf(stderr, "%s\n", found.status().ToString().c_str());
      std::exit(1);
    }
    *entities = found->size();
    bytes += text.size();
  } while (Seconds(begin) < 0.5);
  return bytes / 1e6 / Seconds(begin);
}

double NaiveRate(const std::vector<std::regex>& regexes, const std::string& text) {
  auto begin = std::chrono::steady_clock::now();
  size_t matches = 0;
  for (const std::regex& regex : regexes) {
    for (auto it = std::sregex_iterator(text.begin(), text.end(), regex);
         it != std::sregex_iterator(); ++it) {
      ++matches;
    }
  }
  double rate = text.size() / 1e6 / Seconds(begin);
  if (matches == 0 && text.find('@') != std::string::npos) std::fprintf(stderr, "no matches?\n");
  return rate;
}

}  // namespace

int main(int argc, char** argv) {
  size_t megabytes = 8;
  const char* profile = nullptr;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--mb") == 0) megabytes = std::strtoul(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--profile") == 0) profile = argv[i + 1];
  }
  DetectorOptions options;
  options.internal_domains = {"corp.example.com"};
  options.internal_path_roots = {"/srv/secret"};
  auto hyperscan = Detector::Create(options);
  options.force_re2 = true;
  auto re2 = Detector::Create(options);
  auto patterns = rampart::guard::BuildPatterns(options);
  if (!hyperscan.ok() || !re2.ok() || !patterns.ok()) {
    std::fprintf(stderr, "cannot create the detectors\n");
    return 1;
  }
  if (profile != nullptr) {
    std::string text = MakeText(megabytes << 20, std::strcmp(profile, "dense") == 0);
    size_t entities = 0;
    double rate = 0;
    for (int i = 0; i < 10; ++i) rate += DetectRate(**hyperscan, text, &entities) / 10;
    std::printf("%s: %.1f MB/s, %zu entities\n", profile, rate, entities);
    return 0;
  }
  std::vector<std::regex> naive;
  for (const auto& pattern : *patterns) {
    auto flags = std::regex::ECMAScript | std::regex::optimize;
    if (pattern.caseless) flags |= std::regex::icase;
    naive.emplace_back(pattern.regex, flags);
  }
  std::printf("guard_bench: %zu MB per text, %zu patterns, engines %s and %s\n", megabytes,
              patterns->size(), std::string((*hyperscan)->engine()).c_str(),
              std::string((*re2)->engine()).c_str());
  std::printf("%-14s %12s %10s %12s %12s %10s\n", "text", "hyperscan", "re2", "std::regex",
              "hs/regex", "entities");
  for (bool dense : {false, true}) {
    std::string text = MakeText(megabytes << 20, dense);
    size_t entities = 0;
    double hs_rate = DetectRate(**hyperscan, text, &entities);
    size_t re2_entities = 0;
    double re2_rate = DetectRate(**re2, text, &re2_entities);
    std::string sample = text.substr(0, text.size() / 16);
    double naive_rate = NaiveRate(naive, sample);
    std::printf("%-14s %8.1f MB/s %5.1f MB/s %7.2f MB/s %11.0fx %10zu\n",
                dense ? "dense" : "no entities", hs_rate, re2_rate, naive_rate,
                hs_rate / naive_rate, entities);
    if (entities != re2_entities) std::printf("  (re2 found %zu)\n", re2_entities);
  }
  // Where the time goes: Hyperscan's scan alone (every match to an empty callback).
  auto scanner = rampart::guard::CreateHyperscanScanner(*patterns);
  if (scanner.ok()) {
    for (bool dense : {false, true}) {
      std::string text = MakeText(megabytes << 20, dense);
      auto begin = std::chrono::steady_clock::now();
      size_t matches = 0;
      auto count = [](void* context, uint32_t, size_t, size_t) {
        ++*static_cast<size_t*>(context);
      };
      if (!(*scanner)->Scan(text, count, &matches).ok()) return 1;
      std::printf("hyperscan scan alone, %-11s: %8.1f MB/s, %zu raw matches\n",
                  dense ? "dense" : "no entities", text.size() / 1e6 / Seconds(begin), matches);
    }
  }
  // The cost per streamed chunk: a 64-byte chunk with the stream redactor's hold-back in front.
  std::string chunk = MakeText(64 + (*hyperscan)->max_entity_bytes(), true);
  chunk.resize(64 + (*hyperscan)->max_entity_bytes());
  while (!chunk.empty() && (static_cast<unsigned char>(chunk.back()) & 0xC0) == 0x80)
    chunk.pop_back();
  if (!chunk.empty() && static_cast<unsigned char>(chunk.back()) >= 0xC0) chunk.pop_back();
  auto begin = std::chrono::steady_clock::now();
  int calls = 0;
  size_t entities = 0;
  while (Seconds(begin) < 0.5) {
    entities += (*hyperscan)->Detect(chunk)->size();
    ++calls;
  }
  std::printf("per chunk (%zu bytes incl. hold-back): %.1f us\n", chunk.size(),
              Seconds(begin) / calls * 1e6);
  return 0;
}
