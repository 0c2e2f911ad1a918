#include "api/kserve_http.h"

#include "api/http_compression.h"
#include "api/http_status.h"
#include "api/kserve_codec.h"
#include "core/exceptions.h"
#include "core/logging.h"
#include "core/trace.h"
#include "json/writer.h"
#include "model/config.h"

namespace rampart::api {
namespace {

constexpr std::string_view kHeaderLength = "inference-header-content-length";

void WriteTensorMetadata(json::Writer& writer, const std::vector<serve::TensorMetadata>& tensors) {
  writer.StartArray();
  for (const serve::TensorMetadata& tensor : tensors) {
    writer.StartObject();
    writer.Key("name");
    writer.String(tensor.name);
    writer.Key("datatype");
    writer.String(tensor.datatype);
    writer.Key("shape");
    writer.StartArray();
    for (int64_t dim : tensor.shape) writer.Int64(dim);
    writer.EndArray();
    writer.EndObject();
  }
  writer.EndArray();
}

void WriteDuration(json::Writer& writer, std::string_view key, const serve::Duration& duration) {
  writer.Key(key);
  writer.StartObject();
  writer.Key("count");
  writer.Uint64(duration.count);
  writer.Key("ns");
  writer.Uint64(duration.ns);
  writer.EndObject();
}

void WriteModelStats(json::Writer& writer, const serve::ModelVersion& model) {
  const serve::StatisticsSnapshot stats = model.statistics().Snapshot();
  writer.StartObject();
  writer.Key("name");
  writer.String(model.name());
  writer.Key("version");
  writer.String(std::to_string(model.version()));
  writer.Key("last_inference");
  writer.Uint64(stats.last_inference_ms);
  writer.Key("inference_count");
  writer.Uint64(stats.inference_count);
  writer.Key("execution_count");
  writer.Uint64(stats.execution_count);
  writer.Key("inference_stats");
  writer.StartObject();
  WriteDuration(writer, "success", stats.success);
  WriteDuration(writer, "fail", stats.fail);
  WriteDuration(writer, "queue", stats.queue);
  WriteDuration(writer, "compute_input", stats.compute_input);
  WriteDuration(writer, "compute_infer", stats.compute_infer);
  WriteDuration(writer, "compute_output", stats.compute_output);
  WriteDuration(writer, "cache_hit", {});
  WriteDuration(writer, "cache_miss", {});
  writer.EndObject();
  writer.Key("batch_stats");
  writer.StartArray();
  for (const auto& [size, batch] : stats.batch_stats) {
    writer.StartObject();
    writer.Key("batch_size");
    writer.Uint64(size);
    WriteDuration(writer, "compute_input", batch.compute_input);
    WriteDuration(writer, "compute_infer", batch.compute_infer);
    WriteDuration(writer, "compute_output", batch.compute_output);
    writer.EndObject();
  }
  writer.EndArray();
  writer.EndObject();
}

net::HttpResponse EncodeResponse(Result<std::unique_ptr<serve::InferResponse>>& result,
                                 const OutputEncoding& encoding) {
  if (!result.ok()) return KServeError(result.status());
  // A large JSON answer needs several times its outputs' bytes: out of memory answers 503.
  Result<EncodedInfer> encoded =
      CatchAsStatus("encoding the answer", [&] { return EncodeInferResponse(**result, encoding); });
  if (!encoded.ok()) return KServeError(encoded.status());
  net::HttpResponse response;
  response.body = std::move(encoded->body);
  if (encoded->header_length) {
    response.content_type = "application/octet-stream";
    response.headers.emplace_back("Inference-Header-Content-Length",
                                  std::to_string(*encoded->header_length));
  }
  return response;
}

// Appends `ns` as milliseconds with three decimals (rounded to the microsecond), the precision
// Server-Timing values carry here; integer formatting, as this runs for every response.
void AppendMillis(int64_t ns, std::string& out) {
  if (ns < 0) {
    out += '-';
    ns = -ns;
  }
  const int64_t micros = (ns + 500) / 1000;
  out += fmt::format_int(micros / 1000).c_str();
  const fmt::format_int fraction(micros % 1000 + 1000);  // "1xyz": keeps the leading zeros
  out += '.';
  out.append(fraction.data() + 1, 3);
}

// Server-Timing durations are milliseconds (https://www.w3.org/TR/server-timing/). Ensembles
// add one entry per step (its duration, and its start after arrival in `desc`) and the
// alignment latency of their parallel branches.
std::string ServerTiming(const serve::InferResponse* response, int64_t total_ns) {
  const serve::RequestTiming timing = response ? response->timing : serve::RequestTiming{};
  std::string header;
  header.reserve(128);
  const auto entry = [&header](std::string_view name, int64_t ns) {
    if (!header.empty()) header += ", ";
    header += name;
    header += ";dur=";
    AppendMillis(ns, header);
  };
  entry("queue", timing.queue_ns);
  entry("compute_input", timing.compute_input_ns);
  entry("compute_infer", timing.compute_infer_ns);
  entry("compute_output", timing.compute_output_ns);
  entry("total", total_ns);
  if (response != nullptr && !response->steps.empty()) {
    for (size_t i = 0; i < response->steps.size(); ++i) {
      const serve::StepTiming& step = response->steps[i];
      entry(fmt::format("step.{}.{}", i, step.model), step.end_ns - step.start_ns);
      header += ";desc=\"start ";
      AppendMillis(step.start_ns, header);
      header += '"';
    }
    entry("alignment", response->alignment_ns);
  }
  return header;
}

void WriteAccessLog(const net::HttpRequest& request, std::string_view trace_id, int status,
                    size_t bytes, const serve::RequestTiming& timing, int64_t total_ns) {
  json::Writer line;
  line.StartObject();
  line.Key("access");
  line.String(request.method + " " + request.target);
  line.Key("status");
  line.Int64(status);
  line.Key("bytes");
  line.Uint64(bytes);
  line.Key("trace_id");
  line.String(trace_id);
  line.Key("queue_us");
  line.Double(timing.queue_ns / 1e3);
  line.Key("compute_input_us");
  line.Double(timing.compute_input_ns / 1e3);
  line.Key("compute_infer_us");
  line.Double(timing.compute_infer_ns / 1e3);
  line.Key("compute_output_us");
  line.Double(timing.compute_output_ns / 1e3);
  line.Key("total_us");
  line.Double(total_ns / 1e3);
  line.EndObject();
  LogInfoJsonObject(line.view());
}

}  // namespace

KServeHttp::KServeHttp(serve::InferenceServer& server, KServeHttpOptions options)
    : server_(server), options_(std::move(options)) {}

void KServeHttp::Shutdown() {
  control_.Stop();
  repository_reads_.Stop();
}

void KServeHttp::Infer(net::HttpRequest&& request, RouteArgs& args, RecordedResponder responder) {
  const std::string_view model = args.model;
  const int64_t version = args.version;
  const TraceContext trace = args.trace;

  const auto refuse = [&](net::HttpResponse response) {
    response.headers.emplace_back("traceparent", trace.Traceparent());
    if (options_.access_log) {
      WriteAccessLog(request, trace.TraceId(), response.status, response.body.size(), {},
                     NanosBetween(request.received, Clock::Real().Now()));
    }
    responder.SetRequestContent(std::move(request.body));
    responder.Send(std::move(response));
  };
  const std::optional<std::string_view> coding = request.Header("content-encoding");
  const ContentEncoding encoding = ParseContentEncoding(coding);
  if (encoding == ContentEncoding::kUnsupported) {
    // Triton's answer: 415, with the codings it takes.
    net::HttpResponse response =
        KServeError(InvalidArgument("Unsupported content-encoding '{}'", *coding));
    response.status = 415;
    response.headers.emplace_back("Accept-Encoding", kAcceptedEncodings);
    refuse(std::move(response));
    return;
  }
  if (encoding != ContentEncoding::kIdentity) {
    Result<std::string> inflated = CatchAsStatus("inflating the request body", [&] {
      return Inflate(request.body, encoding, options_.max_body_bytes);
    });
    if (!inflated.ok()) {
      refuse(KServeError(inflated.status()));
      return;
    }
    request.body = std::move(inflated).value();
  }
  // Out of memory while decoding answers 503 (core/exceptions.h), not a crash.
  Result<DecodedInfer> decoded = CatchAsStatus("decoding the request", [&] {
    return DecodeInferRequest(request.body, request.Header(kHeaderLength));
  });
  if (!decoded.ok()) {
    refuse(KServeError(decoded.status()));
    return;
  }
  std::unique_ptr<serve::InferRequest> infer = std::move(decoded->request);
  infer->model_name = std::string(model);
  infer->model_version = version;
  infer->arrival = request.received;
  infer->cancelled = request.client_gone;
  infer->tenant = std::move(args.tenant);  // its share of the model's instance time
  // Only what the answer needs travels with the callback; the body stays behind, unless the
  // audit record digests (or seals) it once the answer is known.
  responder.SetRequestContent(std::move(request.body));
  request.body.clear();
  request.body.shrink_to_fit();
  server_.Infer(
      std::move(infer),
      [this, responder = std::move(responder), trace, request = std::move(request),
       encoding = std::move(decoded->encoding), reservation = std::move(args.reservation)](
          Result<std::unique_ptr<serve::InferResponse>> result) mutable {
        // KServe inference counts requests, not tokens: the concurrency slot goes back now.
        if (!reservation.empty()) reservation.Settle(0);
        if (audit::AuditRecord* record = responder.record(); record != nullptr && result.ok()) {
          const serve::InferResponse& answered = **result;
          const serve::RequestTiming& timing = answered.timing;
          record->target = answered.model_name;
          record->model_version = std::to_string(answered.model_version);
          record->instance_ns =
              timing.compute_input_ns + timing.compute_infer_ns + timing.compute_output_ns;
          // In the names' order already: NamedCounts appends each without moving any.
          record->stages_ns = {{"compute_infer", timing.compute_infer_ns},
                               {"compute_input", timing.compute_input_ns},
                               {"compute_output", timing.compute_output_ns},
                               {"queue", timing.queue_ns}};
        }
        responder.SendWith([this, trace, request = std::move(request), result = std::move(result),
                            encoding = std::move(encoding)]() mutable {
          net::HttpResponse response = EncodeResponse(result, encoding);
          const serve::RequestTiming timing =
              result.ok() ? (*result)->timing : serve::RequestTiming{};
          const int64_t total_ns = NanosBetween(request.received, Clock::Real().Now());
          response.headers.reserve(response.headers.size() + 2);
          response.headers.emplace_back("traceparent", trace.Traceparent());
          response.headers.emplace_back(
              "Server-Timing", ServerTiming(result.ok() ? result->get() : nullptr, total_ns));
          if (options_.access_log) {
            WriteAccessLog(request, trace.TraceId(), response.status, response.body.size(), timing,
                           total_ns);
          }
          return response;
        });
      });
}

net::HttpResponse KServeHttp::ServerMetadata() const {
  json::Writer writer;
  writer.StartObject();
  writer.Key("name");
  writer.String(options_.server_name);
  writer.Key("version");
  writer.String(options_.server_version);
  writer.Key("extensions");
  writer.StartArray();
  for (std::string_view extension :
       {"binary_tensor_data", "model_configuration", "statistics", "model_repository", "logging"}) {
    writer.String(extension);
  }
  writer.EndArray();
  writer.EndObject();
  return JsonResponse(writer.Take());
}

net::HttpResponse KServeHttp::ModelMetadata(std::string_view model, int64_t version) const {
  Result<serve::ModelMetadata> metadata = server_.Metadata(model, version);
  if (!metadata.ok()) return KServeError(metadata.status());
  json::Writer writer;
  writer.StartObject();
  writer.Key("name");
  writer.String(metadata->name);
  writer.Key("versions");
  writer.StartArray();
  for (const std::string& each : metadata->versions) writer.String(each);
  writer.EndArray();
  writer.Key("platform");
  writer.String(metadata->platform);
  writer.Key("inputs");
  WriteTensorMetadata(writer, metadata->inputs);
  writer.Key("outputs");
  WriteTensorMetadata(writer, metadata->outputs);
  writer.EndObject();
  return JsonResponse(writer.Take());
}

net::HttpResponse KServeHttp::ModelConfig(std::string_view model, int64_t version) const {
  Result<std::shared_ptr<serve::ModelVersion>> loaded = server_.GetModel(model, version);
  if (!loaded.ok()) return KServeError(loaded.status());
  return JsonResponse(model::ConfigToJson((*loaded)->config()));
}

net::HttpResponse KServeHttp::ModelReady(std::string_view model, int64_t version) const {
  // As Triton: 200 and no body when ready, else the error (404 for an unknown model).
  const Status ready = server_.ModelReady(model, version);
  return ready.ok() ? EmptyResponse(200) : KServeError(ready);
}

net::HttpResponse KServeHttp::Statistics(std::string_view model, int64_t version) const {
  Result<std::vector<std::shared_ptr<serve::ModelVersion>>> models =
      server_.StatisticsTargets(model, version);
  if (!models.ok()) return KServeError(models.status());
  json::Writer writer;
  writer.StartObject();
  writer.Key("model_stats");
  writer.StartArray();
  for (const auto& each : *models) WriteModelStats(writer, *each);
  writer.EndArray();
  writer.EndObject();
  return JsonResponse(writer.Take());
}

}  // namespace rampart::api
