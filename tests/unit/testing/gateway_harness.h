#pragma once

// The gateway inside one test process: a real HTTP server on loopback (port 0) with the /v1
// front end in front of a Gateway, a blocking client for it, and its metrics. Test fixtures
// derive from it and call Stop() in TearDown.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "api/openai_http.h"
#include "gateway/gateway.h"
#include "metrics/registry.h"
#include "testing/eventually.h"

namespace rampart::gateway {

class GatewayHarness {
 protected:
  struct Answer {
    int status = 0;
    std::string body;
    boost::beast::http::response<boost::beast::http::string_body> raw;
  };

  // The front end decides with `options.access` too (null: open).
  void Start(GatewayConfig config, GatewayOptions options = {}) {
    const policy::AccessControl* access = options.access;
    options.audit = audit_;
    auto gateway = Gateway::Create(std::move(config), std::move(options), registry_);
    ASSERT_TRUE(gateway.ok()) << gateway.status().ToString();
    gateway_ = std::move(gateway).value();
    front_ = std::make_unique<api::OpenAiHttp>(
        *gateway_, [] { return Status::Ok(); }, access, nullptr, audit_);
    net::HttpServerOptions server_options;
    server_options.address = "127.0.0.1";
    server_options.port = 0;
    server_options.threads = 2;
    auto server = net::HttpServer::Start(
        server_options, [this](net::HttpRequest&& request, net::Responder responder) {
          front_->Handle(std::move(request), std::move(responder));
        });
    ASSERT_TRUE(server.ok());
    server_ = std::move(server).value();
  }

  void Stop() {
    if (server_) server_->Shutdown(std::chrono::milliseconds(1000));
    if (front_) front_->Shutdown();
    gateway_.reset();
  }

  // POSTs `body` (JSON) on a fresh connection and reads the whole answer (a stream to its end).
  Answer Post(std::string_view path, std::string_view body,
              std::vector<std::pair<std::string, std::string>> headers = {}) {
    return Call(boost::beast::http::verb::post, path, body, std::move(headers));
  }
  Answer Get(std::string_view path) { return Call(boost::beast::http::verb::get, path, {}, {}); }

  Answer Call(boost::beast::http::verb verb, std::string_view path, std::string_view body,
              std::vector<std::pair<std::string, std::string>> headers) {
    namespace asio = boost::asio;
    namespace beast = boost::beast;
    namespace http = beast::http;
    asio::io_context context;
    beast::tcp_stream stream(context);
    stream.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), server_->port()));
    stream.expires_after(std::chrono::seconds(15));
    http::request<http::string_body> request(verb, std::string(path), 11);
    request.set(http::field::host, "127.0.0.1");
    request.set(http::field::content_type, "application/json");
    for (const auto& [name, value] : headers) request.set(name, value);
    request.body() = std::string(body);
    request.prepare_payload();
    http::write(stream, request);
    beast::flat_buffer buffer;
    Answer answer;
    beast::error_code error;
    http::read(stream, buffer, answer.raw, error);
    answer.status = static_cast<int>(answer.raw.result_int());
    answer.body = answer.raw.body();
    return answer;
  }

  // Whether the metrics come to show `line` (a call is counted just after its answer is sent).
  bool MetricsShow(std::string_view line) {
    return testing::Eventually(
        [&] { return registry_.Exposition().find(line) != std::string::npos; });
  }

  metrics::Registry registry_;
  audit::AuditSink* audit_ = nullptr;  // set before Start to record the calls
  std::unique_ptr<Gateway> gateway_;
  std::unique_ptr<api::OpenAiHttp> front_;
  std::unique_ptr<net::HttpServer> server_;
};

}  // namespace rampart::gateway
