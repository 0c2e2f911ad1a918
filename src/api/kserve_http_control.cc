// KServeHttp's control and administration endpoints: the repository index and load/unload,
// canary releases, and Triton's logging extension. The inference path is in kserve_http.cc.

#include "api/http_status.h"
#include "api/kserve_http.h"
#include "core/logging.h"
#include "json/reader.h"
#include "json/writer.h"

namespace rampart::api {

net::HttpResponse KServeHttp::RepositoryIndex(const std::string& request_body) const {
  bool ready_only = false;
  if (!request_body.empty()) {
    json::Parser parser;
    Result<json::Value> body = parser.Parse(request_body);
    if (!body.ok()) return KServeError(body.status());
    if (!body->IsObject()) return KServeError(InvalidArgument("the body must be a JSON object"));
    if (auto ready = body->Find("ready")) {
      Result<bool> flag = ready->GetBool("ready");
      if (!flag.ok()) return KServeError(flag.status());
      ready_only = *flag;
    }
  }
  json::Writer writer;
  writer.StartArray();
  for (const serve::ModelIndexEntry& entry : server_.RepositoryIndex()) {
    if (ready_only && entry.state != "READY") continue;
    writer.StartObject();
    writer.Key("name");
    writer.String(entry.name);
    if (entry.state.empty()) {  // never loaded: the name alone, as Triton writes it
      writer.EndObject();
      continue;
    }
    if (!entry.version.empty()) {
      writer.Key("version");
      writer.String(entry.version);
    }
    writer.Key("state");
    writer.String(entry.state);
    writer.Key("reason");
    writer.String(entry.reason);
    writer.EndObject();
  }
  writer.EndArray();
  return JsonResponse(writer.Take());
}

net::HttpResponse KServeHttp::RepositoryControl(bool load, const std::string& model,
                                                const std::string& body) const {
  std::optional<std::string> config;
  bool unload_dependents = false;
  if (!body.empty()) {
    json::Parser parser;
    Result<json::Value> root = parser.Parse(body);
    if (!root.ok()) return KServeError(root.status());
    if (!root->IsObject()) return KServeError(InvalidArgument("the body must be a JSON object"));
    if (auto parameters = root->Find("parameters")) {
      if (!parameters->IsObject()) {
        return KServeError(InvalidArgument("'parameters' must be an object"));
      }
      for (auto [key, value] : parameters->Object()) {
        if (key == "config" && load) {
          Result<std::string_view> text = json::Value(value).GetString("parameters.config");
          if (!text.ok()) return KServeError(text.status());
          config = std::string(*text);
        } else if (key.starts_with("file:")) {
          return KServeError(
              Unimplemented("parameters.{}: loading model files from the request "
                            "is not supported",
                            key));
        } else if (key == "unload_dependents") {
          // Triton's flag: unloading an ensemble also unloads the step models its load brought in.
          Result<bool> flag = json::Value(value).GetBool("parameters.unload_dependents");
          if (!flag.ok()) return KServeError(flag.status());
          unload_dependents = *flag;
        } else {
          return KServeError(InvalidArgument("unknown parameter '{}'", key));
        }
      }
    }
  }
  const Status status = load ? server_.LoadModel(model, std::move(config))
                             : server_.UnloadModel(model, unload_dependents);
  return status.ok() ? EmptyResponse(200) : KServeError(status);
}

net::HttpResponse KServeHttp::Canary(std::string_view model) const {
  Result<serve::CanaryStatus> status = server_.GetCanary(model);
  if (!status.ok()) return KServeError(status.status());
  json::Writer writer;
  writer.StartObject();
  writer.Key("model");
  writer.String(model);
  writer.Key("baseline");
  writer.String(std::to_string(status->policy.baseline));
  writer.Key("candidate");
  writer.String(std::to_string(status->policy.candidate));
  writer.Key("state");
  writer.String(serve::CanaryStateName(status->state));
  writer.Key("stage");
  writer.Uint64(status->stage);
  writer.Key("stages");
  writer.StartArray();
  for (int stage : status->policy.stages_percent) writer.Int64(stage);
  writer.EndArray();
  writer.Key("weight_percent");
  writer.Int64(status->weight_percent);
  writer.Key("candidate_requests");
  writer.Uint64(status->candidate_requests);
  writer.Key("candidate_failures");
  writer.Uint64(status->candidate_failures);
  writer.Key("baseline_requests");
  writer.Uint64(status->baseline_requests);
  writer.Key("candidate_p99_ms");
  writer.Double(status->candidate_p99_ms);
  writer.Key("baseline_p99_ms");
  writer.Double(status->baseline_p99_ms);
  writer.Key("last_decision");
  writer.String(status->last_decision);
  writer.EndObject();
  return JsonResponse(writer.Take());
}

net::HttpResponse KServeHttp::StartCanary(std::string_view model, const std::string& body) const {
  json::Parser parser;
  Result<json::Value> root = parser.Parse(body);
  if (!root.ok()) return KServeError(root.status());
  if (!root->IsObject()) return KServeError(InvalidArgument("the body must be a JSON object"));
  serve::CanaryPolicy policy;
  for (auto [key, value] : root->Object()) {
    const json::Value field(value);
    Status status;
    const auto read_version = [&](int64_t& target) {
      Result<uint64_t> version = field.GetUint64(key);
      status = version.status();
      if (version.ok()) target = static_cast<int64_t>(*version);
    };
    if (key == "baseline") {
      read_version(policy.baseline);
    } else if (key == "candidate") {
      read_version(policy.candidate);
    } else if (key == "stages") {
      policy.stages_percent.clear();
      if (!field.IsArray()) {
        status = InvalidArgument("'stages' must be an array of percentages");
      } else {
        for (simdjson::dom::element stage : field.Array()) {
          Result<uint64_t> percent = json::Value(stage).GetUint64("stages[]");
          if (!percent.ok()) {
            status = percent.status();
            break;
          }
          policy.stages_percent.push_back(static_cast<int>(std::min<uint64_t>(*percent, 1000)));
        }
      }
    } else if (key == "min_requests") {
      Result<uint64_t> count = field.GetUint64(key);
      status = count.status();
      if (count.ok()) policy.min_requests = *count;
    } else if (key == "max_error_rate" || key == "max_p99_ratio") {
      Result<double> number = field.GetDouble(key);
      status = number.status();
      if (number.ok())
        (key == "max_error_rate" ? policy.max_error_rate : policy.max_p99_ratio) = *number;
    } else {
      status = InvalidArgument("unknown canary setting '{}'", key);
    }
    if (!status.ok()) return KServeError(status);
  }
  if (Status started = server_.StartCanary(model, std::move(policy)); !started.ok()) {
    return KServeError(started);
  }
  return Canary(model);
}

net::HttpResponse KServeHttp::Logging(const net::HttpRequest& request) const {
  LogSettings settings = CurrentLogSettings();
  if (request.method == "POST") {
    json::Parser parser;
    Result<json::Value> body = parser.Parse(request.body);
    if (!body.ok()) return KServeError(body.status());
    if (!body->IsObject()) return KServeError(InvalidArgument("the body must be a JSON object"));
    for (auto [key, value] : body->Object()) {
      const json::Value field(value);
      Status status;
      if (key == "log_info" || key == "log_warning" || key == "log_error") {
        Result<bool> flag = field.GetBool(key);
        status = flag.status();
        if (flag.ok()) {
          (key == "log_info"      ? settings.info
           : key == "log_warning" ? settings.warning
                                  : settings.error) = *flag;
        }
      } else if (key == "log_verbose_level") {
        Result<uint64_t> level = field.GetUint64(key);
        status = level.status();
        if (level.ok()) settings.verbose_level = static_cast<int>(std::min<uint64_t>(*level, 1000));
      } else if (key == "log_format") {
        Result<std::string_view> name = field.GetString(key);
        status = name.status();
        if (name.ok()) {
          Result<LogFormat> format = ParseLogFormat(*name);
          status = format.status();
          if (format.ok()) settings.format = *format;
        }
      } else if (key == "log_file") {
        Result<std::string_view> file = field.GetString(key);
        status = file.ok() && !file->empty()
                     ? Unimplemented("log_file: Rampart logs to stderr only")
                     : file.status();
      } else {
        status = InvalidArgument("unknown logging setting '{}'", key);
      }
      if (!status.ok()) return KServeError(status);
    }
    ApplyLogSettings(settings);
  }
  json::Writer writer;
  writer.StartObject();
  writer.Key("log_file");
  writer.String("");
  writer.Key("log_info");
  writer.Bool(settings.info);
  writer.Key("log_warning");
  writer.Bool(settings.warning);
  writer.Key("log_error");
  writer.Bool(settings.error);
  writer.Key("log_verbose_level");
  writer.Int64(settings.verbose_level);
  writer.Key("log_format");
  writer.String(LogFormatName(settings.format));
  writer.EndObject();
  return JsonResponse(writer.Take());
}

}  // namespace rampart::api
