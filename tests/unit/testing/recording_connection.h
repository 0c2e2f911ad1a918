#pragma once

// A net::Connection that keeps the one whole answer it is given, for tests that call a front
// end's Handle directly (no socket). A streamed answer fails the test: the APIs tested this way
// answer whole.

#include <gtest/gtest.h>

#include <future>
#include <memory>

#include "net/http_server.h"

namespace rampart::testing {

class RecordingConnection final : public net::Connection {
 public:
  void Answer(std::shared_ptr<Connection>, net::HttpResponse response) override {
    answered_.set_value(std::move(response));
  }
  void AnswerWith(std::shared_ptr<Connection>,
                  UniqueFunction<net::HttpResponse()> make_response) override {
    answered_.set_value(make_response());
  }
  std::shared_ptr<net::HttpStream> StartStream(std::shared_ptr<Connection>,
                                               net::HttpResponseHead) override {
    ADD_FAILURE() << "this API answers whole, it does not stream";
    return nullptr;
  }
  void PumpStream() override {}
  std::future<net::HttpResponse> answer() { return answered_.get_future(); }

 private:
  std::promise<net::HttpResponse> answered_;
};

}  // namespace rampart::testing
