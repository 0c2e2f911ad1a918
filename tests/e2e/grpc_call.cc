// A minimal KServe v2 gRPC client for the end-to-end tests: calls one method of
// inference.GRPCInferenceService with requests given as JSON (protobuf's JSON mapping, one
// request per line on stdin) and prints what came back as JSON lines.
//
//   grpc_call --target 127.0.0.1:8001 --method ServerMetadata <<< '{}'
//   grpc_call --target 127.0.0.1:8001 --method ModelStreamInfer < requests.jsonl
//
// A unary method prints {"code": <grpc code>, "message": "...", "response": {...}} (no
// "response" on error). ModelStreamInfer writes every request, half-closes, and prints
// {"response": {...}} per answer, then {"code": ..., "message": "..."} for the stream's end. A
// method the service does not declare is called with an empty body (for UNIMPLEMENTED checks).
// Exits 0 once the call was made, whatever its status; 2 on bad arguments or input.

#include <cstdio>
#include <functional>
#include <future>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <google/protobuf/util/json_util.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <CLI/CLI.hpp>

#include "api/grpc_service.grpc.pb.h"
#include "json/writer.h"

namespace {

using inference::GRPCInferenceService;
using Stub = GRPCInferenceService::Stub;

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(message, &json, options).ok()) return "{}";
  return json;
}

bool FromJson(const std::string& json, google::protobuf::Message& message) {
  const auto status = google::protobuf::util::JsonStringToMessage(json, &message);
  if (!status.ok()) {
    std::fprintf(stderr, "grpc_call: bad request JSON: %s\n",
                 std::string(status.message()).c_str());
  }
  return status.ok();
}

void PrintStatus(const grpc::Status& status, const google::protobuf::Message* response) {
  rampart::json::Writer writer;
  writer.StartObject();
  writer.Key("code");
  writer.Int64(status.error_code());
  writer.Key("message");
  writer.String(status.error_message());
  if (response != nullptr && status.ok()) {
    writer.Key("response");
    writer.Raw(ToJson(*response));
  }
  writer.EndObject();
  std::printf("%s\n", std::string(writer.view()).c_str());
}

// --metadata KEY=VALUE pairs, sent with every call (credentials: authorization, x-api-key).
std::vector<std::pair<std::string, std::string>>& CallMetadata() {
  static std::vector<std::pair<std::string, std::string>> metadata;
  return metadata;
}

grpc::ClientContext* WithDeadline(grpc::ClientContext& context) {
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  for (const auto& [key, value] : CallMetadata()) context.AddMetadata(key, value);
  return &context;
}

// One unary method of the stub, typed.
template <typename Request, typename Response>
std::function<int(Stub&, const std::string&)> Unary(
    grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*)) {
  return [method](Stub& stub, const std::string& json) {
    Request request;
    if (!FromJson(json, request)) return 2;
    Response response;
    grpc::ClientContext context;
    PrintStatus((stub.*method)(WithDeadline(context), request, &response), &response);
    return 0;
  };
}

int Stream(Stub& stub, const std::vector<std::string>& requests) {
  grpc::ClientContext context;
  auto stream = stub.ModelStreamInfer(WithDeadline(context));
  for (const std::string& json : requests) {
    inference::ModelInferRequest request;
    if (!FromJson(json, request)) return 2;
    if (!stream->Write(request)) break;
  }
  stream->WritesDone();
  inference::ModelStreamInferResponse response;
  while (stream->Read(&response)) {
    std::printf("{\"response\":%s}\n", ToJson(response).c_str());
  }
  PrintStatus(stream->Finish(), nullptr);
  return 0;
}

int Generic(const std::shared_ptr<grpc::Channel>& channel, const std::string& method) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  grpc::Slice empty{std::string()};
  grpc::ByteBuffer request(&empty, 1);  // an empty message (a default ByteBuffer is none)
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(WithDeadline(context), "/inference.GRPCInferenceService/" + method,
                 grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status status) { done.set_value(std::move(status)); });
  PrintStatus(done.get_future().get(), nullptr);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("KServe v2 gRPC call for the end-to-end tests");
  std::string target = "127.0.0.1:8001";
  std::string method;
  app.add_option("--target", target, "host:port of the gRPC server");
  app.add_option("--method", method, "Method of inference.GRPCInferenceService")->required();
  std::vector<std::string> metadata;
  app.add_option("--metadata", metadata, "KEY=VALUE sent with the call (repeatable)");
  CLI11_PARSE(app, argc, argv);
  for (const std::string& pair : metadata) {
    const size_t equals = pair.find('=');
    if (equals == std::string::npos) {
      std::fprintf(stderr, "grpc_call: --metadata '%s': expected KEY=VALUE\n", pair.c_str());
      return 2;
    }
    CallMetadata().emplace_back(pair.substr(0, equals), pair.substr(equals + 1));
  }

  const std::map<std::string, std::function<int(Stub&, const std::string&)>> unary = {
      {"ServerLive", Unary(&Stub::ServerLive)},
      {"ServerReady", Unary(&Stub::ServerReady)},
      {"ModelReady", Unary(&Stub::ModelReady)},
      {"ServerMetadata", Unary(&Stub::ServerMetadata)},
      {"ModelMetadata", Unary(&Stub::ModelMetadata)},
      {"ModelInfer", Unary(&Stub::ModelInfer)},
      {"ModelConfig", Unary(&Stub::ModelConfig)},
      {"ModelStatistics", Unary(&Stub::ModelStatistics)},
      {"RepositoryIndex", Unary(&Stub::RepositoryIndex)},
      {"RepositoryModelLoad", Unary(&Stub::RepositoryModelLoad)},
      {"RepositoryModelUnload", Unary(&Stub::RepositoryModelUnload)},
  };
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  auto stub = GRPCInferenceService::NewStub(channel);
  std::vector<std::string> requests;
  const bool known = unary.contains(method) || method == "ModelStreamInfer";
  for (std::string line; known && std::getline(std::cin, line);) {
    if (!line.empty()) requests.push_back(line);
  }
  if (method == "ModelStreamInfer") return Stream(*stub, requests);
  auto found = unary.find(method);
  if (found == unary.end()) return Generic(channel, method);
  if (requests.size() != 1) {
    std::fprintf(stderr, "grpc_call: %s takes one request line on stdin\n", method.c_str());
    return 2;
  }
  return found->second(*stub, requests[0]);
}
