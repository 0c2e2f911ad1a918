// The knowledge hub's text side on generated corpora, single thread: extraction MB/s (plain
// text, Markdown, HTML), chunking MB/s (auto and static 800/400, English and Chinese), analysis
// MB/s, BM25 index build (chunks/s) and query latency (p50/p99, with and without an allowed-set
// predicate that admits half the chunks), and fusing two 100-hit lists.
// Usage: hub_text_bench [--mb N] [--chunks N] [--queries N] (defaults 8 MB, 100000 chunks, 2000
// queries). Rates and latencies are in this thread's CPU time (wall-clock query latency is printed
// too); hub_text_bench --count-tokens FILE prints tokens.h's estimate for a UTF-8 file. The
// corpus is Zipf-distributed words from a fixed vocabulary (seeded, reproducible).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "knowledge/hub/analyzer.h"
#include "knowledge/hub/bm25.h"
#include "knowledge/hub/chunker.h"
#include "knowledge/hub/extract.h"
#include "knowledge/hub/fusion.h"
#include "knowledge/hub/tokens.h"
#include "testing/minimal_pdf.h"

namespace {

using namespace rampart::knowledge::hub;  // NOLINT(google-build-using-namespace)
using Clock = std::chrono::steady_clock;
using rampart::Result;

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// This thread's CPU time: the shared 2-core machine is often loaded, and CPU time is what the
// code costs whatever the load (wall-clock latency is printed next to it).
double CpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
}

// Words with a Zipf(1) distribution over a vocabulary of made-up words of 2..12 letters.
class WordSource {
 public:
  WordSource(uint32_t seed, size_t vocabulary) : random_(seed) {
    std::uniform_int_distribution<int> length(2, 12);
    std::uniform_int_distribution<int> letter('a', 'z');
    for (size_t i = 0; i < vocabulary; ++i) {
      std::string word;
      int n = length(random_);
      for (int k = 0; k < n; ++k) word.push_back(static_cast<char>(letter(random_)));
      words_.push_back(word);
    }
    double sum = 0;
    for (size_t i = 0; i < vocabulary; ++i) {
      sum += 1.0 / static_cast<double>(i + 1);
      cumulative_.push_back(sum);
    }
    for (double& c : cumulative_) c /= sum;
  }
  const std::string& Next() {
    double u = uniform_(random_);
    size_t index = static_cast<size_t>(std::lower_bound(cumulative_.begin(), cumulative_.end(), u) -
                                       cumulative_.begin());
    return words_[std::min(index, words_.size() - 1)];
  }
  std::string Sentence(int words) {
    std::string out;
    for (int i = 0; i < words; ++i) {
      if (i > 0) out.push_back(' ');
      out += Next();
    }
    out[0] = static_cast<char>(out[0] - 'a' + 'A');
    out += ". ";
    return out;
  }
  std::mt19937& random() { return random_; }

 private:
  std::mt19937 random_;
  std::uniform_real_distribution<double> uniform_{0, 1};
  std::vector<std::string> words_;
  std::vector<double> cumulative_;
};

std::string ChineseText(size_t bytes, uint32_t seed) {
  static const char* kPhrases[] = {
      "知识库", "文档", "检索", "答案", "来源", "组织", "服务器", "模型", "安装", "配置",
      "用户",   "权限", "数据", "系统", "请求", "结果", "我们",   "可以", "需要", "因为",
      "所以",   "但是", "如果", "已经", "进行", "使用", "支持",   "中文", "搜索", "引擎"};
  std::mt19937 random(seed);
  std::uniform_int_distribution<size_t> pick(0, std::size(kPhrases) - 1);
  std::string out;
  int in_sentence = 0;
  while (out.size() < bytes) {
    out += kPhrases[pick(random)];
    if (++in_sentence == 12) {
      out += "。";
      in_sentence = 0;
      if (random() % 5 == 0) out += "\n\n";
    }
  }
  return out;
}

struct Documents {
  std::string plain, markdown, html;
};

Documents MakeDocuments(size_t bytes) {
  WordSource words(7, 20000);
  Documents out;
  int section = 0;
  while (out.plain.size() < bytes) {
    std::string heading = words.Sentence(3);
    heading.resize(heading.size() - 2);
    out.markdown += (section % 3 == 0 ? "# " : "## ") + heading + "\n\n";
    out.html +=
        (section % 3 == 0 ? "<h1>" : "<h2>") + heading + (section % 3 == 0 ? "</h1>\n" : "</h2>\n");
    out.plain += heading + "\n\n";
    for (int paragraph = 0; paragraph < 4; ++paragraph) {
      std::string text;
      for (int s = 0; s < 5; ++s) text += words.Sentence(8 + s * 3);
      out.plain += text + "\n\n";
      out.markdown += text + "\n\n";
      out.html += "<p>" + text + "&amp; more</p>\n";
    }
    out.markdown += "- an item with **bold** and [a link](https://example.com)\n\n";
    out.html += "<ul><li>an item</li></ul><script>var x = 1;</script>\n";
    ++section;
  }
  return out;
}

