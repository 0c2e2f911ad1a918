#include "backend/torch/torch_backend.h"

#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/script.h>

#include <dlfcn.h>

#include <openssl/crypto.h>

#include <charconv>
#include <mutex>
#include <optional>
#include <sstream>

#include <fmt/ranges.h>

#include "core/clock.h"
#include "core/logging.h"

namespace rampart::backend {
namespace {

using tensor::DataType;

std::optional<c10::ScalarType> ToScalarType(DataType type) {
  switch (type) {
    case DataType::kBool: return c10::ScalarType::Bool;
    case DataType::kUint8: return c10::ScalarType::Byte;
    case DataType::kInt8: return c10::ScalarType::Char;
    case DataType::kInt16: return c10::ScalarType::Short;
    case DataType::kInt32: return c10::ScalarType::Int;
    case DataType::kInt64: return c10::ScalarType::Long;
    case DataType::kFp16: return c10::ScalarType::Half;
    case DataType::kBf16: return c10::ScalarType::BFloat16;
    case DataType::kFp32: return c10::ScalarType::Float;
    case DataType::kFp64: return c10::ScalarType::Double;
    default: return std::nullopt;  // UINT16/32/64 have no LibTorch type; BYTES is List[str]
  }
}

// "<prefix>__<i>" -> i, with Triton's reading: the first "__", then only digits.
std::optional<size_t> ConventionIndex(std::string_view name) {
  const size_t at = name.find("__");
  if (at == std::string_view::npos || at + 2 >= name.size()) return std::nullopt;
  size_t index = 0;
  const char* begin = name.data() + at + 2;
  const char* end = name.data() + name.size();
  auto [ptr, error] = std::from_chars(begin, end, index);
  if (error != std::errc() || ptr != end) return std::nullopt;
  return index;
}

// BYTES travels to and from the model as one List[str]: one dimension, the batch's included. As
// Triton's PyTorch backend, refuses BYTES inputs and outputs whose dims (a reshape's, when there
// is one) and the batch dimension make more; `dims: [1] reshape { shape: [] }` batches strings.
Status CheckBytesRanks(const model::ModelConfig& config, std::string_view where) {
  const int batch_dims = config.max_batch_size() > 0 ? 1 : 0;
  const auto check = [&](const auto& tensor, std::string_view kind) -> Status {
    if (tensor.data_type() != inference::TYPE_STRING) return Status::Ok();
    const auto& dims = tensor.has_reshape() ? tensor.reshape().shape() : tensor.dims();
    if (dims.size() + batch_dims <= 1) return Status::Ok();
    return InvalidArgument(
        "{}: {} '{}' is BYTES, one List[str] of one dimension for the model, but its {} [{}]{} "
        "make {} (as Triton's PyTorch backend, Rampart refuses this; dims: [1] reshape {{ "
        "shape: [] }} batches strings)",
        where, kind, tensor.name(), tensor.has_reshape() ? "reshape" : "dims",
        fmt::join(dims, ", "), batch_dims > 0 ? " and the batch dimension" : "",
        static_cast<int>(dims.size()) + batch_dims);
  };
  for (const auto& input : config.input()) RETURN_IF_ERROR(check(input, "input"));
  for (const auto& output : config.output()) RETURN_IF_ERROR(check(output, "output"));
  return Status::Ok();
}

Status FromTorchError(std::string_view what, const std::exception& error) {
  if (const auto* torch_error = dynamic_cast<const c10::Error*>(&error)) {
    return Internal("{}: {}", what, torch_error->what_without_backtrace());
  }
  return Internal("{}: {}", what, error.what());
}

std::mutex blas_mutex;
int blas_pool_size = 0;  // guarded by blas_mutex; 0 until the first instance sets it

// Debian's LibTorch multiplies matrices in OpenBLAS, whose worker pool is process-wide and
// ignores at::set_num_threads: left alone it runs every product on all cores, whatever an
// instance's intra-op budget says, and its idle workers yield-spin against the I/O threads.
// Each instance raises the pool to its own budget, so the pool has the largest budget among
// the loaded instances (never more). No-op when LibTorch's BLAS is not OpenBLAS. Returns the
// pool's size afterwards, or 0 without OpenBLAS.
int RaiseBlasThreads(int threads) {
  using SetThreads = void (*)(int);
  static const auto set =
      reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (set == nullptr) return 0;
  std::lock_guard lock(blas_mutex);
  if (threads > blas_pool_size) {
    set(threads);
    blas_pool_size = threads;
  }
  return blas_pool_size;
}

// The OpenBLAS pool's size now (0 without OpenBLAS).
int BlasThreads() {
  std::lock_guard lock(blas_mutex);
  return blas_pool_size;
}

struct InputBinding {
  size_t argument;  // forward() position, not counting self
  DataType datatype;
  std::optional<c10::ScalarType> scalar_type;
};

struct OutputBinding {
  size_t element;  // position in the returned tuple/list
  DataType datatype;
  std::string name;
};

// How many values forward() returns, where its schema fixes that: a Tuple's arity, one for a
// Tensor (and for a List[str] feeding one BYTES output). Unknown (nullopt) for a List[Tensor],
// whose length only a run shows, and anything else.
std::optional<size_t> FixedReturnCount(const c10::TypePtr& type, size_t outputs) {
  if (const auto* tuple = type->castRaw<c10::TupleType>()) return tuple->elements().size();
  if (type->kind() == c10::TypeKind::TensorType) return 1;
  if (const auto* list = type->castRaw<c10::ListType>()) {
    if (list->getElementType()->kind() == c10::TypeKind::StringType && outputs == 1) return 1;
  }
  return std::nullopt;
}

// "OUTPUT0, OUTPUT1" for the messages that name the config's outputs.
std::string OutputNames(const std::vector<OutputBinding>& outputs) {
  std::vector<std::string_view> names;
  for (const OutputBinding& output : outputs) names.push_back(output.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

// What to change when the config wants more values than forward() returns.
constexpr std::string_view kOutputsHint =
    "list in config.pbtxt's `output` only the values forward() returns, in the order it returns "
    "them (or name each OUTPUT__<position>)";

class TorchInstance final : public ModelInstance {
 public:
  TorchInstance(torch::jit::Module module, torch::Device device, int threads, size_t arguments,
                std::vector<InputBinding> inputs, std::vector<OutputBinding> outputs,
                std::string model_name, std::string return_type)
      : module_(std::move(module)),
        forward_(module_.get_method("forward")),
        self_(module_._ivalue()),
        device_(device),
        threads_(threads),
        argument_count_(arguments),
        inputs_(std::move(inputs)),
        outputs_(std::move(outputs)),
        model_name_(std::move(model_name)),
        return_type_(std::move(return_type)) {}

  void PrepareThread() override {
    // LibTorch's OpenMP pool takes its width from the calling thread, so each instance thread
    // gets its own budget. Called before every execution; it only changes the setting when the
    // thread last ran an instance with another budget (direct execution, an ensemble's step).
    thread_local int applied = 0;
    if (applied != threads_) {
      // LibTorch also keeps the last value set on any thread, and re-applies it on a thread's
      // first parallel op: done here first, so that it cannot undo this thread's budget later.
      at::internal::lazy_init_num_threads();
      at::set_num_threads(threads_);
      applied = threads_;
    }
  }

  // A matrix product runs on the OpenBLAS pool, as wide as the widest loaded instance.
  int ComputeThreads() const override { return std::max(threads_, BlasThreads()); }

  Result<ExecutionResult> Execute(std::vector<tensor::Tensor>& inputs) override {
    try {
      return Run(inputs);
    } catch (const std::exception& error) {
      return FromTorchError(fmt::format("model '{}'", model_name_), error);
    }
  }

 private:
  Result<ExecutionResult> Run(std::vector<tensor::Tensor>& inputs) {
    c10::InferenceMode inference_mode;
    ExecutionResult result;
    const Clock& clock = Clock::Real();
    const SteadyTime start = clock.Now();

    // forward()'s stack: the module itself, then its arguments. Built here and handed to the
    // function rather than to Method::operator(), which would insert the module at the front
    // (moving every argument, and a reallocation).
    std::vector<c10::IValue> arguments(argument_count_ + 1);
    arguments[0] = self_;
    if (inputs.size() != inputs_.size()) {
      return InvalidArgument("model '{}' takes {} inputs, got {}", model_name_, inputs_.size(),
                             inputs.size());
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      ASSIGN_OR_RETURN(arguments[1 + inputs_[i].argument], ToIValue(inputs[i], inputs_[i]));
    }
    const SteadyTime inputs_ready = clock.Now();

    c10::IValue returned = forward_.function()(std::move(arguments));
    const SteadyTime inferred = clock.Now();

    // The returned values, read in place unless forward() returned a List[Tensor].
    std::vector<c10::IValue> list;
    c10::ArrayRef<c10::IValue> elements(returned);
    std::string_view returned_as = "one value";
    if (returned.isTuple()) {
      elements = returned.toTupleRef().elements().asArrayRef();
      returned_as = "a tuple";
    } else if (returned.isTensorList()) {
      for (const at::Tensor& t : returned.toTensorVector()) list.emplace_back(t);
      elements = list;
      returned_as = "a list";
    } else if (returned.isList() && outputs_.size() > 1) {
      elements = returned.toListRef();
      returned_as = "a list";
    }
    result.outputs.reserve(outputs_.size());
    for (const OutputBinding& binding : outputs_) {
      if (binding.element >= elements.size()) {
        return Internal(
            "model '{}': forward() returned {} of {} value(s) ({}), but the config lists {} "
            "output(s) ({}) and output '{}' is value {} (counting from 0): {}",
            model_name_, returned_as, elements.size(), return_type_, outputs_.size(),
            OutputNames(outputs_), binding.name, binding.element, kOutputsHint);
      }
      ASSIGN_OR_RETURN(tensor::Tensor out, FromIValue(elements[binding.element], binding));
      result.outputs.push_back(std::move(out));
    }
    const SteadyTime done = clock.Now();
    result.timing.compute_input_ns = NanosBetween(start, inputs_ready);
    result.timing.compute_infer_ns = NanosBetween(inputs_ready, inferred);
    result.timing.compute_output_ns = NanosBetween(inferred, done);
    return result;
  }

  Result<c10::IValue> ToIValue(tensor::Tensor& input, const InputBinding& binding) {
    if (binding.datatype == DataType::kBytes) {
      ASSIGN_OR_RETURN(std::vector<std::string_view> elements,
                       tensor::SplitBytesElements(input.data));
      c10::List<std::string> strings;
      strings.reserve(elements.size());
      for (std::string_view element : elements) strings.push_back(std::string(element));
      return c10::IValue(std::move(strings));
    }
    // The tensor's bytes stay owned by `input` until Execute returns; from_blob borrows them.
    // at::, not torch::from_blob: inference needs no autograd wrapper (a second TensorImpl).
    at::Tensor borrowed = at::from_blob(input.data.data(), input.shape,
                                        at::TensorOptions().dtype(*binding.scalar_type));
    if (device_.is_cuda()) return c10::IValue(borrowed.to(device_));
    return c10::IValue(std::move(borrowed));
  }

  Result<tensor::Tensor> FromIValue(const c10::IValue& value, const OutputBinding& binding) {
    tensor::Tensor out;
    out.name = binding.name;
    out.datatype = binding.datatype;
    if (binding.datatype == DataType::kBytes) {
      if (!value.isList()) {
        return Internal("model '{}': output '{}' is BYTES, so forward() must return List[str]",
                        model_name_, binding.name);
      }
      const c10::List<c10::IValue> list = value.toList();
      for (const c10::IValue& element : list) {
        if (!element.isString()) {
          return Internal("model '{}': output '{}' must be a List[str]", model_name_, binding.name);
        }
        RETURN_IF_ERROR(
            tensor::AppendBytesElement(element.toStringRef(), out.data)
                .WithContext(fmt::format("model '{}': output '{}'", model_name_, binding.name)));
      }
      out.shape = {static_cast<int64_t>(list.size())};
      return out;
    }
    if (!value.isTensor()) {
      return Internal("model '{}': output '{}' is not a tensor (got {})", model_name_, binding.name,
                      value.tagKind());
    }
    at::Tensor result = value.toTensor();
    const c10::ScalarType expected = *ToScalarType(binding.datatype);
    if (result.scalar_type() != expected) {
      return Internal("model '{}': output '{}' is {} but the config declares {}", model_name_,
                      binding.name, c10::toString(result.scalar_type()),
                      tensor::DataTypeName(binding.datatype));
    }
    if (!result.is_cpu()) result = result.cpu();
    if (!result.is_contiguous()) result = result.contiguous();
    out.shape.assign(result.sizes().begin(), result.sizes().end());
    out.data.assign(static_cast<const char*>(result.data_ptr()), result.nbytes());
    return out;
  }

  torch::jit::Module module_;
  torch::jit::Method forward_;  // looked up once: Module::forward() searches the methods per call
  c10::IValue self_;            // the module, forward()'s first argument
  torch::Device device_;
  int threads_;
  size_t argument_count_;
  std::vector<InputBinding> inputs_;
  std::vector<OutputBinding> outputs_;
  std::string model_name_;
  std::string return_type_;  // forward()'s declared return type, for messages
};

Result<int> ThreadCount(const model::ModelConfig& config, int default_threads) {
  auto it = config.parameters().find("INTRA_OP_THREAD_COUNT");
  if (it == config.parameters().end()) return std::max(1, default_threads);
  const std::string& text = it->second.string_value();
  int threads = 0;
  auto [ptr, error] = std::from_chars(text.data(), text.data() + text.size(), threads);
  if (error != std::errc() || ptr != text.data() + text.size() || threads < 1) {
    return InvalidArgument("parameters.INTRA_OP_THREAD_COUNT must be a positive integer, got '{}'",
                           text);
  }
  return threads;
}

Result<torch::Device> ChooseDevice(const model::ModelConfig& config, const InstanceSpec& spec) {
  const auto& group = config.instance_group(spec.group_index);
  const bool cuda = torch::cuda::is_available();
  if (group.kind() == inference::ModelInstanceGroup::KIND_GPU && !cuda) {
    return InvalidArgument("instance_group[{}] asks for KIND_GPU but LibTorch sees no CUDA device",
                           spec.group_index);
  }
  if (cuda && (group.kind() == inference::ModelInstanceGroup::KIND_GPU ||
               group.kind() == inference::ModelInstanceGroup::KIND_AUTO)) {
    const int gpu = group.gpus().empty() ? 0 : group.gpus(spec.instance_index % group.gpus_size());
    return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(gpu));
  }
  return torch::Device(torch::kCPU);
}

class TorchBackend final : public Backend {
 public:
  explicit TorchBackend(std::shared_ptr<const ModelDecryptor> decryptor)
      : decryptor_(std::move(decryptor)) {}

  std::string_view name() const override { return model::kPytorchBackend; }

  Result<std::unique_ptr<ModelInstance>> CreateInstance(const InstanceSpec& spec) override {
    const model::ModelConfig& config = *spec.config;
    const std::string file_name =
        config.default_model_filename().empty() ? "model.pt" : config.default_model_filename();
    const std::filesystem::path path = spec.version_directory / file_name;
    const std::string where = fmt::format("model '{}' version {}", config.name(), spec.version);
    std::error_code error;
    std::optional<std::string> decrypted;  // the model's bytes when its file is encrypted
    const Wiped wipe{decrypted};
    if (!std::filesystem::is_regular_file(path, error)) {
      const std::string sealed_path = path.string() + std::string(kEncryptedModelSuffix);
      if (!std::filesystem::is_regular_file(sealed_path, error)) {
        return NotFound("{}: model file '{}' not found", where, path.string());
      }
      ASSIGN_OR_RETURN(decrypted, Decrypt(sealed_path, where));
    }
    ASSIGN_OR_RETURN(const int threads, ThreadCount(config, spec.default_threads));
    ASSIGN_OR_RETURN(const torch::Device device, ChooseDevice(config, spec));
    RETURN_IF_ERROR(CheckBytesRanks(config, where));

    torch::jit::Module module;
    std::vector<std::string> argument_names;
    c10::TypePtr return_type;
    try {
      if (decrypted.has_value()) {
        std::istringstream stream(*decrypted);
        module = torch::jit::load(stream, device);
      } else {
        module = torch::jit::load(path.string(), device);
      }
      module.eval();
      const auto& schema = module.get_method("forward").function().getSchema();
      // Argument 0 is `self`.
      for (size_t i = 1; i < schema.arguments().size(); ++i) {
        argument_names.push_back(schema.arguments()[i].name());
      }
      // A TorchScript function returns one value (several come as one Tuple).
      if (schema.returns().size() == 1) return_type = schema.returns()[0].type();
    } catch (const std::exception& load_error) {
      return FromTorchError(fmt::format("{}: cannot load '{}'", where, path.string()), load_error);
    }

    // Triton's PyTorch backend picks one naming convention for all of a model's inputs: every
    // one named after a forward() argument, else every one <name>__<index>, else config order.
    // The config's inputs, then the batch inputs the server makes (ragged batching).
    const std::vector<model::BackendInput> backend_inputs = model::BackendInputs(config);
    const bool by_argument_name =
        std::all_of(backend_inputs.begin(), backend_inputs.end(), [&](const auto& input) {
          return std::find(argument_names.begin(), argument_names.end(), input.name) !=
                 argument_names.end();
        });
    const bool by_index =
        !by_argument_name &&
        std::all_of(backend_inputs.begin(), backend_inputs.end(),
                    [](const auto& input) { return ConventionIndex(input.name).has_value(); });
    if (!by_argument_name && !by_index) {
      LOG_WARN(
          "{}: the inputs are neither all named after forward() arguments ({}) nor all "
          "<name>__<index>; they feed the arguments in config order, as Triton does",
          where, fmt::join(argument_names, ", "));
    }
    std::vector<InputBinding> inputs;
    std::vector<bool> bound(argument_names.size(), false);
    for (size_t position = 0; position < backend_inputs.size(); ++position) {
      const model::BackendInput& input = backend_inputs[position];
      InputBinding binding;
      binding.datatype = input.datatype;
      binding.scalar_type = ToScalarType(binding.datatype);
      if (binding.datatype != DataType::kBytes && !binding.scalar_type) {
        return InvalidArgument("{}: input '{}': LibTorch has no {} type", where, input.name,
                               tensor::DataTypeName(binding.datatype));
      }
      if (by_argument_name) {
        binding.argument = static_cast<size_t>(
            std::find(argument_names.begin(), argument_names.end(), input.name) -
            argument_names.begin());
      } else if (by_index) {
        binding.argument = *ConventionIndex(input.name);
      } else {
        binding.argument = position;
      }
      if (binding.argument >= argument_names.size()) {
        return InvalidArgument("{}: input '{}' refers to argument {} but forward() takes {}", where,
                               input.name, binding.argument, argument_names.size());
      }
      if (bound[binding.argument]) {
        return InvalidArgument("{}: two inputs feed forward() argument '{}'", where,
                               argument_names[binding.argument]);
      }
      bound[binding.argument] = true;
      inputs.push_back(binding);
    }
    for (size_t i = 0; i < bound.size(); ++i) {
      if (!bound[i]) {
        return InvalidArgument("{}: forward() argument '{}' has no matching config input", where,
                               argument_names[i]);
      }
    }

    // Outputs likewise: every one <name>__<index>, else config order.
    const bool outputs_by_index =
        std::all_of(config.output().begin(), config.output().end(),
                    [](const auto& output) { return ConventionIndex(output.name()).has_value(); });
    std::vector<OutputBinding> outputs;
    for (int i = 0; i < config.output_size(); ++i) {
      const auto& output = config.output(i);
      OutputBinding binding;
      binding.name = output.name();
      binding.datatype = model::ToTensorType(output.data_type());
      if (binding.datatype != DataType::kBytes && !ToScalarType(binding.datatype)) {
        return InvalidArgument("{}: output '{}': LibTorch has no {} type", where, output.name(),
                               tensor::DataTypeName(binding.datatype));
      }
      binding.element = outputs_by_index ? *ConventionIndex(output.name()) : static_cast<size_t>(i);
      for (const OutputBinding& other : outputs) {
        if (other.element == binding.element) {
          return InvalidArgument(
              "{}: outputs '{}' and '{}' both name element {} of forward()'s result", where,
              other.name, binding.name, binding.element);
        }
      }
      outputs.push_back(std::move(binding));
    }
    // More outputs than forward() returns would fail every request: refused here when its
    // schema tells how many it returns (a List[Tensor]'s length shows at the first run: a
    // model_warmup finds it before the version serves).
    const std::string return_name = return_type ? return_type->annotation_str() : "unknown";
    const std::optional<size_t> returned =
        return_type ? FixedReturnCount(return_type, outputs.size()) : std::nullopt;
    for (const OutputBinding& binding : outputs) {
      if (returned && binding.element >= *returned) {
        return InvalidArgument(
            "{}: forward() returns {} ({} value(s)), but the config lists {} output(s) ({}) and "
            "output '{}' is value {} (counting from 0): {}",
            where, return_name, *returned, outputs.size(), OutputNames(outputs), binding.name,
            binding.element, kOutputsHint);
      }
    }

    const int blas_threads = RaiseBlasThreads(threads);
    LOG_INFO("{}: loaded '{}{}' on {} with {} intra-op thread(s) (OpenBLAS pool: {})", where,
             path.string(), decrypted.has_value() ? kEncryptedModelSuffix : "", device.str(),
             threads, blas_threads);
    return std::unique_ptr<ModelInstance>(
        new TorchInstance(std::move(module), device, threads, argument_names.size(),
                          std::move(inputs), std::move(outputs), config.name(), return_name));
  }

 private:
  // Wipes the decrypted model bytes when the load is done, whatever happened.
  struct Wiped {
    std::optional<std::string>& bytes;
    ~Wiped() {
      if (bytes.has_value()) OPENSSL_cleanse(bytes->data(), bytes->size());
    }
  };

  Result<std::string> Decrypt(const std::string& sealed_path, const std::string& where) const {
    if (decryptor_ == nullptr) {
      return FailedPrecondition(
          "{}: model file '{}' is encrypted and no master key is configured "
          "(--master-key-file or RAMPART_MASTER_KEY)",
          where, sealed_path);
    }
    ASSIGN_OR_RETURN(const std::string sealed, ReadModelFile(sealed_path));
    Result<std::string> plaintext = decryptor_->Decrypt(sealed);
    if (!plaintext.ok()) {
      return Status(plaintext.status().code(),
                    fmt::format("{}: cannot load encrypted model file '{}' (tenant '{}', region "
                                "'{}', data class '{}'): {}",
                                where, sealed_path, kModelTenant, decryptor_->region(),
                                decryptor_->data_class(), plaintext.status().message()));
    }
    return plaintext;
  }

  const std::shared_ptr<const ModelDecryptor> decryptor_;
};

}  // namespace

std::unique_ptr<Backend> MakeTorchBackend(std::shared_ptr<const ModelDecryptor> decryptor) {
  return std::make_unique<TorchBackend>(std::move(decryptor));
}

}  // namespace rampart::backend
