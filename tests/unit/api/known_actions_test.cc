// Every action a front end asks the policy engine about is one it knows (policy::KnownActions),
// or no policy could name it: a rule naming it would be refused at load as a misspelling, and
// the action would be denied to everyone.

#include <gtest/gtest.h>

#include <google/protobuf/descriptor.h>

#include <algorithm>
#include <string>
#include <vector>

#include "api/admin_http.h"
#include "api/files_http.h"
#include "api/grpc_service.grpc.pb.h"
#include "api/guard_http.h"
#include "api/kserve_grpc_access.h"
#include "api/kserve_http.h"
#include "api/openai_http.h"
#include "api/pinecone_http.h"
#include "api/vector_stores_http.h"
#include "policy/policy.h"

namespace rampart::api {
namespace {

bool Known(std::string_view action) {
  const std::vector<std::string_view>& known = policy::KnownActions();
  return std::find(known.begin(), known.end(), action) != known.end();
}

TEST(KnownActionsTest, EveryFrontEndsActionIsKnownToThePolicyEngine) {
  std::vector<std::string_view> grpc;
  for (const grpc_access::RpcAction& entry : grpc_access::RpcActions()) {
    grpc.push_back(entry.action);
  }
  const std::pair<std::string_view, std::vector<std::string_view>> front_ends[] = {
      {"KServe HTTP", KServeHttp::Actions()}, {"KServe gRPC", grpc},
      {"OpenAI", OpenAiHttp::Actions()},      {"guard", GuardHttp::Actions()},
      {"admin", AdminHttp::Actions()},        {"Pinecone", PineconeHttp::Actions()},
      {"files", FilesHttp::Actions()},        {"vector stores", VectorStoresHttp::Actions()},
  };
  for (const auto& [front_end, actions] : front_ends) {
    EXPECT_FALSE(actions.empty()) << front_end;
    for (std::string_view action : actions) {
      EXPECT_TRUE(Known(action)) << front_end << " decides '" << action
                                 << "', which policy::KnownActions() lacks";
    }
  }
  // The tables are the ones the front ends use: a few spot checks that they are filled in.
  const std::vector<std::string_view> http = KServeHttp::Actions();
  for (std::string_view action : {"model:infer", "model:load", "repository:read", "server:write"}) {
    EXPECT_NE(std::find(http.begin(), http.end(), action), http.end()) << action;
  }
  const std::vector<std::string_view> openai = OpenAiHttp::Actions();
  for (std::string_view action :
       {"chat:create", "models:read", "guard:restore", "admin:keys:write"}) {
    EXPECT_NE(std::find(openai.begin(), openai.end(), action), openai.end()) << action;
  }
}

// Every RPC of GRPCInferenceService but the probes is decided, as its table says.
TEST(KnownActionsTest, EveryRpcButTheProbesHasAnAction) {
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          inference::GRPCInferenceService::service_full_name());
  ASSERT_NE(service, nullptr);
  std::vector<std::string> decided;
  for (int i = 0; i < service->method_count(); ++i) {
    const std::string name(service->method(i)->name());
    if (name == "ServerLive" || name == "ServerReady") continue;
    decided.push_back(name);
    EXPECT_EQ(grpc_access::RpcActionOf(name).method, name);
  }
  EXPECT_EQ(decided.size(), grpc_access::RpcActions().size());
}

}  // namespace
}  // namespace rampart::api
