#include "serve/ensemble.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include <fmt/ranges.h>

#include "serve/server.h"

namespace rampart::serve {
namespace {

using Step = inference::ModelEnsembling::Step;

// How many steps read each tensor.
std::map<std::string, int> Readers(const inference::ModelEnsembling& scheduling) {
  std::map<std::string, int> readers;
  for (const Step& step : scheduling.step()) {
    for (const auto& [input, tensor] : step.input_map()) ++readers[tensor];
  }
  return readers;
}

// Steps whose outputs no other step reads (`readers` from Readers): the ends of the graph's
// branches.
std::vector<bool> FinalSteps(const inference::ModelEnsembling& scheduling,
                             const std::map<std::string, int>& readers) {
  std::vector<bool> final(static_cast<size_t>(scheduling.step_size()), true);
  for (int i = 0; i < scheduling.step_size(); ++i) {
    for (const auto& [output, tensor] : scheduling.step(i).output_map()) {
      if (readers.contains(tensor)) final[static_cast<size_t>(i)] = false;
    }
  }
  return final;
}

std::set<std::string> OutputNames(const model::ModelConfig& config) {
  std::set<std::string> names;
  for (const auto& output : config.output()) names.insert(output.name());
  return names;
}

// The state of one request going through an ensemble. Shared by the step callbacks; every field
// below the constants is guarded by mutex.
class EnsembleRun : public std::enable_shared_from_this<EnsembleRun> {
 public:
  EnsembleRun(InferenceServer& server, std::shared_ptr<ModelVersion> ensemble,
              std::unique_ptr<InferRequest> request, InferCallback done)
      : server_(server),
        ensemble_(std::move(ensemble)),
        scheduling_(ensemble_->config().ensemble_scheduling()),
        returned_(OutputNames(ensemble_->config())),
        request_(std::move(request)),
        done_(std::move(done)),
        steps_(static_cast<size_t>(scheduling_.step_size())),
        readers_(Readers(scheduling_)) {
    final_steps_ = FinalSteps(scheduling_, readers_);
    // Validate has checked the inputs' shapes: with batching, every input's dim 0 is the batch.
    if (ensemble_->config().max_batch_size() > 0 && !request_->inputs.empty() &&
        !request_->inputs[0].shape.empty()) {
      batch_items_ = static_cast<uint64_t>(std::max<int64_t>(1, request_->inputs[0].shape[0]));
    }
    for (tensor::Tensor& input : request_->inputs) tensors_[input.name] = std::move(input);
    request_->inputs.clear();
    // Every step's model now, held until the answer: what is unloaded or replaced meanwhile
    // still serves the steps to come.
    for (size_t i = 0; i < steps_.size() && !failed_; ++i) {
      const Step& step = scheduling_.step(static_cast<int>(i));
      Result<InferenceServer::Target> target = server_.Resolve(
          step.model_name(), step.model_version() > 0 ? step.model_version() : kLatestVersion);
      if (!target.ok()) {
        Fail(i, target.status());
      } else {
        steps_[i].target = std::move(target).value();
      }
    }
  }

  void Start() {
    std::unique_lock lock(mutex_);
    LaunchReady(lock);
  }

 private:
  struct StepState {
    InferenceServer::Target target;  // released once the ensemble has answered
    bool launched = false;
    bool finished = false;
    StepTiming timing;
  };

  // The first failure is the answer; the steps running finish first.
  void Fail(size_t index, const Status& status) {
    if (failed_) return;
    failed_ = true;
    failure_ = status.WithContext(
        fmt::format("ensemble '{}' step {} (model '{}')", ensemble_->name(), index,
                    scheduling_.step(static_cast<int>(index)).model_name()));
  }

  // The tensor as step input: moved out on its last read unless the ensemble returns it, so an
  // intermediate tensor is freed once no step needs it (as Triton releases them), else copied.
  tensor::Tensor TakeInput(const std::string& name) {
    auto it = tensors_.find(name);
    const bool last_read = --readers_.at(name) == 0;
    if (!last_read || returned_.contains(name)) return it->second;
    tensor::Tensor taken = std::move(it->second);
    tensors_.erase(it);
    return taken;
  }

