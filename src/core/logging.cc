#include "core/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <mutex>

namespace rampart {
namespace {

constexpr const char* kTextPattern = "%Y-%m-%dT%H:%M:%S.%e %^%L%$ [%t] %v";
// The logger LogInfoJsonObject writes through: the default logger's sinks under another name,
// by which the JSON formatter knows its messages are objects.
constexpr std::string_view kJsonObjectLoggerName = "rampart.json";

// One JSON object per line, with the message escaped (messages carry user-supplied names), or
// as it is when it is a JSON object already (kJsonObjectLoggerName's messages).
class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& message, spdlog::memory_buf_t& out) override {
    if (message.logger_name == kJsonObjectLoggerName) {
      object_head_.format(message, out);  // {"time":"...","level":"...","thread":N,"message":
      out.append(message.payload);
      out.append(std::string_view("}\n"));
      return;
    }
    time_.format(message, out);  // {"time":"...","level":"...","thread":N,"message":"
    for (char c : message.payload) {
      switch (c) {
        case '"': out.append(std::string_view("\\\"")); break;
        case '\\': out.append(std::string_view("\\\\")); break;
        case '\n': out.append(std::string_view("\\n")); break;
        case '\r': out.append(std::string_view("\\r")); break;
        case '\t': out.append(std::string_view("\\t")); break;
        default:
          if (static_cast<unsigned char>(c) < 0x20) {
            fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<int>(c));
          } else {
            out.push_back(c);
          }
      }
    }
    out.append(std::string_view("\"}\n"));
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }

 private:
  spdlog::pattern_formatter time_{
      R"({"time":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","thread":%t,"message":")",
      spdlog::pattern_time_type::utc, ""};
  spdlog::pattern_formatter object_head_{
      R"({"time":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","thread":%t,"message":)",
      spdlog::pattern_time_type::utc, ""};
};

std::mutex settings_mutex;
LogSettings current;  // guarded by settings_mutex
// Set once by ConfigureLogging, before other threads log; read without a lock after that.
std::shared_ptr<spdlog::logger> json_object_logger;

spdlog::level::level_enum LevelFor(const LogSettings& settings) {
  if (settings.verbose_level > 0) return spdlog::level::debug;
  if (settings.info) return spdlog::level::info;
  if (settings.warning) return spdlog::level::warn;
  if (settings.error) return spdlog::level::err;
  return spdlog::level::off;
}

}  // namespace

void ConfigureLogging(const LogSettings& settings) {
  auto logger = spdlog::stderr_color_mt("rampart");
  // The same sinks, so both loggers' lines share one formatter and never interleave.
  json_object_logger = std::make_shared<spdlog::logger>(
      std::string(kJsonObjectLoggerName), logger->sinks().begin(), logger->sinks().end());
  spdlog::set_default_logger(std::move(logger));
  ApplyLogSettings(settings);
}

void LogInfoJsonObject(std::string_view json_object) {
  if (json_object_logger == nullptr) {
    LOG_INFO("{}", json_object);
    return;
  }
  json_object_logger->info("{}", json_object);
}

LogSettings CurrentLogSettings() {
  std::lock_guard lock(settings_mutex);
  return current;
}

void ApplyLogSettings(const LogSettings& settings) {
  std::lock_guard lock(settings_mutex);
  auto logger = spdlog::default_logger();
  if (settings.format == LogFormat::kJson) {
    logger->set_formatter(std::make_unique<JsonFormatter>());
  } else {
    logger->set_pattern(kTextPattern);
  }
  logger->set_level(LevelFor(settings));
  if (json_object_logger != nullptr) json_object_logger->set_level(LevelFor(settings));
  current = settings;
}

std::string_view LogFormatName(LogFormat format) {
  return format == LogFormat::kJson ? "json" : "default";
}

Result<LogFormat> ParseLogFormat(std::string_view name) {
  if (name == "default" || name == "text" || name == "ISO8601") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return InvalidArgument("log format must be 'default' or 'json', got '{}'", name);
}

}  // namespace rampart
