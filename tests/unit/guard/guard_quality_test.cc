// Quality on the generated, labelled corpus (tests/unit/guard/corpus.h): per-type precision,
// recall and F1 and the micro-F1, for both engines. Fails when micro-F1 < 0.98 or when any
// invalid look-alike is reported.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>

#include "guard/corpus.h"
#include "guard/detector.h"

namespace rampart::guard {
namespace {

struct Counts {
  int true_positive = 0;
  int false_positive = 0;
  int false_negative = 0;
};

double F1(const Counts& c) {
  double denominator = 2.0 * c.true_positive + c.false_positive + c.false_negative;
  return denominator == 0 ? 1.0 : 2.0 * c.true_positive / denominator;
}

class QualityTest : public ::testing::TestWithParam<bool> {};

TEST_P(QualityTest, MicroF1AndNoLookAlikes) {
  DetectorOptions options;
  options.internal_domains = {"corp.example.com"};
  options.internal_path_roots = {"/srv/secret"};
  options.force_re2 = GetParam();
  auto detector = Detector::Create(options);
  ASSERT_TRUE(detector.ok()) << detector.status().ToString();

  const auto corpus = testing::MakeCorpus(20240501, 3000);
  std::map<std::string_view, Counts> by_type;
  Counts total;
  int look_alikes = 0;
  int look_alikes_reported = 0;
  int shown = 0;
  for (const auto& sample : corpus) {
    auto found = (*detector)->Detect(sample.text);
    ASSERT_TRUE(found.ok()) << found.status().ToString();
    std::vector<bool> matched(found->size(), false);
    for (const auto& label : sample.labels) {
      if (label.type.empty()) {
        ++look_alikes;
        for (const Entity& e : *found) {
          if (e.start < label.end && label.start < e.end) {
            ++look_alikes_reported;
            if (shown++ < 20) {
              ADD_FAILURE() << "look-alike reported as " << e.type << ": "
                            << sample.text.substr(e.start, e.end - e.start)
                            << " in: " << sample.text;
            }
          }
        }
        continue;
      }
      bool hit = false;
      for (size_t i = 0; i < found->size(); ++i) {
        const Entity& e = (*found)[i];
        if (e.type == label.type && e.start == label.start && e.end == label.end) {
          matched[i] = hit = true;
        }
      }
      if (hit) {
        ++by_type[label.type].true_positive;
      } else {
        ++by_type[label.type].false_negative;
        if (shown++ < 20) {
          std::printf("missed %s: [%s] in: %s\n", std::string(label.type).c_str(),
                      sample.text.substr(label.start, label.end - label.start).c_str(),
                      sample.text.c_str());
        }
      }
    }
    for (size_t i = 0; i < found->size(); ++i) {
      const Entity& e = (*found)[i];
      bool on_look_alike = false;
      for (const auto& label : sample.labels) {
        on_look_alike |= label.type.empty() && e.start < label.end && label.start < e.end;
      }
      if (matched[i] || on_look_alike) continue;
      ++by_type[e.type].false_positive;
      if (shown++ < 20) {
        std::printf("extra %s: [%s] in: %s\n", std::string(e.type).c_str(),
                    sample.text.substr(e.start, e.end - e.start).c_str(), sample.text.c_str());
      }
    }
  }
  std::printf("[ guard ] quality (%s), %zu samples, %d look-alikes\n",
              std::string((*detector)->engine()).c_str(), corpus.size(), look_alikes);
  std::printf("  %-18s %6s %6s %6s %9s %7s %6s\n", "type", "tp", "fp", "fn", "precision", "recall",
              "f1");
  for (std::string_view type : AllEntityTypes()) {
    const Counts& c = by_type[type];
    total.true_positive += c.true_positive;
    total.false_positive += c.false_positive;
    total.false_negative += c.false_negative;
    double precision = c.true_positive + c.false_positive == 0
                           ? 1.0
                           : double(c.true_positive) / (c.true_positive + c.false_positive);
    double recall = c.true_positive + c.false_negative == 0
                        ? 1.0
                        : double(c.true_positive) / (c.true_positive + c.false_negative);
    std::printf("  %-18s %6d %6d %6d %9.4f %7.4f %6.4f\n", std::string(type).c_str(),
                c.true_positive, c.false_positive, c.false_negative, precision, recall, F1(c));
  }
  double micro = F1(total);
  std::printf("  micro-F1 %.4f; look-alikes reported: %d of %d\n", micro, look_alikes_reported,
              look_alikes);
  EXPECT_GE(micro, 0.98);
  EXPECT_EQ(look_alikes_reported, 0);
  for (std::string_view type : AllEntityTypes()) EXPECT_GT(by_type[type].true_positive, 0) << type;
}

INSTANTIATE_TEST_SUITE_P(Engines, QualityTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& param) {
                           return param.param ? "Re2" : "Hyperscan";
                         });

}  // namespace
}  // namespace rampart::guard
