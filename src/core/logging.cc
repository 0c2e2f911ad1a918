#include "core/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace rampart {

void ConfigureLogging(int verbose) {
  auto logger = spdlog::stderr_color_mt("rampart");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%L%$ [%t] %v");
  logger->set_level(verbose > 0 ? spdlog::level::debug : spdlog::level::info);
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace rampart