// A PDF of `pages` pages, each 45 lines of generated words (tests' minimal PDF writer).
std::string MakePdf(int pages, WordSource& words) {
  std::vector<std::vector<std::string>> lines(static_cast<size_t>(pages));
  for (std::vector<std::string>& page : lines) {
    for (int line = 0; line < 45; ++line) page.push_back(words.Sentence(12));
  }
  return rampart::testing::MakePdf(lines);
}

// The process's resident memory in MB (/proc/self/status's VmRSS).
double ResidentMegabytes() {
  std::FILE* status = std::fopen("/proc/self/status", "r");
  if (status == nullptr) return 0;
  char line[256];
  double kilobytes = 0;
  while (std::fgets(line, sizeof(line), status) != nullptr) {
    if (std::strncmp(line, "VmRSS:", 6) == 0) kilobytes = std::strtod(line + 6, nullptr);
  }
  std::fclose(status);
  return kilobytes / 1024;
}

template <typename Function>
double MegabytesPerSecond(size_t bytes, Function function) {
  // At least 3 runs and 0.5 s; the best run, in CPU time.
  double best = 1e9;
  auto start = Clock::now();
  for (int run = 0; run < 3 || Seconds(start) < 0.5; ++run) {
    double one = CpuSeconds();
    function();
    best = std::min(best, CpuSeconds() - one);
  }
  return static_cast<double>(bytes) / 1e6 / best;
}

double Percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<size_t>(p * values.size()))];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--count-tokens") == 0) {
    // The estimate for one file, to compare with a real cl100k encoder.
    std::FILE* file = std::fopen(argv[2], "rb");
    if (file == nullptr) return 1;
    std::string text;
    char buffer[65536];
    for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), file)) > 0;) text.append(buffer, n);
    std::fclose(file);
    std::printf("%zu\n", CountTokens(text));
    return 0;
  }
  size_t megabytes = 8;
  size_t chunk_count = 100000;
  size_t query_count = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--mb") == 0) megabytes = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--chunks") == 0) {
      chunk_count = std::strtoull(argv[i + 1], nullptr, 10);
    }
    if (std::strcmp(argv[i], "--queries") == 0) {
      query_count = std::strtoull(argv[i + 1], nullptr, 10);
    }
  }
  Documents documents = MakeDocuments(megabytes << 20);
  std::string chinese = ChineseText(megabytes << 20, 11);

  std::printf("extraction (MB/s of input, cpu)\n");
  struct Input {
    const char* name;
    const std::string* bytes;
    DocumentType type;
  };
  for (const Input& input : {Input{"plain text", &documents.plain, DocumentType::kPlainText},
                             Input{"markdown", &documents.markdown, DocumentType::kMarkdown},
                             Input{"html", &documents.html, DocumentType::kHtml},
                             Input{"chinese text", &chinese, DocumentType::kPlainText}}) {
    double rate = MegabytesPerSecond(input.bytes->size(), [&] {
      if (!Extract(*input.bytes, input.type).ok()) std::abort();
    });
    std::printf("  %-13s %8.1f\n", input.name, rate);
  }

  WordSource pdf_words(17, 20000);
  std::string pdf = MakePdf(200, pdf_words);
  size_t pdf_text = Extract(pdf, DocumentType::kPdf)->text.size();
  double pdf_rate = MegabytesPerSecond(pdf_text, [&] {
    if (!Extract(pdf, DocumentType::kPdf).ok()) std::abort();
  });
  std::printf("  %-13s %8.1f  (MB/s of extracted text; 200 pages, %.1f MB of PDF)\n", "pdf",
              pdf_rate, static_cast<double>(pdf.size()) / 1e6);

  std::printf("chunking (MB/s of extracted text, cpu)\n");
  ExtractedText english_text = *Extract(documents.markdown, DocumentType::kMarkdown);
  ExtractedText chinese_text = *Extract(chinese, DocumentType::kPlainText);
  for (const auto& [name, text] :
       {std::pair{"english", &english_text}, std::pair{"chinese", &chinese_text}}) {
    for (const auto& [strategy, options] :
         {std::pair{"auto", ChunkingOptions::Auto()},
          std::pair{"static 800/400", ChunkingOptions::Static(800, 400)}}) {
      size_t chunks = 0;
      double rate = MegabytesPerSecond(text->text.size(), [&] {
        Result<std::vector<Chunk>> result = ChunkText(*text, options);
        if (!result.ok()) std::abort();
        chunks = result->size();
      });
      std::printf("  %-8s %-15s %8.1f  (%zu chunks)\n", name, strategy, rate, chunks);
    }
  }

  std::printf("analysis (MB/s, cpu)\n");
  std::shared_ptr<const Analyzer> analyzer(std::move(*Analyzer::Create()));
  AnalyzerOptions words_only;
  words_only.chinese_terms = ChineseTerms::kWords;
  AnalyzerOptions bigrams_only;
  bigrams_only.chinese_terms = ChineseTerms::kBigrams;
  std::shared_ptr<const Analyzer> chinese_words(std::move(*Analyzer::Create(words_only)));
  std::shared_ptr<const Analyzer> chinese_bigrams(std::move(*Analyzer::Create(bigrams_only)));
  std::string english_sample = english_text.text.substr(0, 2 << 20);
  std::string chinese_sample = chinese_text.text.substr(0, 2 << 20);
  for (const auto& [name, engine, text] :
       {std::tuple{"english", analyzer.get(), &english_sample},
        std::tuple{"chinese words", chinese_words.get(), &chinese_sample},
        std::tuple{"chinese bigrams", chinese_bigrams.get(), &chinese_sample},
        std::tuple{"chinese both", analyzer.get(), &chinese_sample}}) {
    double rate = MegabytesPerSecond(text->size(), [&] {
      if (!engine->Analyze(*text).ok()) std::abort();
    });
    std::printf("  %-16s %8.1f\n", name, rate);
  }

  // BM25: chunks of 40..80 generated words (~300..600 bytes).
  WordSource words(13, 50000);
  std::vector<std::string> chunks;
  size_t corpus_bytes = 0;
  std::uniform_int_distribution<int> sentences(5, 10);
  for (size_t i = 0; i < chunk_count; ++i) {
    std::string chunk;
    int n = sentences(words.random());
    for (int s = 0; s < n; ++s) chunk += words.Sentence(8);
    corpus_bytes += chunk.size();
    chunks.push_back(std::move(chunk));
  }
  std::unique_ptr<Bm25Index> index = std::move(*Bm25Index::Create(analyzer));
  double resident_before = ResidentMegabytes();
  double build = CpuSeconds();
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (!index->Add(i, chunks[i]).ok()) std::abort();
  }
  double build_seconds = CpuSeconds() - build;
  double index_megabytes = ResidentMegabytes() - resident_before;
  std::printf(
      "bm25 build: %zu chunks (%.1f MB) in %.2f s: %.0f chunks/s, %.1f MB/s; %zu terms, "
      "avg %.1f terms/chunk; resident memory +%.0f MB\n",
      chunks.size(), static_cast<double>(corpus_bytes) / 1e6, build_seconds,
      static_cast<double>(chunks.size()) / build_seconds,
      static_cast<double>(corpus_bytes) / 1e6 / build_seconds, index->term_count(),
      index->average_length(), index_megabytes);

  std::vector<std::string> queries;
  for (size_t q = 0; q < query_count; ++q) {
    // Three words from a chunk: what a user might remember of it.
    const std::string& chunk = chunks[(q * 7919) % chunks.size()];
    std::string query;
    size_t at = 0;
    for (int w = 0; w < 3; ++w) {
      size_t space = chunk.find(' ', at + 1 + (q % 17));
      if (space == std::string::npos) break;
      size_t next = chunk.find(' ', space + 1);
      query += chunk.substr(space, next - space);
      at = next == std::string::npos ? chunk.size() : next;
    }
    queries.push_back(query);
  }
  for (bool filtered : {false, true}) {
    Bm25SearchOptions options;
    options.top_k = 10;
    if (filtered) options.allowed = [](ChunkId id) { return id % 2 == 0; };
    std::vector<double> latencies;
    std::vector<double> cpu;
    size_t hits = 0;
    for (const std::string& query : queries) {
      auto start = Clock::now();
      double cpu_start = CpuSeconds();
      Result<std::vector<Bm25Hit>> result = index->Search(query, options);
      cpu.push_back((CpuSeconds() - cpu_start) * 1e6);
      latencies.push_back(Seconds(start) * 1e6);
      if (!result.ok()) std::abort();
      hits += result->size();
    }
    std::printf(
        "bm25 query (top 10, %s): cpu p50 %.0f us, p99 %.0f us; wall p50 %.0f us, p99 "
        "%.0f us; %.1f hits/query\n",
        filtered ? "allowed: half the chunks" : "no filter", Percentile(cpu, 0.5),
        Percentile(cpu, 0.99), Percentile(latencies, 0.5), Percentile(latencies, 0.99),
        static_cast<double>(hits) / static_cast<double>(queries.size()));
  }

  std::vector<RankedList> lists(2);
  for (uint64_t i = 0; i < 100; ++i) {
    lists[0].push_back({i * 3, 1.0 - static_cast<double>(i) / 100});
    lists[1].push_back({i * 5, 1.0 - static_cast<double>(i) / 100});
  }
  double start = CpuSeconds();
  const int kFusions = 20000;
  for (int i = 0; i < kFusions; ++i) {
    if (!ReciprocalRankFusion(lists).ok()) std::abort();
  }
  double rrf_us = (CpuSeconds() - start) * 1e6 / kFusions;
  start = CpuSeconds();
  for (int i = 0; i < kFusions; ++i) {
    if (!LinearBlend(lists).ok()) std::abort();
  }
  std::printf("fusion of two 100-hit lists (cpu): rrf %.1f us, linear blend %.1f us\n", rrf_us,
              (CpuSeconds() - start) * 1e6 / kFusions);
  return 0;
}
