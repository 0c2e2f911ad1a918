// PDF extraction through poppler on PDFs written by the test (one Helvetica text object a page),
// and the errors for what is not a readable PDF.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "knowledge/hub/extract.h"

namespace rampart::knowledge::hub {
namespace {

// A minimal valid PDF with one page per entry of `pages`, each a list of text lines.
std::string MakePdf(const std::vector<std::vector<std::string>>& pages) {
  std::vector<std::string> objects;  // object i+1
  objects.push_back("<< /Type /Catalog /Pages 2 0 R >>");
  std::string kids;
  for (size_t i = 0; i < pages.size(); ++i) kids += std::to_string(4 + 2 * i) + " 0 R ";
  objects.push_back("<< /Type /Pages /Kids [" + kids + "] /Count " + std::to_string(pages.size()) +
                    " >>");
  objects.push_back("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>");
  for (size_t i = 0; i < pages.size(); ++i) {
    objects.push_back(
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font "
        "<< /F1 3 0 R >> >> /Contents " +
        std::to_string(5 + 2 * i) + " 0 R >>");
    std::string content = "BT /F1 12 Tf 72 720 Td 14 TL\n";
    for (const std::string& line : pages[i]) content += "(" + line + ") Tj T*\n";
    content += "ET";
    objects.push_back("<< /Length " + std::to_string(content.size()) + " >>\nstream\n" + content +
                      "\nendstream");
  }
  std::string pdf = "%PDF-1.4\n";
  std::vector<size_t> offsets;
  for (size_t i = 0; i < objects.size(); ++i) {
    offsets.push_back(pdf.size());
    pdf += std::to_string(i + 1) + " 0 obj\n" + objects[i] + "\nendobj\n";
  }
  size_t xref = pdf.size();
  pdf += "xref\n0 " + std::to_string(objects.size() + 1) + "\n0000000000 65535 f \n";
  for (size_t offset : offsets) {
    char entry[32];
    std::snprintf(entry, sizeof(entry), "%010zu 00000 n \n", offset);
    pdf += entry;
  }
  pdf += "trailer\n<< /Size " + std::to_string(objects.size() + 1) +
         " /Root 1 0 R >>\nstartxref\n" + std::to_string(xref) + "\n%%EOF\n";
  return pdf;
}

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
