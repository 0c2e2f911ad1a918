#include "api/kserve_grpc_methods.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/kserve_grpc_codec.h"
#include "core/exceptions.h"

namespace rampart::api::grpc_methods {
namespace {

// Runs `body` (returning a grpc::Status); exceptions become INTERNAL here, so none reaches the
// transport.
template <typename Body>
grpc::Status Answer(Body&& body) {
  try {
    return body();
  } catch (const std::exception& error) {
    return grpc::Status(grpc::StatusCode::INTERNAL, error.what());
  } catch (...) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "unexpected exception");
  }
}

// Records the call as answered `status` (with `response`), then calls `done`: at once, or once
// the record is durable (sync sink).
void FinishRecorded(grpc_audit::GrpcRecord& audit, grpc::Status status,
                    const google::protobuf::Message* response, Done done) {
  if (!audit.recording()) {
    done(std::move(status));
    return;
  }
  const std::string answered = response != nullptr ? response->SerializeAsString() : "";
  audit.Finish(std::move(status), answered, std::move(done));
}

// As Answer, recording the call (with `response`, the message `body` fills) before it is done.
template <typename Body>
void AnswerRecorded(grpc_audit::GrpcRecord& audit, const google::protobuf::Message& response,
                    Done done, Body&& body) {
  grpc::Status status = Answer(std::forward<Body>(body));
  FinishRecorded(audit, std::move(status), &response, std::move(done));
}

// Triton's repository load/unload parameters: `config` (load only: the model's config as JSON,
// replacing config.pbtxt) and `unload_dependents` (unloading an ensemble also unloads the step
// models its load brought in).
struct Control {
  std::optional<std::string> config;
  bool unload_dependents = false;
};

template <typename Request>
Result<Control> ControlParameters(const Request& request, bool load) {
  if (!request.repository_name().empty()) {
    return Unimplemented("'repository_name' specification is not supported");
  }
  Control control;
  for (const auto& [key, value] : request.parameters()) {
    if (key == "config" && load) {
      if (value.parameter_choice_case() != inference::ModelRepositoryParameter::kStringParam) {
        return InvalidArgument("parameter 'config' must be a string_param holding JSON");
      }
      control.config = value.string_param();
    } else if (key.starts_with("file:")) {
      return Unimplemented("parameter '{}': loading model files from the request is not supported",
                           key);
    } else if (key == "unload_dependents") {
      if (value.parameter_choice_case() != inference::ModelRepositoryParameter::kBoolParam) {
        return InvalidArgument("parameter 'unload_dependents' must be a bool_param");
      }
      control.unload_dependents = value.bool_param();
    } else {
      return InvalidArgument("unknown parameter '{}'", key);
    }
  }
  return control;
}

// Runs `work` (returning a Status; it may fill the call's response) on `worker` and calls
// `done` with its result once it ran. A full queue answers RESOURCE_EXHAUSTED at once, a
// stopping worker UNAVAILABLE; an exception from `work` becomes its Status. The call is recorded
// by `audit` as it finishes.
template <typename Work>
void OnWorker(SerialWorker& worker, grpc_audit::GrpcRecord audit, std::string_view what, Work work,
              Done done) {
  // Shared, so that a refused Post still has them to record the refusal.
  auto held = std::make_shared<grpc_audit::GrpcRecord>(std::move(audit));
  auto done_held = std::make_shared<Done>(std::move(done));
  const Status queued = CatchAsStatus("queuing a repository call", [&] {
    return worker.Post([held, done_held, what, work = std::move(work)]() mutable {
      held->Finish(ToGrpcStatus(CatchAsStatus(what, [&] { return work(); })), "",
                   std::move(*done_held));
    });
  });
  if (queued.code() == StatusCode::kResourceExhausted) {
    held->Finish(
        ToGrpcStatus(ResourceExhausted("too many repository requests are waiting ({}); retry later",
                                       queued.message())),
        "", std::move(*done_held));
  } else if (!queued.ok()) {
    held->Finish(ToGrpcStatus(queued), "", std::move(*done_held));
  }
}

}  // namespace

void KServeMethods::ServerLive(inference::ServerLiveResponse& response, Done done) {
  done(Answer([&] {
    response.set_live(server_.IsLive());
    return grpc::Status::OK;
  }));
}

void KServeMethods::ServerReady(inference::ServerReadyResponse& response, Done done) {
  done(Answer([&] {
    response.set_ready(server_.IsReady());
    return grpc::Status::OK;
  }));
}

