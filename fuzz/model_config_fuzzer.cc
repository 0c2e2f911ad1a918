// libFuzzer target: loading a model's config.pbtxt (model/config.h) as a model load does before
// it needs a backend: the text parse, completion and validation, version selection, and the
// batching policy serve reads at load. (An ensemble's step graph, which serve checks next, is
// not covered: its check lives with the ensemble runtime and the whole server.)
//
// Checks on a config that validates: its JSON form (GET /v2/models/{m}/config) parses back when
// its text is UTF-8 without escapes (a config's strings may hold other bytes, which nothing checks
// and protobuf's JSON printer drops); a request shape matching an input's dims maps onto its
// reshape with the same element count, and an output's produced shape matching its reshape maps
// back, as validation promises.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <google/protobuf/stubs/logging.h>
#include <simdjson.h>

#include "fuzz_check.h"
#include "model/config.h"
#include "model/repository.h"
#include "serve/batch_queue.h"

namespace {

using rampart::fuzz::Check;
namespace model = rampart::model;

// A shape matching `dims` (variable dims of size 2), after a batch of 3 when `batched`.
template <typename Dims>
rampart::tensor::Shape ShapeFor(const Dims& dims, bool batched) {
  rampart::tensor::Shape shape;
  if (batched) shape.push_back(3);
  for (int64_t dim : dims) shape.push_back(dim == -1 ? 2 : dim);
  return shape;
}

void CheckShapes(const model::ModelConfig& config) {
  const bool batched = config.max_batch_size() > 0;
  for (const auto& input : config.input()) {
    if (!input.has_reshape()) continue;
    const rampart::tensor::Shape sent = ShapeFor(input.dims(), batched);
    const rampart::tensor::Shape reshaped = model::ReshapedShape(input, sent, batched);
    Check(rampart::tensor::ElementCount(sent) == rampart::tensor::ElementCount(reshaped),
          "an input's reshape changes its element count");
  }
  for (const auto& output : config.output()) {
    if (!output.has_reshape()) continue;
    const rampart::tensor::Shape produced = ShapeFor(output.reshape().shape(), batched);
    rampart::Result<rampart::tensor::Shape> answered =
        model::AnsweredShape(output, produced, batched);
    Check(answered.ok(), "a produced shape matching the reshape was refused");
    Check(rampart::tensor::ElementCount(produced) == rampart::tensor::ElementCount(*answered),
          "an output's reshape changes its element count");
  }
}

}  // namespace

// Protobuf logs every invalid UTF-8 string it meets; the fuzzer makes many.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr std::string_view kFile = "fuzz/config.pbtxt";
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  rampart::Result<model::ParsedConfig> parsed = model::ParseConfigText(text, kFile);
  if (!parsed.ok()) return 0;
  model::ModelConfig& config = parsed->config;
  // The folder a load reads it from: the config's own name where it has one, so validation goes
  // on past the name check.
  const std::string folder = config.name().empty() ? "model" : config.name();
  if (!model::CompleteAndValidate(config, folder, kFile).ok()) return 0;
  (void)model::SelectVersions(config.version_policy(), {1, 2, 3});
  (void)model::BackendInputs(config);
  const std::string json = model::ConfigToJson(config);
  if (text.find('\\') == std::string_view::npos && simdjson::validate_utf8(text.data(), size)) {
    Check(model::ParseConfigJson(json, "fuzz").ok(),
          "a validated config's JSON does not parse back");
  }
  if (config.platform() != model::kEnsemblePlatform &&
      !rampart::serve::BatchPolicy::FromConfig(config).ok()) {
    return 0;
  }
  CheckShapes(config);
  return 0;
}
