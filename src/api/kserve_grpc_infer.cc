#include "api/kserve_grpc_infer.h"

#include <optional>
#include <utility>

#include "api/kserve_grpc_audit.h"
#include "api/kserve_grpc_codec.h"
#include "core/clock.h"
#include "core/exceptions.h"
#include "core/trace.h"

namespace rampart::api::grpc_calls {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;
using inference::ModelStreamInferResponse;
using InferResult = Result<std::unique_ptr<serve::InferResponse>>;

Status TooManyBytes(const ByteBudget& budget, size_t bytes) {
  return ResourceExhausted(
      "the server holds too many request bytes in flight (limit {} bytes; this request: {}); "
      "retry later",
      budget.limit(), bytes);
}

// Decodes; an exception (running out of memory) becomes a Status (core/exceptions.h).
Result<std::unique_ptr<serve::InferRequest>> SafeDecode(ModelInferRequest& request) {
  return CatchAsStatus("decoding the infer request", [&] { return DecodeInferRequest(request); });
}

// Fills `out` from a completed request; the status the call ends with.
Status SafeEncode(InferResult& result, ModelInferResponse& out) {
  if (!result.ok()) return result.status();
  return CatchAsStatus("encoding the infer response", [&] {
    EncodeInferResponse(**result, out);
    return Status::Ok();
  });
}

// `respond`, once `audit` recorded the stream request as answered (sync: once the record is
// durable; a refused record answers UNAVAILABLE in the stream instead).
void RespondRecorded(grpc_audit::GrpcRecord audit, grpc::StatusCode code,
                     ModelStreamInferResponse response,
                     UniqueFunction<void(ModelStreamInferResponse)> respond) {
  if (!audit.recording()) {
    respond(std::move(response));
    return;
  }
  const std::string answered = response.SerializeAsString();
  grpc::Status status = code == grpc::StatusCode::OK ? grpc::Status::OK
                                                     : grpc::Status(code, response.error_message());
  audit.Finish(std::move(status), answered,
               [respond = std::move(respond),
                response = std::move(response)](grpc::Status recorded) mutable {
                 if (recorded.error_code() == grpc::StatusCode::UNAVAILABLE &&
                     response.error_message().empty()) {
                   response = StreamError(Unavailable("{}", recorded.error_message()),
                                          response.infer_response().model_name(),
                                          response.infer_response().model_version(),
                                          response.infer_response().id());
                 }
                 respond(std::move(response));
               });
}

}  // namespace

void StartInfer(CallShared& shared, grpc_access::CallView& call, ModelInferRequest& request,
                ModelInferResponse& response, std::shared_ptr<std::atomic<bool>> cancelled,
                UniqueFunction<void(grpc::Status)> answer) {
  const SteadyTime arrival = Clock::Real().Now();
  grpc_audit::GrpcRecord audit(shared.audit, call, "ModelInfer", request.model_name(),
                               request.id());
  if (audit.recording()) audit.SetRequestContent(request.SerializeAsString());
  // Answers a call that never reached the server: recorded, then answered.
  auto refuse = [&](grpc::Status status) {
    audit.Finish(std::move(status), "", std::move(answer));
  };
  const size_t bytes = request.ByteSizeLong();
  if (!shared.budget.TryTake(bytes)) {
    refuse(ToGrpcStatus(TooManyBytes(shared.budget, bytes)));
    return;
  }
  // The bytes go back before the call is answered, so a client that has its answer finds them
  // there.
  UniqueFunction<void(grpc::Status)> answer_charged =
      [&budget = shared.budget, bytes, answer = std::move(answer)](grpc::Status status) mutable {
        budget.Give(bytes);
        answer(std::move(status));
      };
  answer = std::move(answer_charged);
  std::string tenant;
  policy::Reservation reservation;
  if (shared.access != nullptr && shared.access->enforcing()) {
    const Peer peer = call.PeerOf();
    const grpc_access::RpcAction& decided = grpc_access::RpcActionOf("ModelInfer");
    policy::AccessOutcome outcome = grpc_audit::Check(
        *shared.access, grpc_access::CredentialsOf(call, peer), decided.action,
        policy::Resource{.type = decided.resource_type, .name = request.model_name()},
        audit.record());
    if (const auto* refusal = std::get_if<policy::AccessRefusal>(&outcome)) {
      if (refusal->retry_after_seconds > 0) {
        call.AddTrailingMetadata("retry-after", std::to_string(refusal->retry_after_seconds));
      }
      refuse(grpc_access::StatusOf(*refusal, grpc_access::RequestIdOf(call, request.id())));
      return;
    }
    auto& grant = std::get<policy::AccessGrant>(outcome);
    audit.SetFull(grant.HasObligation(policy::kObligationAuditFull));
    tenant = std::move(grant.identity.tenant);
    reservation = std::move(grant.reservation);
  }
  // Raw tensor bytes move out of the request.
  Result<std::unique_ptr<serve::InferRequest>> decoded = SafeDecode(request);
  if (!decoded.ok()) {
    refuse(ToGrpcStatus(decoded.status()));
    return;
  }
  (*decoded)->arrival = arrival;
  (*decoded)->cancelled = std::move(cancelled);
  (*decoded)->tenant = std::move(tenant);
  // Runs once: inline (direct execution, an immediate error) or on an instance thread.
  shared.server.Infer(std::move(decoded).value(),
                      [&response, reservation = std::move(reservation), audit = std::move(audit),
                       answer = std::move(answer)](InferResult result) mutable {
                        // KServe inference counts requests, not tokens: the concurrency slot goes
                        // back now.
                        if (!reservation.empty()) reservation.Settle(0);
                        grpc::Status status = ToGrpcStatus(SafeEncode(result, response));
                        const std::string answered =
                            audit.recording() ? response.SerializeAsString() : "";
                        audit.Finish(std::move(status), answered, std::move(answer));
                      });
}

