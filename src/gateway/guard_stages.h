#pragma once

// The PII guard in the gateway (docs/guard.md, "In the gateway"): the guard_input and
// guard_output stages, under the policy of the call's route (GuardPolicyFor).
//
// guard_input reads every text of the request a model would see: each message's content (a
// string, or the text of its parts) whatever its role, tool call arguments (and the legacy
// function_call's), a completion's prompt, an embedding's input. guard_output reads an answer's
// message content, reasoning_content, tool call arguments and completion text; in a stream, each
// event's delta goes through a StreamRedactor per choice and field, the event is rewritten with
// the text released, and what is still held at the end goes out in one more event per field
// before [DONE]. A blocked type refuses the call: 400 naming the types (never the values) for a
// request or a whole answer, an error event for a stream. Counts by type go to
// rampart_guard_entities_total and to the call's GuardFindings (the access log).

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/config.h"
#include "gateway/metrics.h"
#include "gateway/stage.h"
#include "guard/detector.h"
#include "guard/keys.h"
#include "guard/operators.h"

namespace rampart::gateway {

// Makes the Detector (guard::Detector::Create, or a test's own).
using DetectorFactory =
    std::function<Result<std::unique_ptr<guard::Detector>>(guard::DetectorOptions)>;

// The guard as calls use it: built with each Runtime, kept by the calls that began under it.
struct GuardRuntime {
  std::shared_ptr<const guard::Detector> detector;  // null when the gateway has none
  std::shared_ptr<const guard::GuardKeys> keys;
  guard::TenantKeys tenant_keys;          // keys->ForTenant(kDefaultTenant), made once
  const GatewayConfig* config = nullptr;  // the Runtime's

  // The keys of `tenant`'s hashes and tokens: the caller's tenant, so that one tenant's tokens
  // never restore for another. Empty (access open, no identity) is the default tenant.
  guard::TenantKeys KeysFor(std::string_view tenant) const {
    if (tenant.empty() || tenant == guard::kDefaultTenant) return tenant_keys;
    return keys->ForTenant(tenant);
  }

  const GuardPolicy& PolicyFor(std::string_view route) const {
    return GuardPolicyFor(*config, route);
  }
};

// Which operator each type gets in `direction` of `policy`: the policy's per-type operators and
// its block list over the mode's choice. REQUIRES: mode is neither kOff nor kDetect.
guard::OperatorChoice OperatorsFor(const GuardPolicy& policy, GuardMode mode);

// The types a policy detects, as the Detector takes them (static names).
std::vector<std::string_view> TypesOf(const GuardPolicy& policy);

std::unique_ptr<Stage> MakeGuardInputStage(GatewayMetrics& metrics);
std::unique_ptr<Stage> MakeGuardOutputStage(GatewayMetrics& metrics);

}  // namespace rampart::gateway
