#include "serve/model_version.h"

#include <algorithm>

#include "core/logging.h"
#include "serve/ensemble.h"
#include "serve/warmup.h"

namespace rampart::serve {
namespace {

std::string ExpectedShape(const google::protobuf::RepeatedField<int64_t>& dims, bool batched) {
  tensor::Shape shape;
  if (batched) shape.push_back(-1);
  shape.insert(shape.end(), dims.begin(), dims.end());
  return tensor::ShapeToString(shape);
}

// The instance threads' nice offset for the config's optimization.priority. Triton defines the
// field ("a model will be given scheduling and execution preference over models with lower
// priority") and applies it to CUDA streams; on CPU the lever is the threads' nice value. Ten
// steps make a nice-0 thread weigh about a tenth of an instance thread in the kernel's fair
// scheduler, so a batch that its requests all wait on is rarely preempted midway.
int InstanceNiceOffset(const model::ModelConfig& config) {
  constexpr int kSteps = 10;
  switch (config.optimization().priority()) {
    case inference::ModelOptimizationPolicy::PRIORITY_MAX: return -kSteps;
    case inference::ModelOptimizationPolicy::PRIORITY_MIN: return kSteps;
    default: return 0;
  }
}

}  // namespace

ModelVersion::ModelVersion(model::ModelConfig config, int64_t version,
                           std::unique_ptr<VersionObserver> observer)
    : config_(std::move(config)), version_(version), statistics_(std::move(observer)) {}

Result<std::shared_ptr<ModelVersion>> ModelVersion::Load(const model::ModelSource& source,
                                                         int64_t version,
                                                         const backend::BackendRegistry& backends,
                                                         const LoadOptions& options) {
  ServerObserver* observer = options.observer;
  if (source.config.platform() == model::kEnsemblePlatform) {
    RETURN_IF_ERROR(ValidateEnsemble(source.config));
    return std::shared_ptr<ModelVersion>(new ModelVersion(
        source.config, version, observer ? observer->ForVersion(source.config, version) : nullptr));
  }
  backend::Backend* backend = backends.Find(source.config.backend());
  if (backend == nullptr) {
    return InvalidArgument("model '{}': unknown backend '{}' (this build has: {})", source.name,
                           source.config.backend(), fmt::join(backends.Names(), ", "));
  }
  const SteadyTime started = Clock::Real().Now();
  std::shared_ptr<ModelVersion> loaded(new ModelVersion(
      source.config, version, observer ? observer->ForVersion(source.config, version) : nullptr));
  ASSIGN_OR_RETURN(BatchPolicy policy,
                   BatchPolicy::FromConfig(loaded->config_, options.default_max_queue_size));
  backend::InstanceSpec spec;
  spec.config = &loaded->config_;
  spec.version_directory = source.directory / std::to_string(version);
  spec.version = version;
  spec.default_threads = options.default_threads;
  std::vector<std::unique_ptr<backend::ModelInstance>> instances;
  for (int group = 0; group < loaded->config_.instance_group_size(); ++group) {
    for (int i = 0; i < loaded->config_.instance_group(group).count(); ++i) {
      spec.group_index = group;
      spec.instance_index = i;
      ASSIGN_OR_RETURN(std::unique_ptr<backend::ModelInstance> instance,
                       backend->CreateInstance(spec));
      // Each instance has its own runtime state to warm, so each runs the samples.
      RETURN_IF_ERROR(WarmUp(*instance, loaded->config_, policy.assembly, spec.version_directory)
                          .WithContext(fmt::format("model '{}' version {}", source.name, version)));
      instances.push_back(std::move(instance));
    }
  }
  loaded->scheduler_ = std::make_unique<Scheduler>(
      loaded->config_.name(), version, std::move(policy), std::move(instances), loaded->statistics_,
      Clock::Real(), options.direct_execution_limit,
      InstanceThreadOptions{.cpus = options.cpus,
                            .nice_offset = InstanceNiceOffset(loaded->config_)});
  if (VersionObserver* watching = loaded->statistics_.observer()) {
    watching->OnLoaded(static_cast<double>(NanosBetween(started, Clock::Real().Now())) / 1e9);
  }
  return loaded;
}

ModelVersion::~ModelVersion() { Stop(); }

void ModelVersion::Stop() {
  if (scheduler_) scheduler_->Stop();
}

Status ModelVersion::Validate(InferRequest& request) const {
  const std::string& model = config_.name();
  const bool batched = config_.max_batch_size() > 0;

  for (const tensor::Tensor& given : request.inputs) {
    const bool known = std::any_of(config_.input().begin(), config_.input().end(),
                                   [&](const auto& input) { return input.name() == given.name; });
    if (!known) {
      return InvalidArgument("unexpected inference input '{}' for model '{}'", given.name, model);
    }
  }
  RETURN_IF_ERROR(CheckInputCount(request.inputs));
  // Inputs are put in the config's order in place: request.inputs[0, placed) are.
  size_t placed = 0;
  int64_t batch_size = -1;
  for (const auto& input : config_.input()) {
    auto it = std::find_if(request.inputs.begin() + static_cast<std::ptrdiff_t>(placed),
                           request.inputs.end(),
                           [&](const tensor::Tensor& t) { return t.name == input.name(); });
    if (it == request.inputs.end()) continue;  // optional (CheckInputCount)
    if (std::count_if(request.inputs.begin(), request.inputs.end(),
                      [&](const tensor::Tensor& t) { return t.name == input.name(); }) > 1) {
      return InvalidArgument("input '{}' appears more than once in the request for model '{}'",
                             input.name(), model);
    }
    const tensor::DataType expected = model::ToTensorType(input.data_type());
    if (it->datatype != expected) {
      return InvalidArgument("inference input '{}' data-type is '{}', but model '{}' expects '{}'",
                             input.name(), tensor::DataTypeName(it->datatype), model,
                             tensor::DataTypeName(expected));
    }
    if (batched) {
      // Triton's words (InferenceRequest::Normalize).
      if (it->shape.empty()) {
        return InvalidArgument(
            "input '{}' has no shape but model requires batch dimension for '{}'", input.name(),
            model);
      }
      if (batch_size >= 0 && it->shape[0] != batch_size) {
        return InvalidArgument("input '{}' batch size does not match other inputs for '{}'",
                               input.name(), model);
      }
      batch_size = it->shape[0];
      if (batch_size > config_.max_batch_size()) {
        return InvalidArgument("inference request batch-size must be <= {} for '{}'",
                               config_.max_batch_size(), model);
      }
    }
    if (!model::ShapeMatchesDims(input.dims(), it->shape, batched ? 1 : 0)) {
      return InvalidArgument("unexpected shape for input '{}' for model '{}'. Expected {}, got {}",
                             input.name(), model, ExpectedShape(input.dims(), batched),
                             tensor::ShapeToString(it->shape));
    }
    RETURN_IF_ERROR(CheckInputData(*it, batched));
    tensor::Tensor& tensor = request.inputs[placed++];
    if (&tensor != &*it) std::swap(tensor, *it);
    if (input.has_reshape()) tensor.shape = model::ReshapedShape(input, tensor.shape, batched);
  }
  for (const std::string& name : request.requested_outputs) {
    const bool known = std::any_of(config_.output().begin(), config_.output().end(),
                                   [&](const auto& output) { return output.name() == name; });
    if (!known) {
      return InvalidArgument("unexpected inference output '{}' for model '{}'", name, model);
    }
  }
  return Status::Ok();
}

Status ModelVersion::CheckInputCount(const std::vector<tensor::Tensor>& inputs) const {
  std::vector<std::string> missing;
  int64_t required = 0;
  for (const auto& input : config_.input()) {
    if (input.optional()) continue;
    ++required;
    if (std::none_of(inputs.begin(), inputs.end(),
                     [&](const tensor::Tensor& t) { return t.name == input.name(); })) {
      missing.push_back(fmt::format("'{}'", input.name()));
    }
  }
  if (missing.empty()) return Status::Ok();
  // Triton's words, which clients and people match on (InferenceRequest::ValidateRequestInputs).
  std::vector<std::string> given;
  for (const tensor::Tensor& t : inputs) given.push_back(fmt::format("'{}'", t.name));
  const std::string expected = required == config_.input_size()
                                   ? fmt::format("expected {} inputs", config_.input_size())
                                   : fmt::format("expected number of inputs between {} and {}",
                                                 required, config_.input_size());
  return InvalidArgument(
      "{} but got {} inputs for model '{}'. Got input(s) [{}], but missing required input(s) "
      "[{}]. Please provide all required input(s).",
      expected, inputs.size(), config_.name(), fmt::join(given, ","), fmt::join(missing, ","));
}

Status ModelVersion::CheckInputData(const tensor::Tensor& input, bool batched) const {
  const std::string& model = config_.name();
  // Triton sizes a batch of 0 without its batch dimension (its batch size 0 means "no batch"),
  // so such a request fails here with its byte-size words.
  const bool empty_batch = batched && input.shape[0] == 0;
  const tensor::Shape shape =
      empty_batch ? tensor::Shape(input.shape.begin() + 1, input.shape.end()) : input.shape;
  const std::optional<int64_t> count = tensor::ElementCount(shape);
  if (!count) {
    return InvalidArgument("input '{}' for model '{}' has invalid shape {}", input.name, model,
                           tensor::ShapeToString(input.shape));
  }
  if (input.datatype == tensor::DataType::kBytes) {
    Result<std::vector<std::string_view>> elements = tensor::SplitBytesElements(input.data);
    if (!elements.ok()) {
      return elements.status().WithContext(
          fmt::format("input '{}' for model '{}'", input.name, model));
    }
    if (static_cast<int64_t>(elements->size()) != *count) {
      return InvalidArgument(
          "expected {} string elements for inference input '{}' for model '{}', got {}", *count,
          input.name, model, elements->size());
    }
  } else {
    const std::optional<uint64_t> bytes =
        tensor::ByteSize(*count, tensor::DataTypeSize(input.datatype));
    if (!bytes || input.data.size() != *bytes) {
      return InvalidArgument(
          "input byte size mismatch for input '{}' for model '{}'. Expected {}, got {}", input.name,
          model, bytes ? fmt::to_string(*bytes) : "more than 2^64", input.data.size());
    }
  }
  if (empty_batch) {
    // Triton would run it; a batch of nothing has nothing to run here.
    return InvalidArgument("inference request batch-size must be >= 1 for '{}'", model);
  }
  return Status::Ok();
}

void ModelVersion::Enqueue(std::unique_ptr<InferRequest> request, InferCallback done) {
  int64_t batch_items = 1;
  if (config_.max_batch_size() > 0 && !request->inputs.empty() &&
      !request->inputs[0].shape.empty()) {
    batch_items = request->inputs[0].shape[0];
  }
  scheduler_->Enqueue(std::move(request), batch_items, std::move(done));
}

}  // namespace rampart::serve