  // Launches every step whose inputs exist. Takes and may release the lock around Infer (a
  // step that fails validation calls back at once, re-entering this object).
  void LaunchReady(std::unique_lock<std::mutex>& lock) {
    while (!failed_) {
      // Each with its own hold on its step's version, taken under the lock: once the lock is
      // let go, a step that finishes at once may answer the request and release the run's.
      std::vector<std::tuple<size_t, InferenceServer::Target, std::unique_ptr<InferRequest>>> ready;
      for (size_t i = 0; i < steps_.size(); ++i) {
        if (steps_[i].launched) continue;
        const Step& step = scheduling_.step(static_cast<int>(i));
        const bool inputs_ready =
            std::all_of(step.input_map().begin(), step.input_map().end(),
                        [&](const auto& entry) { return tensors_.contains(entry.second); });
        if (!inputs_ready) continue;
        auto sub = std::make_unique<InferRequest>();
        sub->model_name = step.model_name();
        sub->model_version = steps_[i].target.model->version();
        sub->id = request_->id;
        // As Triton's ensemble passes them on to each step's request.
        sub->priority = request_->priority;
        sub->timeout_us = request_->timeout_us;
        sub->cancelled = request_->cancelled;
        sub->tenant = request_->tenant;  // each step counts against its model's shares
        for (const auto& [model_input, tensor_name] : step.input_map()) {
          tensor::Tensor input = TakeInput(tensor_name);
          input.name = model_input;
          sub->inputs.push_back(std::move(input));
        }
        for (const auto& [model_output, tensor_name] : step.output_map()) {
          sub->requested_outputs.push_back(model_output);
        }
        steps_[i].launched = true;
        steps_[i].timing.model = step.model_name();
        const SteadyTime now = Clock::Real().Now();
        steps_[i].timing.start_ns = NanosBetween(request_->arrival, now);
        sub->arrival = now;
        ready.emplace_back(i, steps_[i].target, std::move(sub));
      }
      if (ready.empty()) break;
      running_ += ready.size();
      lock.unlock();
      for (auto& [index, target, sub] : ready) {
        server_.InferStep(std::move(target), std::move(sub),
                          [self = shared_from_this(),
                           index = index](Result<std::unique_ptr<InferResponse>> result) mutable {
                            self->StepDone(index, std::move(result));
                          });
      }
      lock.lock();
    }
    MaybeFinish(lock);
  }

  void StepDone(size_t index, Result<std::unique_ptr<InferResponse>> result) {
    std::unique_lock lock(mutex_);
    --running_;
    steps_[index].finished = true;
    steps_[index].timing.end_ns = NanosBetween(request_->arrival, Clock::Real().Now());
    if (!result.ok()) {
      Fail(index, result.status());
    } else {
      // Triton's ensemble statistics: the steps' queue and compute times, added up.
      const RequestTiming& step_timing = (*result)->timing;
      timing_.queue_ns += step_timing.queue_ns;
      timing_.compute_input_ns += step_timing.compute_input_ns;
      timing_.compute_infer_ns += step_timing.compute_infer_ns;
      timing_.compute_output_ns += step_timing.compute_output_ns;
      const Step& step = scheduling_.step(static_cast<int>(index));
      for (tensor::Tensor& output : (*result)->outputs) {
        auto mapped = step.output_map().find(output.name);
        if (mapped == step.output_map().end()) continue;
        output.name = mapped->second;
        tensors_[mapped->second] = std::move(output);
      }
    }
    LaunchReady(lock);
  }

