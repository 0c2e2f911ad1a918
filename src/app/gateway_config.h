#pragma once

// The gateway's configuration as an operator writes it: the `gateway:` section of the YAML
// config file (docs/gateway.md), and the quick-start --upstream flags, whose models are read
// from each upstream's /v1/models.

#include <string>
#include <vector>

#include "core/status.h"
#include "gateway/config.h"

namespace rampart::app {

// Reads the `gateway:` section of `path` (an empty config when the file has none, or `path` is
// empty). Unknown keys are errors naming the key and its line. Does not Validate.
Result<gateway::GatewayConfig> LoadGatewayConfig(const std::string& path);

// Adds each of `urls` as an OpenAI-compatible upstream ("upstream-1", ...) and makes every
// model its GET /models lists routable under its own name; upstreams listing the same name form
// one pool. Names a config already gives a model are left to it. An upstream that cannot be
// read is logged and added without models (a reload reads it again). Blocks for up to
// `timeout` per upstream.
Status AddFlagUpstreams(const std::vector<std::string>& urls, const std::string& api_key,
                        gateway::GatewayConfig& config,
                        std::chrono::milliseconds timeout = std::chrono::seconds(5));

}  // namespace rampart::app
