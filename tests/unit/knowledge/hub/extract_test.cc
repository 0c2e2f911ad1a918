// Extraction of plain text, Markdown and HTML into blocks, type detection, normalisation and the
// errors that become a file's last_error.
#include "knowledge/hub/extract.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "knowledge/hub/text.h"

namespace rampart::knowledge::hub {
namespace {

struct SimpleBlock {
  BlockKind kind;
  int level;
  std::string text;
  bool operator==(const SimpleBlock&) const = default;
};

void PrintTo(const SimpleBlock& block, std::ostream* os) {
  *os << BlockKindName(block.kind) << "/" << block.level << " '" << block.text << "'";
}

std::vector<SimpleBlock> Blocks(const ExtractedText& extracted) {
  std::vector<SimpleBlock> out;
  for (const Block& block : extracted.blocks) {
    out.push_back({block.kind, block.level, std::string(extracted.BlockText(block))});
  }
  return out;
}

TEST(Utf8Test, ValidatesAndNormalises) {
  EXPECT_TRUE(ValidateUtf8("plain ascii, 中文, emoji \xf0\x9f\x98\x80").ok());
  Status bad = ValidateUtf8("ok\xc3\x28");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(), "invalid UTF-8 at byte 2");
  EXPECT_FALSE(ValidateUtf8("\xc0\xaf").ok());          // overlong '/'
  EXPECT_FALSE(ValidateUtf8("\xed\xa0\x80").ok());      // a surrogate
  EXPECT_FALSE(ValidateUtf8("\xf4\x90\x80\x80").ok());  // above U+10FFFF
  EXPECT_FALSE(ValidateUtf8("\xe4\xb8").ok());          // truncated

