#include "serve/request.h"

#include <gtest/gtest.h>

#include <vector>

namespace rampart::serve {
namespace {

TEST(AnsweredOnce, ACallbackDroppedUncalledAnswersInternal) {
  std::vector<Status> answers;
  {
    InferCallback callback = AnsweredOnce(
        [&](Result<std::unique_ptr<InferResponse>> result) { answers.push_back(result.status()); });
    InferCallback moved = std::move(callback);  // the move carries the duty, not a second one
  }
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].code(), StatusCode::kInternal);
  EXPECT_EQ(answers[0].message(),
            "the request was dropped without an answer (see the server's log)");
}

TEST(AnsweredOnce, ACallbackCalledIsNotCalledAgain) {
  int calls = 0;
  {
    InferCallback callback = AnsweredOnce(
        [&](Result<std::unique_ptr<InferResponse>> result) { calls += result.ok() ? 1 : 100; });
    callback(std::make_unique<InferResponse>());
  }
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace rampart::serve