  void MaybeFinish(std::unique_lock<std::mutex>& lock) {
    if (running_ > 0 || answered_) return;
    answered_ = true;
    const SteadyTime finished = Clock::Real().Now();
    const int64_t total_ns = NanosBetween(request_->arrival, finished);
    Statistics& stats = ensemble_->mutable_statistics();
    Result<std::unique_ptr<InferResponse>> outcome =
        failed_ ? Result<std::unique_ptr<InferResponse>>(failure_) : Assemble();
    if (!outcome.ok()) {
      stats.RecordFailure(FailureReason::kOther, total_ns);
    } else {
      // As Triton counts an ensemble request: one execution of its batch, which took the steps'
      // compute time.
      (*outcome)->timing = timing_;
      const Statistics::Success success{total_ns, timing_, batch_items_};
      stats.RecordExecution(
          batch_items_,
          {timing_.compute_input_ns, timing_.compute_infer_ns, timing_.compute_output_ns},
          {&success, 1});
      if (VersionObserver* observer = stats.observer()) {
        observer->OnEnsembleAlignment((*outcome)->alignment_ns);
      }
    }
    for (StepState& step : steps_) step.target = {};  // the versions may retire now
    InferCallback done = std::move(done_);
    lock.unlock();
    done(std::move(outcome));
  }

  Result<std::unique_ptr<InferResponse>> Assemble() {
    auto response = std::make_unique<InferResponse>();
    response->model_name = ensemble_->name();
    response->model_version = ensemble_->version();
    response->id = request_->id;
    const auto& wanted = request_->requested_outputs;
    for (const auto& output : ensemble_->config().output()) {
      if (!wanted.empty() &&
          std::find(wanted.begin(), wanted.end(), output.name()) == wanted.end()) {
        continue;
      }
      auto it = tensors_.find(output.name());
      if (it == tensors_.end()) {
        return Internal("ensemble '{}': no step produced output '{}'", ensemble_->name(),
                        output.name());
      }
      response->outputs.push_back(std::move(it->second));
    }
    int64_t first_end = INT64_MAX;
    int64_t last_end = 0;
    for (size_t i = 0; i < steps_.size(); ++i) {
      response->steps.push_back(steps_[i].timing);
      if (final_steps_[i]) {
        first_end = std::min(first_end, steps_[i].timing.end_ns);
        last_end = std::max(last_end, steps_[i].timing.end_ns);
      }
    }
    response->alignment_ns = last_end > first_end ? last_end - first_end : 0;
    return response;
  }

  InferenceServer& server_;
  const std::shared_ptr<ModelVersion> ensemble_;
  const inference::ModelEnsembling& scheduling_;  // owned by ensemble_'s config
  const std::set<std::string> returned_;          // the ensemble's outputs
  const std::unique_ptr<InferRequest> request_;
  // Set by the constructor.
  std::vector<bool> final_steps_;
  uint64_t batch_items_ = 1;

