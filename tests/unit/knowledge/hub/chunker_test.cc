// Chunking: golden cases in English and Chinese for both strategies, heading paths, pages, the
// overlap, and OpenAI's bounds.
#include "knowledge/hub/chunker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "knowledge/hub/text.h"
#include "knowledge/hub/tokens.h"

namespace rampart::knowledge::hub {
namespace {

std::vector<std::string> Texts(const std::vector<Chunk>& chunks) {
  std::vector<std::string> out;
  for (const Chunk& chunk : chunks) out.push_back(chunk.text);
  return out;
}

ExtractedText Markdown(std::string_view text) {
  Result<ExtractedText> extracted = Extract(text, DocumentType::kMarkdown);
  EXPECT_TRUE(extracted.ok()) << extracted.status().ToString();
  return extracted.ok() ? *extracted : ExtractedText{};
}

// Every chunk is its byte range of the text, starts and ends on a word boundary of the original
// (never inside a word or a multi-byte character), and holds at most `max` tokens.
// `words_fit`: no word of the text is over `max` (else it is cut, the one exception).
void ExpectWellFormed(const ExtractedText& extracted, const std::vector<Chunk>& chunks, size_t max,
                      bool words_fit = true) {
  for (const Chunk& chunk : chunks) {
    EXPECT_EQ(chunk.text, extracted.text.substr(chunk.begin, chunk.end - chunk.begin));
    EXPECT_TRUE(ValidateUtf8(chunk.text).ok()) << chunk.text;
    EXPECT_LE(chunk.token_count, max) << chunk.text;
    if (chunk.begin > 0 && words_fit) {
      char before = extracted.text[chunk.begin - 1];
      char first = extracted.text[chunk.begin];
      bool ascii_word_cut = std::isalnum(static_cast<unsigned char>(before)) &&
                            std::isalnum(static_cast<unsigned char>(first));
      EXPECT_FALSE(ascii_word_cut) << chunk.text;
    }
  }
}

const char* kEnglish =
    "# Install\n"
    "Rampart runs on Debian 12. Install the packages first. Then build it with make.\n"
    "\n"
    "## Debian\n"
    "Run the install script as root. It installs every package the build needs.\n"
    "\n"
    "## From source\n"
    "Clone the repository. Configure with CMake and Ninja. Build with two jobs on a small "
    "machine, because the compiler needs memory.\n"
    "\n"
    "# Usage\n"
    "Start the server with make run.\n";

TEST(ChunkerTest, AutoEnglishGolden) {
  ExtractedText extracted = Markdown(kEnglish);
  ChunkingOptions options = ChunkingOptions::Auto();
  options.max_chunk_size_tokens = 20;
  options.chunk_overlap_tokens = 5;
  Result<std::vector<Chunk>> chunks = ChunkText(extracted, options);
  ASSERT_TRUE(chunks.ok()) << chunks.status().ToString();
  // Each section is chunked on its own; the long one is split at a sentence.
  EXPECT_EQ(Texts(*chunks),
            (std::vector<std::string>{
                "Install\n\nRampart runs on Debian 12. Install the packages first. Then build it "
                "with make.",
                "Debian\n\nRun the install script as root. It installs every package the build "
                "needs.",
                "From source\n\nClone the repository. Configure with CMake and Ninja.",
                "Build with two jobs on a small machine, because the compiler needs memory.",
                "Usage\n\nStart the server with make run."}));
  ExpectWellFormed(extracted, *chunks, 20);
  std::vector<std::string> paths;
  for (const Chunk& chunk : *chunks) paths.push_back(chunk.heading_path);
  EXPECT_EQ(paths, (std::vector<std::string>{"Install", "Install > Debian", "Install > From source",
                                             "Install > From source", "Usage"}));
}

const char* kChinese =
    "# 安装\n"
    "Rampart 运行在 Debian 12 上。先安装依赖的软件包，然后用 make 构建。\n"
    "\n"
    "## 从源码构建\n"
    "克隆代码仓库。用 CMake 和 Ninja 配置。在小机器上用两个任务构建，因为编译器需要很多内存。"
    "构建完成以后运行全部测试。\n"
    "\n"
    "# 使用\n"
    "用 make run 启动服务器。\n";

TEST(ChunkerTest, AutoChineseGolden) {
  ExtractedText extracted = Markdown(kChinese);
  ChunkingOptions options = ChunkingOptions::Auto();
  options.max_chunk_size_tokens = 24;
  options.chunk_overlap_tokens = 0;
  Result<std::vector<Chunk>> chunks = ChunkText(extracted, options);
  ASSERT_TRUE(chunks.ok()) << chunks.status().ToString();
  // The long paragraph is split at sentences, and its long sentence at an ICU dictionary word
  // boundary (在小机器上 | 用两个任务构建).
  EXPECT_EQ(Texts(*chunks),
            (std::vector<std::string>{
                "安装\n\nRampart 运行在 Debian 12 上。", "先安装依赖的软件包，然后用 make 构建。",
                "从源码构建\n\n克隆代码仓库。用 CMake 和 Ninja 配置。在小机器上",
                "用两个任务构建，因为编译器需要很多内存。", "构建完成以后运行全部测试。",
                "使用\n\n用 make run 启动服务器。"}));
  ExpectWellFormed(extracted, *chunks, 24);
  EXPECT_EQ(chunks->back().heading_path, "使用");
}

TEST(ChunkerTest, StaticEnglishGoldenWithOverlap) {
  Result<ExtractedText> extracted =
      Extract("one two three four five six seven eight nine ten eleven twelve thirteen",
              DocumentType::kPlainText);
  ASSERT_TRUE(extracted.ok());
  Result<std::vector<Chunk>> chunks = ChunkText(*extracted, ChunkingOptions::Static(5, 2));
  ASSERT_TRUE(chunks.ok());
  EXPECT_EQ(Texts(*chunks), (std::vector<std::string>{
                                "one two three four five", "four five six seven eight",
                                "seven eight nine ten eleven", "ten eleven twelve thirteen"}));
  ExpectWellFormed(*extracted, *chunks, 5);
}

TEST(ChunkerTest, StaticChineseGoldenNeverCutsACharacter) {
  Result<ExtractedText> extracted = Extract(
      "知识库把组织的文档变成可以搜索的答案，并且每个答案都给出来源。", DocumentType::kPlainText);
  ASSERT_TRUE(extracted.ok());
  Result<std::vector<Chunk>> chunks = ChunkText(*extracted, ChunkingOptions::Static(8, 3));
  ASSERT_TRUE(chunks.ok());
  // Cuts fall between characters at ICU's word boundaries (its dictionary reads 文 | 档 here).
  EXPECT_EQ(Texts(*chunks),
            (std::vector<std::string>{"知识库把组织的文", "的文档变成可以", "可以搜索的答案，",
                                      "答案，并且每个", "每个答案都给出", "都给出来源。"}));
  ExpectWellFormed(*extracted, *chunks, 8);
}

TEST(ChunkerTest, LongSentenceSplitsAtWordsAndLongWordAtCodePoints) {
  std::string words;
  for (int i = 0; i < 300; ++i) words += "word" + std::to_string(i) + " ";
  std::string blob(5000, 'x');
  blob += "\xe4\xb8\xad";  // a 3-byte character at the very end of a long "word"
  Result<ExtractedText> extracted = Extract(words + "\n\n" + blob, DocumentType::kPlainText);
  ASSERT_TRUE(extracted.ok());
  for (ChunkingOptions options : {ChunkingOptions::Auto(), ChunkingOptions::Static(100, 50)}) {
    options.max_chunk_size_tokens = 100;
    options.chunk_overlap_tokens = 20;
    Result<std::vector<Chunk>> chunks = ChunkText(*extracted, options);
    ASSERT_TRUE(chunks.ok());
    EXPECT_GT(chunks->size(), 5u);
    for (const Chunk& chunk : *chunks) {
      EXPECT_TRUE(ValidateUtf8(chunk.text).ok());
      EXPECT_LE(chunk.token_count, 100u);
    }
  }
}

TEST(ChunkerTest, TinyLimitsHold) {
  // The fuzzer's find (hub_text_fuzzer): a one-token limit and a "word" of punctuation ICU does
  // not split ("*--|"), once cut into 4-byte pieces of two tokens each.
  Result<ExtractedText> extracted = Extract(
      "Text with **bold*--|\n| 1 | 2 |\n>2\n\n## such1ebian\n- i---|\nxxxxxxxxxxxxxxxxxxxxxxxxx"
      "\xe4\xb8\xad\xe4\xb8\xad!!!!!!",
      DocumentType::kMarkdown);
  ASSERT_TRUE(extracted.ok());
  for (int max : {1, 2, 3}) {
    for (ChunkingOptions options : {ChunkingOptions::Auto(), ChunkingOptions::Static()}) {
      options.max_chunk_size_tokens = max;
      options.chunk_overlap_tokens = 0;
      Result<std::vector<Chunk>> chunks = ChunkText(*extracted, options);
      ASSERT_TRUE(chunks.ok());
      ExpectWellFormed(*extracted, *chunks, static_cast<size_t>(max), /*words_fit=*/false);
      std::string joined;
      for (const Chunk& chunk : *chunks) joined += chunk.text;
      std::string expected;
      for (char c : extracted->text) {
        if (c != ' ' && c != '\n') expected += c;
      }
      joined.erase(std::remove_if(joined.begin(), joined.end(),
                                  [](char c) { return c == ' ' || c == '\n'; }),
                   joined.end());
      EXPECT_EQ(joined, expected) << "nothing lost or repeated without overlap, max " << max;
    }
  }
}

TEST(ChunkerTest, PagesAndHeadingPathsFollowBlocks) {
  BlockWriter writer(DocumentType::kPdf);
  writer.Add(BlockKind::kParagraph, "Page one text.", 0, 1);
  writer.Add(BlockKind::kParagraph, "Page two text.", 0, 2);
  ExtractedText extracted = std::move(writer).Finish();
  ChunkingOptions options = ChunkingOptions::Auto();
  options.max_chunk_size_tokens = 4;
  options.chunk_overlap_tokens = 0;
  Result<std::vector<Chunk>> chunks = ChunkText(extracted, options);
  ASSERT_TRUE(chunks.ok());
  ASSERT_EQ(chunks->size(), 2u);
  EXPECT_EQ((*chunks)[0].page, 1);
  EXPECT_EQ((*chunks)[1].page, 2);
  EXPECT_EQ((*chunks)[1].begin, 16u);
}

TEST(ChunkerTest, RandomMarkupNeverBreaksTheInvariants) {
  // Seeded random documents from markup fragments, through every parser and both strategies.
  const char* fragments[] = {"# ",       "## ",       "\n",         "\n\n", "```",   "- ",
                             "1. ",      "| a | b |", "<p>",        "</p>", "<h2>",  "<li>",
                             "<script>", "&amp;",     "&#x4E2D;",   "<",    ">",     "word ",
                             "知识库",   "。",        "Sentence. ", "   ",  "===",   "[x](y)",
                             "\t",       "é",         "<!--",       "-->",  "<pre>", "</pre>"};
  uint32_t state = 12345;
  for (int document = 0; document < 300; ++document) {
    std::string text;
    int pieces = 1 + static_cast<int>(state % 200);
    for (int k = 0; k < pieces; ++k) {
      state = state * 1103515245 + 12345;
      text += fragments[(state >> 16) % std::size(fragments)];
    }
    for (DocumentType type :
         {DocumentType::kPlainText, DocumentType::kMarkdown, DocumentType::kHtml}) {
      Result<ExtractedText> extracted = Extract(text, type);
      if (!extracted.ok()) {
        EXPECT_EQ(extracted.status().message(), "the file holds no text") << text;
        continue;
      }
      EXPECT_TRUE(ValidateUtf8(extracted->text).ok());
      size_t previous_end = 0;
      for (const Block& block : extracted->blocks) {
        EXPECT_LT(block.begin, block.end);
        EXPECT_GE(block.begin, previous_end);
        EXPECT_LE(block.end, extracted->text.size());
        previous_end = block.end;
      }
      for (ChunkingOptions options : {ChunkingOptions::Auto(), ChunkingOptions::Static()}) {
        options.max_chunk_size_tokens = 16;
        options.chunk_overlap_tokens = 4;
        Result<std::vector<Chunk>> chunks = ChunkText(*extracted, options);
        ASSERT_TRUE(chunks.ok());
        ExpectWellFormed(*extracted, *chunks, 16);
      }
    }
  }
}

TEST(ChunkerTest, OpenAiBounds) {
  EXPECT_TRUE(ValidateChunkingOptions(ChunkingOptions::Static()).ok());
  EXPECT_TRUE(ValidateChunkingOptions(ChunkingOptions::Auto()).ok());
  EXPECT_TRUE(ValidateChunkingOptions(ChunkingOptions::Static(100, 50)).ok());
  EXPECT_TRUE(ValidateChunkingOptions(ChunkingOptions::Static(4096, 0)).ok());
  EXPECT_EQ(ValidateChunkingOptions(ChunkingOptions::Static(50, 0)).message(),
            "max_chunk_size_tokens must be between 100 and 4096, got 50");
  EXPECT_EQ(ValidateChunkingOptions(ChunkingOptions::Static(5000, 0)).message(),
            "max_chunk_size_tokens must be between 100 and 4096, got 5000");
  EXPECT_EQ(ValidateChunkingOptions(ChunkingOptions::Static(800, 401)).message(),
            "chunk_overlap_tokens must not exceed half of max_chunk_size_tokens (400), got 401");
  EXPECT_EQ(ValidateChunkingOptions(ChunkingOptions::Static(800, -1)).message(),
            "chunk_overlap_tokens must not be negative, got -1");
  EXPECT_FALSE(ChunkText(ExtractedText{}, ChunkingOptions::Static(10, 10)).ok());
  EXPECT_TRUE(ChunkText(ExtractedText{}, ChunkingOptions::Static(10, 5))->empty());
}

}  // namespace
}  // namespace rampart::knowledge::hub
