#pragma once

// An in-memory BM25 index over chunks: term -> postings (chunk, term frequency), chunk lengths,
// and Okapi BM25 ranking.
//
// Scoring, for a query's distinct terms t (analysed like the chunks, analyzer.h):
//   score(d) = sum_t idf(t) * tf(t,d) * (k1 + 1) / (tf(t,d) + k1 * (1 - b + b * |d| / avgdl))
//   idf(t)   = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))      (Lucene's, never negative)
// with N the live chunks, df(t) the live chunks holding t, |d| the chunk's term count and avgdl
// the mean over live chunks; k1 = 1.2 and b = 0.75 unless configured.
//
// Normalised score (for score_threshold): score / sum_t idf(t) * (k1 + 1), the query's maximum
// attainable score (tf -> infinity saturates each term at idf * (k1 + 1)). It lies in [0, 1),
// does not depend on the other results, and reads as "the fraction of the ideal match": a chunk
// with every query term once, at average length, scores 1 / (k1 + 1) ~ 0.45.
//
// Removal takes a chunk out of N, df, avgdl and every result at once (postings are filtered by
// a live flag, then compacted when a quarter of them are dead); a removed chunk is never found.
// The allowed-set predicate runs inside the search, on each candidate before it is ranked, so a
// chunk the caller may not see never takes a place in the top k, and its score is not returned.
//
// Thread safety: many readers, one writer. Search, size and the statistics take a shared lock;
// Add and Remove an exclusive one (Add analyses the text before taking it). The predicate is
// called under the shared lock and must not call back into the index. Each searching thread keeps
// a scratch array of 9 bytes per chunk slot of the largest index it searched (reused, never
// shrunk), so a search costs its postings rather than an allocation the size of the index.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "knowledge/hub/analyzer.h"

namespace rampart::knowledge::hub {

using ChunkId = uint64_t;

struct Bm25Options {
  double k1 = 1.2;
  double b = 0.75;
};

struct Bm25SearchOptions {
  size_t top_k = 10;
  double score_threshold = 0;  // on the normalised score, 0..1
  // When set, only chunks for which it returns true are ranked.
  std::function<bool(ChunkId)> allowed;
};

struct Bm25Hit {
  ChunkId id = 0;
  double score = 0;      // normalised, 0..1
  double raw_score = 0;  // BM25 as above
};

// A chunk as the index holds it: its length (terms counted with repeats) and its distinct terms'
// ids (into Bm25Contents::terms), ascending, each with its frequency.
struct Bm25Chunk {
  uint32_t length = 0;
  std::vector<std::pair<uint32_t, uint32_t>> terms;
};

// The index's contents, to be kept and loaded without analysing the texts again (the vector
// stores' snapshots): every term by id, and the live chunks.
struct Bm25Contents {
  std::vector<std::string> terms;
  std::unordered_map<ChunkId, Bm25Chunk> chunks;
};

class Bm25Index {
 public:
  // InvalidArgument unless k1 >= 0 and 0 <= b <= 1.
  static Result<std::unique_ptr<Bm25Index>> Create(std::shared_ptr<const Analyzer> analyzer,
                                                   const Bm25Options& options = {});

  // Indexes `text` under `id`; AlreadyExists when `id` is indexed (remove it first).
  Status Add(ChunkId id, std::string_view text);
  // The same with terms analysed already.
  Status AddTerms(ChunkId id, const std::vector<std::string>& terms);
  // True when `id` was indexed.
  bool Remove(ChunkId id);

  // A copy of the contents (under the shared lock).
  Bm25Contents Export() const;
  // An index holding `contents` as Export gave them (searches then answer as the exported
  // index's did). InvalidArgument for a term listed twice, a term id out of range, terms not
  // ascending, a zero frequency or a length other than the frequencies' sum.
  static Result<std::unique_ptr<Bm25Index>> Import(std::shared_ptr<const Analyzer> analyzer,
                                                   Bm25Contents contents,
                                                   const Bm25Options& options = {});

  // The best `top_k` chunks for `query`, best first (ties: the smaller id first), with a
  // normalised score >= score_threshold and > 0.
  Result<std::vector<Bm25Hit>> Search(std::string_view query,
                                      const Bm25SearchOptions& options = {}) const;

  size_t size() const;  // live chunks
  size_t term_count() const;
  double average_length() const;

 private:
  struct Posting {
    uint32_t document;  // index into documents_
    uint32_t frequency;
  };
  struct Document {
    ChunkId id = 0;
    uint32_t length = 0;
    bool live = true;
    std::vector<std::pair<uint32_t, uint32_t>> terms;  // (term, frequency), for removal
  };

  Bm25Index(std::shared_ptr<const Analyzer> analyzer, const Bm25Options& options)
      : analyzer_(std::move(analyzer)), options_(options) {}
  void CompactLocked();

  std::shared_ptr<const Analyzer> analyzer_;
  Bm25Options options_;
  mutable std::shared_mutex mutex_;
  std::unordered_map<std::string, uint32_t> term_ids_;
  std::vector<std::vector<Posting>> postings_;  // by term id
  std::vector<uint32_t> document_frequency_;    // live chunks per term id
  std::vector<Document> documents_;
  // documents_[i].length, or kRemoved: what the scoring loop reads, kept dense for the cache.
  static constexpr uint32_t kRemoved = UINT32_MAX;
  std::vector<uint32_t> lengths_;
  std::unordered_map<ChunkId, uint32_t> document_index_;  // live chunks only
  uint64_t total_length_ = 0;                             // over live chunks
  size_t live_postings_ = 0;
  size_t dead_postings_ = 0;
};

}  // namespace rampart::knowledge::hub