void KServeMethods::ModelReady(grpc_access::CallView& call,
                               const inference::ModelReadyRequest& request,
                               inference::ModelReadyResponse& response, Done done) {
  grpc_audit::GrpcRecord audit(options_.audit, call, "ModelReady", request.name(), "");
  if (auto refused = Refused(call, audit, "ModelReady", request.name())) {
    FinishRecorded(audit, *refused, nullptr, std::move(done));
    return;
  }
  AnswerRecorded(audit, response, std::move(done), [&] {
    Result<int64_t> version = ParseModelVersion(request.version());
    if (!version.ok()) return ToGrpcStatus(version.status());
    // As Triton: an unknown model is NOT_FOUND, not merely "not ready".
    const Status ready = server_.ModelReady(request.name(), *version);
    response.set_ready(ready.ok());
    return ToGrpcStatus(ready);
  });
}

void KServeMethods::ServerMetadata(grpc_access::CallView& call,
                                   inference::ServerMetadataResponse& response, Done done) {
  grpc_audit::GrpcRecord audit(options_.audit, call, "ServerMetadata", "*", "");
  if (auto refused = Refused(call, audit, "ServerMetadata")) {
    FinishRecorded(audit, *refused, nullptr, std::move(done));
    return;
  }
  AnswerRecorded(audit, response, std::move(done), [&] {
    response.set_name(options_.server_name);
    response.set_version(options_.server_version);
    // binary_tensor_data and logging are HTTP-only extensions.
    for (const char* extension : {"model_configuration", "statistics", "model_repository"}) {
      response.add_extensions(extension);
    }
    return grpc::Status::OK;
  });
}

void KServeMethods::ModelMetadata(grpc_access::CallView& call,
                                  const inference::ModelMetadataRequest& request,
                                  inference::ModelMetadataResponse& response, Done done) {
  grpc_audit::GrpcRecord audit(options_.audit, call, "ModelMetadata", request.name(), "");
  if (auto refused = Refused(call, audit, "ModelMetadata", request.name())) {
    FinishRecorded(audit, *refused, nullptr, std::move(done));
    return;
  }
  AnswerRecorded(audit, response, std::move(done), [&] {
    Result<int64_t> version = ParseModelVersion(request.version());
    if (!version.ok()) return ToGrpcStatus(version.status());
    Result<serve::ModelMetadata> metadata = server_.Metadata(request.name(), *version);
    if (!metadata.ok()) return ToGrpcStatus(metadata.status());
    FillModelMetadata(*metadata, response);
    return grpc::Status::OK;
  });
}

void KServeMethods::ModelConfig(grpc_access::CallView& call,
                                const inference::ModelConfigRequest& request,
                                inference::ModelConfigResponse& response, Done done) {
  grpc_audit::GrpcRecord audit(options_.audit, call, "ModelConfig", request.name(), "");
  if (auto refused = Refused(call, audit, "ModelConfig", request.name())) {
    FinishRecorded(audit, *refused, nullptr, std::move(done));
    return;
  }
  AnswerRecorded(audit, response, std::move(done), [&] {
    Result<int64_t> version = ParseModelVersion(request.version());
    if (!version.ok()) return ToGrpcStatus(version.status());
    auto model = server_.GetModel(request.name(), *version);
    if (!model.ok()) return ToGrpcStatus(model.status());
    *response.mutable_config() = (*model)->config();
    return grpc::Status::OK;
  });
}

void KServeMethods::ModelStatistics(grpc_access::CallView& call,
                                    const inference::ModelStatisticsRequest& request,
                                    inference::ModelStatisticsResponse& response, Done done) {
  // Every model's statistics (no name) is the resource "*".
  const std::string_view resource = request.name().empty() ? "*" : request.name();
  grpc_audit::GrpcRecord audit(options_.audit, call, "ModelStatistics", resource, "");
  if (auto refused = Refused(call, audit, "ModelStatistics", resource)) {
    FinishRecorded(audit, *refused, nullptr, std::move(done));
    return;
  }
  AnswerRecorded(audit, response, std::move(done), [&] {
    Result<int64_t> version = request.version().empty() ? Result<int64_t>(serve::kLatestVersion)
                                                        : ParseModelVersion(request.version());
    if (!version.ok()) return ToGrpcStatus(version.status());
    Result<std::vector<std::shared_ptr<serve::ModelVersion>>> models =
        server_.StatisticsTargets(request.name(), *version);
    if (!models.ok()) return ToGrpcStatus(models.status());
    for (const auto& model : *models) FillModelStatistics(*model, *response.add_model_stats());
    return grpc::Status::OK;
  });
}