void StartStreamRequest(CallShared& shared, const StreamCaller& caller, ModelInferRequest& request,
                        std::shared_ptr<std::atomic<bool>> cancelled,
                        UniqueFunction<void(ModelStreamInferResponse)> respond) {
  const SteadyTime arrival = Clock::Real().Now();
  grpc_audit::GrpcRecord audit(shared.audit, caller.peer.address, "ModelStreamInfer",
                               request.model_name(), request.id());
  if (audit.recording()) audit.SetRequestContent(request.SerializeAsString());
  auto error = [&](const Status& status) {
    return StreamError(status, request.model_name(), request.model_version(), request.id());
  };
  const size_t bytes = request.ByteSizeLong();
  if (!shared.budget.TryTake(bytes)) {
    const Status refused = TooManyBytes(shared.budget, bytes);
    RespondRecorded(std::move(audit), ToGrpcStatus(refused).error_code(), error(refused),
                    std::move(respond));
    return;
  }
  // The bytes go back as the request is answered.
  UniqueFunction<void(ModelStreamInferResponse)> respond_charged =
      [&budget = shared.budget, bytes,
       respond = std::move(respond)](ModelStreamInferResponse response) mutable {
        budget.Give(bytes);
        respond(std::move(response));
      };
  respond = std::move(respond_charged);
  policy::Reservation reservation;
  std::string tenant;
  if (shared.access != nullptr && shared.access->enforcing()) {
    const grpc_access::RpcAction& decided = grpc_access::RpcActionOf("ModelStreamInfer");
    std::optional<policy::AccessRefusal> refusal;
    Result<identity::Identity> identity = shared.access->Authenticate(identity::Credentials{
        .authorization = caller.authorization, .api_key = caller.api_key, .peer = &caller.peer});
    if (!identity.ok()) refusal = policy::AccessRefusal::Unauthenticated(identity.status());
    if (!refusal) {
      const policy::Decision decision = shared.access->Authorise(
          *identity, decided.action,
          policy::Resource{.type = decided.resource_type, .name = request.model_name()},
          caller.peer.address);
      audit.Note(*identity, decision);
      if (!decision.allowed) refusal = policy::AccessRefusal::Forbidden(decision);
    }
    if (!refusal) {
      tenant = identity->tenant;
      policy::QuotaLedger::Admission admission = shared.access->Admit(*identity, 0);
      if (!admission.admitted()) refusal = policy::AccessRefusal::Quota(*admission.refusal);
      reservation = std::move(admission.reservation);
    }
    if (refusal) {
      const std::string request_id =
          request.id().empty() ? "req_" + TraceContext::Start().TraceId() : request.id();
      const Status refused(refusal->ToStatus().code(), refusal->AnswerMessage(request_id));
      RespondRecorded(std::move(audit), ToGrpcStatus(refused).error_code(), error(refused),
                      std::move(respond));
      return;
    }
  }
  Result<std::unique_ptr<serve::InferRequest>> decoded = SafeDecode(request);
  if (!decoded.ok()) {
    RespondRecorded(std::move(audit), ToGrpcStatus(decoded.status()).error_code(),
                    error(decoded.status()), std::move(respond));
    return;
  }
  (*decoded)->arrival = arrival;
  (*decoded)->cancelled = std::move(cancelled);
  (*decoded)->tenant = std::move(tenant);
  shared.server.Infer(
      std::move(decoded).value(),
      [model = request.model_name(), version = request.model_version(), id = request.id(),
       reservation = std::move(reservation), audit = std::move(audit),
       respond = std::move(respond)](InferResult result) mutable {
        if (!reservation.empty()) reservation.Settle(0);
        ModelStreamInferResponse response;
        grpc::StatusCode code = grpc::StatusCode::OK;
        // The request is answered whatever building its answer throws: the stream counts on it.
        RunLoggingExceptions("a gRPC stream's answer", [&] {
          if (Status encoded = SafeEncode(result, *response.mutable_infer_response());
              !encoded.ok()) {
            code = ToGrpcStatus(encoded).error_code();
            response = StreamError(encoded, model, version, id);
          }
          // As Triton's stream writer marks each request's last response (for a model that is
          // not decoupled, its only one); a request refused before it reached the server has
          // none.
          (*response.mutable_infer_response()->mutable_parameters())["triton_final_response"]
              .set_bool_param(true);
        });
        RespondRecorded(std::move(audit), code, std::move(response), std::move(respond));
      });
}

ModelStreamInferResponse StreamError(const Status& status, const std::string& model,
                                     const std::string& version, const std::string& id) {
  ModelStreamInferResponse response;
  response.set_error_message(status.message());
  response.mutable_infer_response()->set_model_name(model);
  response.mutable_infer_response()->set_model_version(version);
  response.mutable_infer_response()->set_id(id);
  return response;
}

}  // namespace rampart::api::grpc_calls
