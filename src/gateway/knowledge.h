#pragma once

// Answers with citations (docs/knowledge-hub.md, "Answers with citations"): the pieces a
// GatewayCall uses when its RoutePlan has a KnowledgePlan (a `kb:<vector_store_id>` model, or a
// route with `knowledge`).
//
//   - the search: the last user message is the query; VectorStores::Search runs on the gateway's
//     knowledge workers (never on an I/O thread) as the caller's tenant, with may_read asking the
//     caller's policy for `files:read` on each candidate file (KnowledgeMayRead), so a file the
//     caller may not open never reaches the prompt, the citations or search_results;
//   - the prompt: a system message with the numbered sources ("[1] <filename> > <heading path>:
//     <passage>") and the instruction to cite them as [n] and to say it does not know when they
//     do not answer, put before the caller's messages (KnowledgeRequestBody);
//   - the answer: the chat target's, with Perplexity's `citations` (one string per source, in
//     the order of the [n] markers) and `search_results` ([{title, url, date, snippet}]) added
//     to the whole answer, or to the chunk of a stream that carries finish_reason (the last
//     chunk, where Perplexity puts them), or to a closing chunk when no chunk carried one;
//   - no passage at or above the score threshold: a fixed answer (kNoSourceAnswer) with empty
//     citations, without calling any model.
//
// Everything here is a pure function of its arguments; thread-safe.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "identity/identity.h"
#include "knowledge/hub/vector_stores.h"
#include "policy/access.h"

namespace rampart::gateway {

// What a knowledge answer says when no passage of the store answers the question.
inline constexpr std::string_view kNoSourceAnswer =
    "No source in the knowledge base answers this question, so I cannot answer it from the "
    "knowledge base.";

// The passages one answer draws on, numbered [1], [2], ... in this order.
struct KnowledgeSources {
  std::string vector_store;
  std::vector<knowledge::hub::SearchHit> hits;
};

// "rampart://vector_stores/<vs>/files/<file>#chunk-<n>": a source's search_results url, and its
// entry in `citations`.
std::string KnowledgeSourceUrl(std::string_view vector_store, const knowledge::hub::SearchHit& hit);

// The system message: the instruction, then one line per source, "[n] <filename> > <heading
// path>: <passage>" (without " > ..." when the passage has no heading).
std::string KnowledgePrompt(const KnowledgeSources& sources);

// `body` (a chat completion request) with `system_prompt` as a system message put before its
// messages; every other field as it was. Errors: InvalidArgument when `body` is not an object
// with a `messages` array.
Result<std::string> KnowledgeRequestBody(std::string_view body, std::string_view system_prompt);

// `object` (a whole answer or one stream chunk, a JSON object) with `citations` and
// `search_results` for `sources` added (replacing any it had). Errors: InvalidArgument when
// `object` is not a JSON object.
Result<std::string> WithCitations(std::string_view object, const KnowledgeSources& sources);

// A closing stream chunk carrying only the citations ("choices": []), for a stream that ended
// without a chunk with finish_reason.
std::string CitationsChunk(std::string_view id, std::string_view model, int64_t created,
                           const KnowledgeSources& sources);

// The answer when no passage answers: a whole chat completion (usage all 0, empty citations),
// or the data of a stream's events before [DONE]: the message, the finish chunk with the empty
// citations, and a usage chunk when `include_usage`.
std::string NoSourceAnswer(std::string_view id, std::string_view model, int64_t created);
std::vector<std::string> NoSourceStream(std::string_view id, std::string_view model,
                                        int64_t created, bool include_usage);

// SearchRequest::may_read for `caller`: whether `access` permits `files:read` on the resource
// {type "file", name <file id>, the file's attributes (numbers and booleans as text)}. Null when
// `access` is null or open (every file). The function copies what it needs; it may outlive its
// arguments.
std::function<bool(const knowledge::hub::VectorStoreFileInfo&)> KnowledgeMayRead(
    const policy::AccessControl* access, const identity::Identity& caller,
    std::string_view source_address);

}  // namespace rampart::gateway
