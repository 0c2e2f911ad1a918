#pragma once

// Logging: spdlog underneath, configured once at start-up and adjustable at run time (Triton's
// logging extension). Everything logs through the default logger, so LOG_* is safe from any
// thread. Logs go to stderr; stdout is kept for the few machine-readable lines the app prints.

#include <spdlog/spdlog.h>

#include <string>

#include "core/status.h"

namespace rampart {

enum class LogFormat {
  kText,  // "2026-11-29T18:40:55.843 I [thread] message"
  kJson,  // one JSON object per line: {"time","level","thread","message"}; message is a string,
          // or an object for LogInfoJsonObject's lines
};

// What Triton's /v2/logging reports and accepts.
struct LogSettings {
  bool info = true;
  bool warning = true;
  bool error = true;
  int verbose_level = 0;  // > 0 enables debug messages
  LogFormat format = LogFormat::kText;
};

// Call once at start-up, before other threads log.
void ConfigureLogging(const LogSettings& settings);
LogSettings CurrentLogSettings();
// Applies new settings to the running logger. Thread-safe.
void ApplyLogSettings(const LogSettings& settings);

// Logs at info level a message that is one JSON object already (`json_object`, e.g. written by
// json::Writer; the caller guarantees it is valid JSON). In LogFormat::kJson the line's "message"
// is that object itself, not a string holding it; in text the object is the message as is.
// Thread-safe. Before ConfigureLogging (unit tests) it logs as LOG_INFO would.
void LogInfoJsonObject(std::string_view json_object);

std::string_view LogFormatName(LogFormat format);  // "default" | "json"
Result<LogFormat> ParseLogFormat(std::string_view name);

}  // namespace rampart

#define LOG_DEBUG(...) ::spdlog::debug(__VA_ARGS__)
#define LOG_INFO(...) ::spdlog::info(__VA_ARGS__)
#define LOG_WARN(...) ::spdlog::warn(__VA_ARGS__)
#define LOG_ERROR(...) ::spdlog::error(__VA_ARGS__)
