#include "guard/detector.h"

#include <simdjson.h>

#include <algorithm>
#include <map>

#include "guard/candidates.h"
#include "guard/context.h"
#include "guard/normalize.h"
#include "guard/patterns.h"
#include "guard/scanner.h"
#include "guard/starts.h"

namespace rampart::guard {
namespace {

struct TypeBound {
  std::string_view type;
  size_t max_bytes;  // the table and its reasons: candidates.h
};
constexpr TypeBound kBounds[] = {
    {kCnResidentId, 54},       {kCnMobile, 54},      {kPaymentCard, 111}, {kCnUscc, 54},
    {kCnPassport, 27},         {kEmailAddress, 762}, {kPhoneNumber, 120}, {kIpAddress, 135},
    {kMacAddress, 51},         {kIbanCode, 126},     {kUsSsn, 33},        {kSecret, 8192},
    {kInternalEndpoint, 1024},
};

// What the scan's callback fills: validated candidates, in normalised offsets, and the ends of
// the key assignments' keys (their values are read after the scan).
struct ScanState {
  const std::vector<Pattern>* patterns;
  std::string_view text;
  bool all_ends;
  std::vector<Candidate> candidates;
  std::vector<size_t> key_ends;
};

void OnMatch(void* context, uint32_t id, size_t start, size_t end) {
  auto* state = static_cast<ScanState*>(context);
  const Pattern& pattern = (*state->patterns)[id];
  if (pattern.shape == Shape::kKeyAssignment) {
    state->key_ends.push_back(end);
    return;
  }
  if (state->all_ends) {
    // Hyperscan: every end, no start. Most ends are inside a longer run; the rest get the start
    // leftmost-start tracking would have given.
    if (!EndMayClose(pattern.shape, state->text, end)) return;
    start = LeftmostStart(pattern, state->text, end);
    if (start == kNoStart) return;
  }
  Candidate candidate;
  if (!ValidateMatch(pattern.shape, state->text, start, end, state->all_ends, &candidate)) {
    return;
  }
  // Hyperscan proposes the same span again for every pattern shape that covers it.
  if (!state->candidates.empty()) {
    const Candidate& last = state->candidates.back();
    if (last.type == candidate.type && last.start == candidate.start && last.end == candidate.end) {
      return;
    }
  }
  state->candidates.push_back(candidate);
}

class DetectorImpl final : public Detector {
 public:
  DetectorImpl(DetectorOptions options, std::vector<Pattern> patterns,
               std::unique_ptr<Scanner> scanner)
      : options_(std::move(options)),
        patterns_(std::move(patterns)),
        scanner_(std::move(scanner)) {}

  Result<std::vector<Entity>> Detect(std::string_view text,
                                     const std::vector<std::string_view>& types) const override {
    if (text.size() > options_.max_text_bytes) {
      return InvalidArgument("text of {} bytes is over the limit of {}", text.size(),
                             options_.max_text_bytes);
    }
    if (!IsValidUtf8(text)) {
      return InvalidArgument("text is not valid UTF-8");
    }
    NormalizedText normalized(text);
    ScanState state{&patterns_, normalized.text(), scanner_->reports_all_ends(), {}, {}};
    RETURN_IF_ERROR(scanner_->Scan(normalized.text(), &OnMatch, &state));
    AddKeyAssignments(normalized.text(), &state.key_ends, &state.candidates);

    // Back to original offsets; context words; the length bound.
    std::vector<Entity> found;
    found.reserve(state.candidates.size());
    for (const Candidate& c : state.candidates) {
      Entity entity{c.type, normalized.ToOriginal(c.start), normalized.ToOriginal(c.end), c.score};
      if (entity.end - entity.start > MaxEntityBytes(entity.type)) continue;
      bool context = HasContextWord(c.type, text, entity.start, entity.end);
      if (c.requires_context && !context) continue;
      if (context) entity.score = std::min(1.0, entity.score + (c.score < 0.8 ? 0.25 : 0.1));
      found.push_back(entity);
    }
    std::vector<Entity> chosen = ResolveOverlaps(std::move(found));
    if (!types.empty()) {
      std::erase_if(chosen, [&types](const Entity& e) {
        return std::find(types.begin(), types.end(), e.type) == types.end();
      });
    }
    return chosen;
  }

  size_t max_entity_bytes() const override {
    size_t bound = 0;
    for (const auto& entry : kBounds) bound = std::max(bound, entry.max_bytes);
    return bound;
  }
  std::string_view engine() const override { return scanner_->engine(); }