// Reads the repository's directory: on the repository thread.
void KServeMethods::RepositoryIndex(grpc_access::CallView& call,
                                    const inference::RepositoryIndexRequest& request,
                                    inference::RepositoryIndexResponse& response, Done done) {
  grpc_audit::GrpcRecord audit(options_.audit, call, "RepositoryIndex", "*", "");
  if (auto refused = Refused(call, audit, "RepositoryIndex")) {
    FinishRecorded(audit, *refused, nullptr, std::move(done));
    return;
  }
  OnWorker(
      repository_reads_, std::move(audit), "reading the repository index",
      [this, &request, &response] {
        if (!request.repository_name().empty()) {
          return Unimplemented("'repository_name' specification is not supported");
        }
        for (const serve::ModelIndexEntry& entry : server_.RepositoryIndex()) {
          if (request.ready() && entry.state != "READY") continue;
          auto& model = *response.add_models();
          model.set_name(entry.name);
          model.set_version(entry.version);
          model.set_state(entry.state);
          model.set_reason(entry.reason);
        }
        return Status::Ok();
      },
      std::move(done));
}

void KServeMethods::RepositoryModelLoad(grpc_access::CallView& call,
                                        const inference::RepositoryModelLoadRequest& request,
                                        Done done) {
  RepositoryControl(call, request, /*load=*/true, std::move(done));
}

void KServeMethods::RepositoryModelUnload(grpc_access::CallView& call,
                                          const inference::RepositoryModelUnloadRequest& request,
                                          Done done) {
  RepositoryControl(call, request, /*load=*/false, std::move(done));
}

std::optional<grpc::Status> KServeMethods::Refused(grpc_access::CallView& call,
                                                   grpc_audit::GrpcRecord& audit,
                                                   std::string_view method, std::string_view name) {
  const policy::AccessControl* access = options_.access;
  if (access == nullptr || !access->enforcing()) return std::nullopt;
  const grpc_access::RpcAction& decided = grpc_access::RpcActionOf(method);
  const Peer peer = call.PeerOf();
  policy::AccessOutcome outcome = grpc_audit::Check(
      *access, grpc_access::CredentialsOf(call, peer), decided.action,
      policy::Resource{.type = decided.resource_type, .name = name}, audit.record());
  const auto* refusal = std::get_if<policy::AccessRefusal>(&outcome);
  if (refusal == nullptr) {
    audit.SetFull(
        std::get<policy::AccessGrant>(outcome).HasObligation(policy::kObligationAuditFull));
    return std::nullopt;
  }
  if (refusal->retry_after_seconds > 0) {
    call.AddTrailingMetadata("retry-after", std::to_string(refusal->retry_after_seconds));
  }
  return grpc_access::StatusOf(*refusal, grpc_access::RequestIdOf(call));
}

// Loading reads files and builds models: it runs on the control thread, one at a time, and
// finishes the call from there (as HTTP does).
template <typename Request>
void KServeMethods::RepositoryControl(grpc_access::CallView& call, const Request& request,
                                      bool load, Done done) {
  const std::string_view method = load ? "RepositoryModelLoad" : "RepositoryModelUnload";
  grpc_audit::GrpcRecord audit(options_.audit, call, method, request.model_name(), "");
  if (audit.recording()) audit.SetRequestContent(request.SerializeAsString());
  if (auto refused = Refused(call, audit, method, request.model_name())) {
    FinishRecorded(audit, *refused, nullptr, std::move(done));
    return;
  }
  Result<Control> control = ControlParameters(request, load);
  if (!control.ok()) {
    FinishRecorded(audit, ToGrpcStatus(control.status()), nullptr, std::move(done));
    return;
  }
  OnWorker(
      control_, std::move(audit), load ? "loading a model" : "unloading a model",
      [this, load, model = request.model_name(), control = std::move(control).value()]() mutable {
        return load ? server_.LoadModel(model, std::move(control.config))
                    : server_.UnloadModel(model, control.unload_dependents);
      },
      std::move(done));
}

}  // namespace rampart::api::grpc_methods
