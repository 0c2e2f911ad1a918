// libFuzzer target: the KServe v2 gRPC infer request decoder (api/kserve_grpc_codec.h): a
// ModelInferRequest parsed from the bytes of a gRPC message, then decoded as ModelInfer and
// ModelStreamInfer calls decode it.
//
// Checks: every decoded input has a known datatype (whether its bytes fit its shape is the
// model's check, run here as the server runs it); an error maps to a gRPC status other than OK.

#include <cstddef>
#include <cstdint>

#include <google/protobuf/stubs/logging.h>

#include "api/kserve_grpc_codec.h"
#include "fuzz_check.h"

// Protobuf logs every invalid UTF-8 string it meets; the fuzzer makes many.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  inference::ModelInferRequest message;
  if (!message.ParseFromArray(data, static_cast<int>(size))) return 0;
  rampart::Result<std::unique_ptr<rampart::serve::InferRequest>> decoded =
      rampart::api::DecodeInferRequest(message);
  if (!decoded.ok()) {
    rampart::fuzz::Check(!rampart::api::ToGrpcStatus(decoded.status()).ok(),
                         "an error became gRPC's OK");
    return 0;
  }
  (void)rampart::fuzz::InputsFitShapes(**decoded);
  return 0;
}
