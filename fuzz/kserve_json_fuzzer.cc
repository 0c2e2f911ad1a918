// libFuzzer target: the KServe v2 HTTP infer request decoder (api/kserve_codec.h) on a JSON body
// sent without Inference-Header-Content-Length, as POST /v2/models/{m}/infer hands it over.
//
// Beyond "no crash": a decoded request's every input holds exactly the bytes its shape needs,
// which the scheduler and backends rely on; and encoding the inputs back as a response's outputs
// (an identity model's answer) succeeds for every type JSON can carry.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include "api/kserve_codec.h"
#include "kserve_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  rampart::Result<rampart::api::DecodedInfer> decoded =
      rampart::api::DecodeInferRequest(body, std::nullopt);
  if (!decoded.ok()) return 0;
  rampart::fuzz::CheckDecodedInputs(*decoded->request);
  rampart::fuzz::EncodeAsResponse(std::move(decoded->request->inputs));
  return 0;
}