 private:
  // Each span once: the most specific type first, then the longest, then the earliest; a
  // candidate overlapping one already chosen is dropped. Sorted by start. Candidates that
  // overlap nothing (most of them) are kept as they are; the rule runs within each cluster of
  // overlapping candidates, which gives what it gives over all of them at once (a candidate is
  // only ever dropped for one that overlaps it).
  static std::vector<Entity> ResolveOverlaps(std::vector<Entity> found) {
    std::sort(found.begin(), found.end(), [](const Entity& a, const Entity& b) {
      return a.start != b.start ? a.start < b.start : a.end < b.end;
    });
    std::vector<Entity> chosen;
    chosen.reserve(found.size());
    std::vector<Ranked> cluster;
    for (size_t first = 0; first < found.size();) {
      size_t last = first + 1;
      size_t reach = found[first].end;
      while (last < found.size() && found[last].start < reach) {
        reach = std::max(reach, found[last].end);
        ++last;
      }
      if (last == first + 1) {
        chosen.push_back(found[first]);
      } else {
        cluster.clear();
        for (size_t i = first; i < last; ++i) {
          cluster.push_back({Specificity(found[i].type), &found[i]});
        }
        ChooseInCluster(&cluster, &chosen);
      }
      first = last;
    }
    return chosen;
  }

  struct Ranked {
    int specificity;
    const Entity* entity;
  };

  // Appends the chosen entities of one cluster, sorted by start.
  static void ChooseInCluster(std::vector<Ranked>* cluster, std::vector<Entity>* chosen) {
    std::sort(cluster->begin(), cluster->end(), [](const Ranked& a, const Ranked& b) {
      if (a.specificity != b.specificity) return a.specificity < b.specificity;
      size_t la = a.entity->end - a.entity->start, lb = b.entity->end - b.entity->start;
      if (la != lb) return la > lb;
      return a.entity->start < b.entity->start;
    });
    std::map<size_t, size_t> taken;  // start -> end, not overlapping
    size_t from = chosen->size();
    for (const Ranked& ranked : *cluster) {
      const Entity& e = *ranked.entity;
      auto next = taken.lower_bound(e.start);
      if (next != taken.end() && next->first < e.end) continue;
      if (next != taken.begin() && std::prev(next)->second > e.start) continue;
      taken.emplace(e.start, e.end);
      chosen->push_back(e);
    }
    std::sort(chosen->begin() + static_cast<std::ptrdiff_t>(from), chosen->end(),
              [](const Entity& a, const Entity& b) { return a.start < b.start; });
  }

  DetectorOptions options_;
  std::vector<Pattern> patterns_;
  std::unique_ptr<Scanner> scanner_;
};

}  // namespace

bool IsValidUtf8(std::string_view text) {
  return simdjson::validate_utf8(text.data(), text.size());
}

const std::vector<std::string_view>& AllEntityTypes() {
  static const std::vector<std::string_view> types = {
      kCnResidentId, kCnMobile,    kPaymentCard,     kCnUscc,     kCnPassport,
      kEmailAddress, kPhoneNumber, kIpAddress,       kMacAddress, kIbanCode,
      kUsSsn,        kSecret,      kInternalEndpoint};
  return types;
}

size_t MaxEntityBytes(std::string_view type) {
  // The detector passes the type constants themselves: compare their addresses first.
  for (const auto& entry : kBounds) {
    if (entry.type.data() == type.data() && entry.type.size() == type.size()) {
      return entry.max_bytes;
    }
  }
  for (const auto& entry : kBounds) {
    if (entry.type == type) return entry.max_bytes;
  }
  return 0;
}

Result<std::unique_ptr<Detector>> Detector::Create(DetectorOptions options) {
  if (options.max_text_bytes == 0) return InvalidArgument("max_text_bytes must be positive");
  if (options.max_text_bytes > (1u << 31)) {
    return InvalidArgument("max_text_bytes {} is over 2 GiB", options.max_text_bytes);
  }
  ASSIGN_OR_RETURN(std::vector<Pattern> patterns, BuildPatterns(options));
  std::unique_ptr<Scanner> scanner;
  if (!options.force_re2 && HyperscanSupported()) {
    ASSIGN_OR_RETURN(scanner, CreateHyperscanScanner(patterns));
  } else {
    ASSIGN_OR_RETURN(scanner, CreateRe2Scanner(patterns));
  }
  return std::unique_ptr<Detector>(
      new DetectorImpl(std::move(options), std::move(patterns), std::move(scanner)));
}

}  // namespace rampart::guard