  // CRLF and CR -> LF, NUL/controls/BOM dropped, tab kept, NFC: e + combining acute -> é.
  std::string input =
      "\xef\xbb\xbf"
      "a\r\nb\rc";
  input.push_back('\0');
  input += "d\x01\te\xcc\x81\xc2\x85";
  Result<std::string> normalized = NormalizeText(input);
  ASSERT_TRUE(normalized.ok());
  EXPECT_EQ(*normalized, std::string("a\nb\ncd\t\xc3\xa9"));
}

TEST(ExtractTest, PlainTextParagraphs) {
  Result<ExtractedText> extracted =
      Extract("First paragraph\nstill first.\r\n\r\nSecond one.\n\n\n", DocumentType::kPlainText);
  ASSERT_TRUE(extracted.ok()) << extracted.status().ToString();
  EXPECT_EQ(extracted->text, "First paragraph still first.\n\nSecond one.");
  EXPECT_EQ(Blocks(*extracted),
            (std::vector<SimpleBlock>{{BlockKind::kParagraph, 0, "First paragraph still first."},
                                      {BlockKind::kParagraph, 0, "Second one."}}));
}

TEST(ExtractTest, Markdown) {
  const char* markdown =
      "# Install\n"
      "Rampart runs on **Debian** ([docs](https://example.com/docs)).\n"
      "\n"
      "Debian\n"
      "------\n"
      "- first item\n"
      "  continued\n"
      "2. second `item`\n"
      "\n"
      "```bash\n"
      "apt-get install rampart\n"
      "\n"
      "  indented\n"
      "```\n"
      "| Name | Size |\n"
      "|------|-----:|\n"
      "| a    | 1    |\n"
      "> quoted text\n"
      "\n"
      "***\n"
      "## Usage ##\n"
      "![logo](logo.png) see <https://example.com>\n";
  Result<ExtractedText> extracted = Extract(markdown, DocumentType::kMarkdown);
  ASSERT_TRUE(extracted.ok()) << extracted.status().ToString();
  EXPECT_EQ(Blocks(*extracted), (std::vector<SimpleBlock>{
                                    {BlockKind::kHeading, 1, "Install"},
                                    {BlockKind::kParagraph, 0, "Rampart runs on Debian (docs)."},
                                    {BlockKind::kHeading, 2, "Debian"},
                                    {BlockKind::kListItem, 0, "first item continued"},
                                    {BlockKind::kListItem, 0, "second item"},
                                    {BlockKind::kCode, 0, "apt-get install rampart\n\n  indented"},
                                    {BlockKind::kTableRow, 0, "Name | Size"},
                                    {BlockKind::kTableRow, 0, "a | 1"},
                                    {BlockKind::kParagraph, 0, "quoted text"},
                                    {BlockKind::kHeading, 2, "Usage"},
                                    {BlockKind::kParagraph, 0, "logo see https://example.com"},
                                }));
}

TEST(ExtractTest, MarkdownUnclosedFenceAndListEnd) {
  Result<ExtractedText> extracted =
      Extract("- item\n\nafter the list\n```\ncode to the end\n", DocumentType::kMarkdown);
  ASSERT_TRUE(extracted.ok());
  EXPECT_EQ(Blocks(*extracted),
            (std::vector<SimpleBlock>{{BlockKind::kListItem, 0, "item"},
                                      {BlockKind::kParagraph, 0, "after the list"},
                                      {BlockKind::kCode, 0, "code to the end"}}));
}

TEST(ExtractTest, Html) {
  const char* html =
      "<!DOCTYPE html><html><head><title>Ignored</title>"
      "<style>p { color: red; }</style><script>var x = '<p>no</p>';</script></head>"
      "<body><h1 class=\"t\">Caf&eacute; &amp; Tea</h1>"
      "<p>Fish &amp; chips &lt;3 &#x4E2D;&#25991;<br>next line</p>"
      "<!-- a comment <p> -->"
      "<ul><li>one</li><li>two <b>bold</b></li></ul>"
      "<table>\n <tr><th>k</th> <td>v</td></tr>\n</table>"
      "<pre>  keep\n    this</pre>"
      "<h3>End</h3><div attr='a>b'>tail &unknown; &</div></body></html>";
  Result<ExtractedText> extracted = Extract(html, DocumentType::kHtml);
  ASSERT_TRUE(extracted.ok()) << extracted.status().ToString();
  EXPECT_EQ(Blocks(*extracted),
            (std::vector<SimpleBlock>{{BlockKind::kHeading, 1, "Caf&eacute; & Tea"},
                                      {BlockKind::kParagraph, 0, "Fish & chips <3 中文"},
                                      {BlockKind::kParagraph, 0, "next line"},
                                      {BlockKind::kListItem, 0, "one"},
                                      {BlockKind::kListItem, 0, "two bold"},
                                      {BlockKind::kTableRow, 0, "k | v"},
                                      {BlockKind::kCode, 0, "  keep\n    this"},
                                      {BlockKind::kHeading, 3, "End"},
                                      {BlockKind::kParagraph, 0, "tail &unknown; &"}}));
}

TEST(ExtractTest, HtmlHostileInputEnds) {
  // Deep nesting, an unclosed script and an unclosed tag: no recursion, no hang.
  std::string deep;
  for (int i = 0; i < 200000; ++i) deep += "<div>";
  deep += "deep text";
  Result<ExtractedText> nested = Extract(deep, DocumentType::kHtml);
  ASSERT_TRUE(nested.ok());
  EXPECT_EQ(nested->text, "deep text");
  Result<ExtractedText> script = Extract("<p>before</p><script>never closed", DocumentType::kHtml);
  ASSERT_TRUE(script.ok());
  EXPECT_EQ(script->text, "before");
  Result<ExtractedText> tag = Extract("text <a href=\"x", DocumentType::kHtml);
  ASSERT_TRUE(tag.ok());
  EXPECT_EQ(tag->text, "text");
  EXPECT_EQ(Extract("a < b and c<d", DocumentType::kHtml)->text, "a < b and c");
}

TEST(ExtractTest, PathologicalRunsStayLinear) {
  // Each would be quadratic with an unbounded look-ahead per character (minutes, not
  // milliseconds, at this size).
  for (const char* unit : {"[", "![", "<", "&", "&#", "<a ", "[x](", "`", "**", "| ", "# "}) {
    std::string text;
    while (text.size() < (size_t{1} << 20)) text += unit;
    for (DocumentType type :
         {DocumentType::kPlainText, DocumentType::kMarkdown, DocumentType::kHtml}) {
      Result<ExtractedText> extracted = Extract(text, type);
      EXPECT_TRUE(extracted.ok() || extracted.status().message() == "the file holds no text")
          << unit << ": " << extracted.status().ToString();
    }
  }
}

TEST(ExtractTest, BlockRangesPointIntoText) {
  Result<ExtractedText> extracted = Extract("# A\n\nb\n\n- c\n", DocumentType::kMarkdown);
  ASSERT_TRUE(extracted.ok());
  EXPECT_EQ(extracted->text, "A\n\nb\n\nc");
  ASSERT_EQ(extracted->blocks.size(), 3u);
  EXPECT_EQ(extracted->blocks[1].begin, 3u);
  EXPECT_EQ(extracted->blocks[1].end, 4u);
}

TEST(ExtractTest, Errors) {
  Result<ExtractedText> empty = Extract("", DocumentType::kPlainText);
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(empty.status().message(), "the file is empty (0 bytes)");
  Result<ExtractedText> invalid = Extract("abc\xff", DocumentType::kMarkdown);
  EXPECT_EQ(invalid.status().message(), "invalid UTF-8 at byte 3");
  ExtractOptions small;
  small.max_input_bytes = 4;
  EXPECT_EQ(Extract("12345", DocumentType::kPlainText, small).status().code(),
            StatusCode::kPayloadTooLarge);
  small.max_input_bytes = 100;
  small.max_text_bytes = 3;
  Result<ExtractedText> long_text = Extract("1234", DocumentType::kPlainText, small);
  EXPECT_EQ(long_text.status().code(), StatusCode::kPayloadTooLarge);
  EXPECT_EQ(long_text.status().message(), "the extracted text is 4 bytes, over the limit of 3");
  EXPECT_EQ(Extract("<script>x</script>", DocumentType::kHtml).status().message(),
            "the file holds no text");
  EXPECT_EQ(ExtractAuto(std::string("\x7f"
                                    "ELF\0\0\0",
                                    7),
                        std::nullopt)
                .status()
                .message(),
            "unsupported file type (binary data)");
}

TEST(DocumentTypeTest, FromMimeFilenameAndSniffing) {
  EXPECT_EQ(*DocumentTypeFromMime("text/HTML; charset=utf-8"), DocumentType::kHtml);
  EXPECT_EQ(*DocumentTypeFromMime("text/markdown"), DocumentType::kMarkdown);
  EXPECT_EQ(*DocumentTypeFromMime("application/pdf"), DocumentType::kPdf);
  EXPECT_EQ(DocumentTypeFromMime("image/png").status().message(),
            "unsupported file type 'image/png' (text/plain, text/markdown, text/html and "
            "application/pdf are)");
  EXPECT_EQ(*DocumentTypeFromFilename("Guide.MD"), DocumentType::kMarkdown);
  EXPECT_EQ(*DocumentTypeFromFilename("a.tar.htm"), DocumentType::kHtml);
  EXPECT_FALSE(DocumentTypeFromFilename("archive.zip").ok());
  EXPECT_FALSE(DocumentTypeFromFilename("README").ok());

  EXPECT_EQ(SniffDocumentType("%PDF-1.7\n..."), DocumentType::kPdf);
  EXPECT_EQ(SniffDocumentType("  <!DOCTYPE html><p>x"), DocumentType::kHtml);
  EXPECT_EQ(SniffDocumentType("intro\n# Title\n"), DocumentType::kMarkdown);
  EXPECT_EQ(SniffDocumentType("just words"), DocumentType::kPlainText);
  EXPECT_EQ(SniffDocumentType(std::string("a\0b", 3)), std::nullopt);
  EXPECT_EQ(SniffDocumentType("\xff\xfe"), std::nullopt);
}

}  // namespace
}  // namespace rampart::knowledge::hub
