#pragma once

// KServe v2 gRPC messages <-> the serving core's types (docs/triton-compatibility.md), and the one
// mapping from Status to grpc::Status.
//
// Inputs arrive either as typed `contents` (one repeated field per datatype family) or as
// `raw_input_contents` (little-endian bytes, one entry per input); responses always use
// `raw_output_contents`, as Triton does. Pure functions; safe from any thread.

#include <memory>
#include <string_view>

#include <grpcpp/support/status.h>

#include "api/grpc_service.pb.h"
#include "core/status.h"
#include "serve/model_version.h"
#include "serve/request.h"
#include "serve/server.h"

namespace rampart::api {

// The gRPC status a KServe client sees for `status`: NotFound -> NOT_FOUND, InvalidArgument ->
// INVALID_ARGUMENT, Unavailable -> UNAVAILABLE, Unimplemented -> UNIMPLEMENTED, Internal ->
// INTERNAL, ResourceExhausted and PayloadTooLarge -> RESOURCE_EXHAUSTED, Cancelled -> CANCELLED,
// and each other canonical code to its namesake. The message is kept unchanged (an empty one
// becomes the code's name: no error goes out without a message).
grpc::Status ToGrpcStatus(const Status& status);

// A request's `version` field: empty = the latest loaded version, else a non-negative integer.
// Errors: InvalidArgument.
Result<int64_t> ParseModelVersion(std::string_view version);

// Decodes an infer request (model name and version, id, parameters, inputs, requested outputs).
// Raw input bytes are moved out of `request` rather than copied, so `request` is left with empty
// raw_input_contents entries. Errors: InvalidArgument naming the tensor or parameter (unknown or
// mismatched datatype, both `contents` and raw data, sizes that do not match the shape, FP16/BF16
// in typed contents); Unimplemented for shared memory, sequences and classification.
Result<std::unique_ptr<serve::InferRequest>> DecodeInferRequest(
    inference::ModelInferRequest& request);

// Fills `out` from `response`, moving each output's bytes into raw_output_contents.
void EncodeInferResponse(serve::InferResponse& response, inference::ModelInferResponse& out);

// Model metadata, as HTTP's /v2/models/{m} reports it.
void FillModelMetadata(const serve::ModelMetadata& metadata, inference::ModelMetadataResponse& out);

// One model version's statistics, from the same snapshot HTTP's /stats reads.
void FillModelStatistics(const serve::ModelVersion& model, inference::ModelStatistics& out);

}  // namespace rampart::api
