// PDF extraction through poppler on PDFs written by the test (one Helvetica text object a page),
// and the errors for what is not a readable PDF.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "knowledge/hub/extract.h"
#include "testing/minimal_pdf.h"

namespace rampart::knowledge::hub {
namespace {

using ::rampart::testing::MakePdf;

TEST(PdfTest, ExtractsPageByPage) {
  std::string pdf =
      MakePdf({{"Rampart serves models.", "It runs on Debian."}, {"Second page text."}});
  Result<ExtractedText> extracted = ExtractAuto(pdf, std::nullopt);
  ASSERT_TRUE(extracted.ok()) << extracted.status().ToString();
  EXPECT_EQ(extracted->type, DocumentType::kPdf);
  EXPECT_EQ(extracted->page_count, 2);
  ASSERT_GE(extracted->blocks.size(), 2u);
  EXPECT_EQ(extracted->blocks.front().page, 1);
  EXPECT_EQ(extracted->blocks.back().page, 2);
  EXPECT_NE(extracted->BlockText(extracted->blocks.front()).find("Rampart serves models."),
            std::string_view::npos);
  EXPECT_NE(extracted->text.find("It runs on Debian."), std::string::npos);
  EXPECT_EQ(extracted->BlockText(extracted->blocks.back()), "Second page text.");
}

TEST(PdfTest, PageLimit) {
  ExtractOptions options;
  options.max_pdf_pages = 1;
  Result<ExtractedText> extracted = Extract(MakePdf({{"a"}, {"b"}}), DocumentType::kPdf, options);
  EXPECT_EQ(extracted.status().code(), StatusCode::kPayloadTooLarge);
  EXPECT_EQ(extracted.status().message(), "the PDF has 2 pages, over the limit of 1");
}

TEST(PdfTest, BrokenPdfsAreInvalidArguments) {
  for (const std::string& broken :
       {std::string("%PDF-1.4\ngarbage without objects"), std::string("%PDF-"),
        MakePdf({{"text"}}).substr(0, 40), std::string("not a pdf at all")}) {
    Result<ExtractedText> extracted = Extract(broken, DocumentType::kPdf);
    ASSERT_FALSE(extracted.ok()) << broken;
    EXPECT_EQ(extracted.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(extracted.status().message().starts_with("not a readable PDF: "))
        << extracted.status().message();
  }
}

}  // namespace
}  // namespace rampart::knowledge::hub
