#pragma once

// Logging: spdlog underneath, configured once at start-up by the app. Everything logs through
// the default logger, so LOG_* is safe from any thread. Logs go to stderr; stdout is kept for
// the few machine-readable lines the app prints (listening addresses).

#include <spdlog/spdlog.h>

namespace rampart {

// verbose > 0 enables debug logging.
void ConfigureLogging(int verbose);

}  // namespace rampart

#define LOG_DEBUG(...) ::spdlog::debug(__VA_ARGS__)
#define LOG_INFO(...) ::spdlog::info(__VA_ARGS__)
#define LOG_WARN(...) ::spdlog::warn(__VA_ARGS__)
#define LOG_ERROR(...) ::spdlog::error(__VA_ARGS__)
