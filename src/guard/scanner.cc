#include "guard/scanner.h"

#include <hs/hs.h>
#include <re2/re2.h>

#include <mutex>
#include <string>

namespace rampart::guard {
namespace {

bool IsAlnum(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

class HyperscanScanner final : public Scanner {
 public:
  HyperscanScanner(hs_database_t* database, hs_scratch_t* prototype)
      : database_(database), prototype_(prototype) {}
  ~HyperscanScanner() override {
    for (hs_scratch_t* scratch : free_) hs_free_scratch(scratch);
    hs_free_scratch(prototype_);
    hs_free_database(database_);
  }

  Status Scan(std::string_view text, MatchCallback callback, void* context) const override {
    hs_scratch_t* scratch = Acquire();
    if (scratch == nullptr) return Internal("hyperscan: cannot allocate scratch space");
    struct Forward {
      MatchCallback callback;
      void* context;
    } forward{callback, context};
    auto on_match = [](unsigned int id, unsigned long long from, unsigned long long to,
                       unsigned int /*flags*/, void* data) -> int {
      auto* f = static_cast<Forward*>(data);
      (void)from;  // 0 without start-of-match tracking
      f->callback(f->context, id, 0, static_cast<size_t>(to));
      return 0;
    };
    // hs_scan takes at most 4 GiB; Detect's max_text_bytes is far below.
    hs_error_t error = hs_scan(database_, text.data(), static_cast<unsigned int>(text.size()), 0,
                               scratch, on_match, &forward);
    Release(scratch);
    if (error != HS_SUCCESS) return Internal("hyperscan: scan failed ({})", error);
    return Status::Ok();
  }
  std::string_view engine() const override { return "hyperscan"; }
  bool reports_all_ends() const override { return true; }

 private:
  // Scratch space is per scan: a free list, cloned from the prototype when empty.
  hs_scratch_t* Acquire() const {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!free_.empty()) {
        hs_scratch_t* scratch = free_.back();
        free_.pop_back();
        return scratch;
      }
    }
    hs_scratch_t* scratch = nullptr;
    if (hs_clone_scratch(prototype_, &scratch) != HS_SUCCESS) return nullptr;
    return scratch;
  }
  void Release(hs_scratch_t* scratch) const {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(scratch);
  }

  hs_database_t* database_;
  hs_scratch_t* prototype_;
  mutable std::mutex mutex_;
  mutable std::vector<hs_scratch_t*> free_;
};

class Re2Scanner final : public Scanner {
 public:
  Re2Scanner(std::vector<std::unique_ptr<RE2>> regexes, std::vector<bool> unbounded)
      : regexes_(std::move(regexes)), unbounded_(std::move(unbounded)) {}

  Status Scan(std::string_view text, MatchCallback callback, void* context) const override {
    for (uint32_t id = 0; id < regexes_.size(); ++id) {
      const RE2& regex = *regexes_[id];
      size_t position = 0;
      re2::StringPiece match;
      while (position < text.size() &&
             regex.Match(text, position, text.size(), RE2::UNANCHORED, &match, 1)) {
        size_t start = static_cast<size_t>(match.data() - text.data());
        size_t end = start + match.size();
        callback(context, id, start, end);
        // Next: the first token boundary after the start (where a character and the one before
        // it are not both letters or digits), so overlapping candidates are still proposed but
        // a long token is not rescanned from every position. An unbounded pattern goes on
        // after its match instead: restarting inside it could rescan it for every boundary.
        if (unbounded_[id] && end > start) {
          position = end;
          continue;
        }
        size_t next = start + 1;
        while (next < text.size() && IsAlnum(text[next]) && IsAlnum(text[next - 1])) ++next;
        position = next;
      }
    }
    return Status::Ok();
  }
  std::string_view engine() const override { return "re2"; }
  bool reports_all_ends() const override { return false; }

 private:
  std::vector<std::unique_ptr<RE2>> regexes_;
  std::vector<bool> unbounded_;
};

}  // namespace

bool HyperscanSupported() { return hs_valid_platform() == HS_SUCCESS; }

Result<std::unique_ptr<Scanner>> CreateHyperscanScanner(const std::vector<Pattern>& patterns) {
  std::vector<const char*> expressions;
  std::vector<unsigned int> flags;
  std::vector<unsigned int> ids;
  for (size_t i = 0; i < patterns.size(); ++i) {
    expressions.push_back(patterns[i].regex.c_str());
    unsigned int f = 0;  // no HS_FLAG_SOM_LEFTMOST: see scanner.h
    if (patterns[i].caseless) f |= HS_FLAG_CASELESS;
    flags.push_back(f);
    ids.push_back(static_cast<unsigned int>(i));
  }
  hs_database_t* database = nullptr;
  hs_compile_error_t* error = nullptr;
  if (hs_compile_multi(expressions.data(), flags.data(), ids.data(),
                       static_cast<unsigned int>(expressions.size()), HS_MODE_BLOCK, nullptr,
                       &database, &error) != HS_SUCCESS) {
    std::string message = error != nullptr && error->message != nullptr ? error->message : "?";
    int expression = error != nullptr ? error->expression : -1;
    hs_free_compile_error(error);
    return InvalidArgument("hyperscan: pattern {} does not compile: {}", expression, message);
  }
  hs_scratch_t* scratch = nullptr;
  if (hs_alloc_scratch(database, &scratch) != HS_SUCCESS) {
    hs_free_database(database);
    return Internal("hyperscan: cannot allocate scratch space");
  }
  return std::unique_ptr<Scanner>(new HyperscanScanner(database, scratch));
}

Result<std::unique_ptr<Scanner>> CreateRe2Scanner(const std::vector<Pattern>& patterns) {
  std::vector<std::unique_ptr<RE2>> regexes;
  std::vector<bool> unbounded;
  for (const Pattern& pattern : patterns) {
    unbounded.push_back(pattern.unbounded);
    RE2::Options options;
    options.set_longest_match(true);
    options.set_case_sensitive(!pattern.caseless);
    options.set_log_errors(false);
    options.set_encoding(RE2::Options::EncodingLatin1);  // bytes, as Hyperscan reads them
    auto regex = std::make_unique<RE2>(pattern.regex, options);
    if (!regex->ok()) {
      return InvalidArgument("re2: pattern '{}' does not compile: {}", pattern.regex,
                             regex->error());
    }
    regexes.push_back(std::move(regex));
  }
  return std::unique_ptr<Scanner>(new Re2Scanner(std::move(regexes), std::move(unbounded)));
}

}  // namespace rampart::guard