  std::mutex mutex_;
  InferCallback done_;
  std::map<std::string, tensor::Tensor> tensors_;
  std::vector<StepState> steps_;
  std::map<std::string, int> readers_;  // steps yet to read each tensor
  RequestTiming timing_;                // the finished steps' times, added up
  size_t running_ = 0;
  bool failed_ = false;
  bool answered_ = false;
  Status failure_;
};

}  // namespace

Status ValidateEnsemble(const model::ModelConfig& config) {
  const std::string& name = config.name();
  if (!config.has_ensemble_scheduling() || config.ensemble_scheduling().step_size() == 0) {
    return InvalidArgument("ensemble '{}': ensemble_scheduling needs at least one step", name);
  }
  const auto& steps = config.ensemble_scheduling().step();
  std::map<std::string, int> producer;
  for (int i = 0; i < steps.size(); ++i) {
    const Step& step = steps.Get(i);
    if (step.model_name().empty()) {
      return InvalidArgument("ensemble '{}' step {}: model_name is required", name, i);
    }
    if (step.model_name() == name) {
      return InvalidArgument("ensemble '{}' step {}: an ensemble cannot call itself", name, i);
    }
    if (step.input_map().empty() || step.output_map().empty()) {
      return InvalidArgument("ensemble '{}' step {} ('{}'): input_map and output_map are required",
                             name, i, step.model_name());
    }
    for (const auto& [output, tensor] : step.output_map()) {
      if (!producer.emplace(tensor, i).second) {
        return InvalidArgument("ensemble '{}': tensor '{}' is produced by steps {} and {}", name,
                               tensor, producer[tensor], i);
      }
    }
  }
  std::set<std::string> available;
  for (const auto& input : config.input()) {
    available.insert(input.name());
    if (producer.contains(input.name())) {
      return InvalidArgument("ensemble '{}': step {} overwrites ensemble input '{}'", name,
                             producer[input.name()], input.name());
    }
  }
  // Run the graph symbolically: every step must become runnable, else a cycle or a missing
  // tensor blocks it.
  std::vector<bool> done(static_cast<size_t>(steps.size()), false);
  for (bool progress = true; progress;) {
    progress = false;
    for (int i = 0; i < steps.size(); ++i) {
      if (done[static_cast<size_t>(i)]) continue;
      const Step& step = steps.Get(i);
      if (std::all_of(step.input_map().begin(), step.input_map().end(),
                      [&](const auto& entry) { return available.contains(entry.second); })) {
        for (const auto& [output, tensor] : step.output_map()) available.insert(tensor);
        done[static_cast<size_t>(i)] = progress = true;
      }
    }
  }
  for (int i = 0; i < steps.size(); ++i) {
    if (!done[static_cast<size_t>(i)]) {
      std::vector<std::string> missing;
      for (const auto& [input, tensor] : steps.Get(i).input_map()) {
        if (!available.contains(tensor)) missing.push_back(tensor);
      }
      return InvalidArgument(
          "ensemble '{}' step {} ('{}') can never run: no ensemble input or step produces {} (or "
          "the steps form a cycle)",
          name, i, steps.Get(i).model_name(), fmt::join(missing, ", "));
    }
  }
  for (const auto& output : config.output()) {
    if (!available.contains(output.name())) {
      return InvalidArgument("ensemble '{}': no step produces output '{}'", name, output.name());
    }
  }
  return Status::Ok();
}

Status CheckEnsembleTensors(const model::ModelConfig& config,
                            const std::vector<const model::ModelConfig*>& step_configs) {
  const std::string& name = config.name();
  // Each tensor's data type, and where it was first seen.
  std::map<std::string, std::pair<inference::DataType, std::string>> types;
  const auto agree = [&](const std::string& tensor, inference::DataType type,
                         std::string where) -> Status {
    auto [it, first] = types.try_emplace(tensor, type, where);
    if (first || it->second.first == type) return Status::Ok();
    return InvalidArgument("ensemble '{}': tensor '{}' is {} as {} but {} as {}", name, tensor,
                           inference::DataType_Name(it->second.first), it->second.second,
                           inference::DataType_Name(type), where);
  };
  for (const auto& input : config.input()) {
    RETURN_IF_ERROR(agree(input.name(), input.data_type(), "an ensemble input"));
  }
  for (const auto& output : config.output()) {
    RETURN_IF_ERROR(agree(output.name(), output.data_type(), "an ensemble output"));
  }
  const auto& steps = config.ensemble_scheduling().step();
  for (int i = 0; i < steps.size(); ++i) {
    const Step& step = steps.Get(i);
    const model::ModelConfig& model = *step_configs.at(static_cast<size_t>(i));
    // Each key of `map` names one of the model's `tensors` (its inputs or outputs: `kind`), whose
    // type the mapped ensemble tensor must have.
    const auto check = [&](const auto& map, const auto& tensors, std::string_view kind) -> Status {
      for (const auto& [model_name, tensor] : map) {
        auto found = std::find_if(tensors.begin(), tensors.end(),
                                  [&](const auto& each) { return each.name() == model_name; });
        if (found == tensors.end()) {
          return InvalidArgument("ensemble '{}' step {}: model '{}' has no {} '{}'", name, i,
                                 step.model_name(), kind, model_name);
        }
        RETURN_IF_ERROR(agree(
            tensor, found->data_type(),
            fmt::format("{} '{}' of step {} ('{}')", kind, model_name, i, step.model_name())));
      }
      return Status::Ok();
    };
    RETURN_IF_ERROR(check(step.input_map(), model.input(), "input"));
    RETURN_IF_ERROR(check(step.output_map(), model.output(), "output"));
  }
  return Status::Ok();
}

void RunEnsemble(InferenceServer& server, std::shared_ptr<ModelVersion> ensemble,
                 std::unique_ptr<InferRequest> request, InferCallback done) {
  std::make_shared<EnsembleRun>(server, std::move(ensemble), std::move(request), std::move(done))
      ->Start();
}

}  // namespace rampart::serve
