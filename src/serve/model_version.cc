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
  // Inputs are put in the config's order in place: request.inputs[0, placed) are.
  size_t placed = 0;
  std::vector<std::string> missing;
  int64_t batch_size = -1;

  for (const tensor::Tensor& given : request.inputs) {
    const bool known = std::any_of(config_.input().begin(), config_.input().end(),
                                   [&](const auto& input) { return input.name() == given.name; });
    if (!known) {
      return InvalidArgument("unexpected inference input '{}' for model '{}'", given.name, model);
    }
  }
  for (const auto& input : config_.input()) {
    auto it = std::find_if(request.inputs.begin() + static_cast<std::ptrdiff_t>(placed),
                           request.inputs.end(),
                           [&](const tensor::Tensor& t) { return t.name == input.name(); });
    if (it == request.inputs.end()) {
      if (!input.optional()) missing.push_back(input.name());
      continue;
    }
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
      if (it->shape.empty()) {
        return InvalidArgument("input '{}' for model '{}' must have a batch dimension; expected {}",
                               input.name(), model, ExpectedShape(input.dims(), true));
      }
      if (it->shape[0] < 1 || it->shape[0] > config_.max_batch_size()) {
        return InvalidArgument("inference request batch-size must be <= {} for '{}' (got {})",
                               config_.max_batch_size(), model, it->shape[0]);
      }
      if (batch_size >= 0 && it->shape[0] != batch_size) {
        return InvalidArgument(
            "input '{}' has batch size {} but other inputs of the request have {}", input.name(),
            it->shape[0], batch_size);
      }
      batch_size = it->shape[0];
    }
    if (!model::ShapeMatchesDims(input.dims(), it->shape, batched ? 1 : 0)) {
      return InvalidArgument("unexpected shape for input '{}' for model '{}'. Expected {}, got {}",
                             input.name(), model, ExpectedShape(input.dims(), batched),
                             tensor::ShapeToString(it->shape));
    }
    RETURN_IF_ERROR(tensor::ValidateByteSize(it->datatype, it->shape, it->data,
                                             "input '{}' for model '{}'", input.name(), model));
    tensor::Tensor& tensor = request.inputs[placed++];
    if (&tensor != &*it) std::swap(tensor, *it);
    if (input.has_reshape()) tensor.shape = model::ReshapedShape(input, tensor.shape, batched);
  }
  if (!missing.empty()) {
    return InvalidArgument(
        "expected {} inputs but got {} inputs for model '{}'; missing required input(s) {}",
        config_.input_size(), request.inputs.size(), model, fmt::join(missing, ", "));
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

void ModelVersion::Enqueue(std::unique_ptr<InferRequest> request, InferCallback done) {
  int64_t batch_items = 1;
  if (config_.max_batch_size() > 0 && !request->inputs.empty() &&
      !request->inputs[0].shape.empty()) {
    batch_items = request->inputs[0].shape[0];
  }
  scheduler_->Enqueue(std::move(request), batch_items, std::move(done));
}

}  // namespace rampart::serve
