#include "knowledge/hub/bm25.h"

#include <algorithm>
#include <cmath>
#include <mutex>

namespace rampart::knowledge::hub {

Result<std::unique_ptr<Bm25Index>> Bm25Index::Create(std::shared_ptr<const Analyzer> analyzer,
                                                     const Bm25Options& options) {
  if (analyzer == nullptr) return InvalidArgument("BM25 index: no analyser");
  if (!(options.k1 >= 0) || !(options.b >= 0 && options.b <= 1)) {
    return InvalidArgument("BM25 needs k1 >= 0 and 0 <= b <= 1, got k1 {} and b {}", options.k1,
                           options.b);
  }
  return std::unique_ptr<Bm25Index>(new Bm25Index(std::move(analyzer), options));
}

Status Bm25Index::Add(ChunkId id, std::string_view text) {
  ASSIGN_OR_RETURN(std::vector<std::string> terms, analyzer_->Analyze(text));
  return AddTerms(id, terms);
}

Status Bm25Index::AddTerms(ChunkId id, const std::vector<std::string>& terms) {
  std::unique_lock lock(mutex_);
  if (document_index_.contains(id)) return AlreadyExists("chunk {} is indexed already", id);
  if (documents_.size() >= UINT32_MAX) return ResourceExhausted("the BM25 index is full");
  auto document = static_cast<uint32_t>(documents_.size());
  Document entry;
  entry.id = id;
  entry.length = static_cast<uint32_t>(terms.size());
  std::unordered_map<uint32_t, uint32_t> frequencies;
  for (const std::string& term : terms) {
    auto [it, inserted] = term_ids_.try_emplace(term, static_cast<uint32_t>(postings_.size()));
    if (inserted) {
      postings_.emplace_back();
      document_frequency_.push_back(0);
    }
    ++frequencies[it->second];
  }
  entry.terms.assign(frequencies.begin(), frequencies.end());
  std::sort(entry.terms.begin(), entry.terms.end());
  for (auto [term, frequency] : entry.terms) {
    postings_[term].push_back({document, frequency});
    ++document_frequency_[term];
  }
  live_postings_ += entry.terms.size();
  total_length_ += entry.length;
  lengths_.push_back(entry.length);
  documents_.push_back(std::move(entry));
  document_index_.emplace(id, document);
  return Status::Ok();
}

Bm25Contents Bm25Index::Export() const {
  std::shared_lock lock(mutex_);
  Bm25Contents contents;
  contents.terms.resize(postings_.size());
  for (const auto& [term, id] : term_ids_) contents.terms[id] = term;
  contents.chunks.reserve(document_index_.size());
  for (const Document& document : documents_) {
    if (document.live)
      contents.chunks.emplace(document.id, Bm25Chunk{document.length, document.terms});
  }
  return contents;
}

Result<std::unique_ptr<Bm25Index>> Bm25Index::Import(std::shared_ptr<const Analyzer> analyzer,
                                                     Bm25Contents contents,
                                                     const Bm25Options& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<Bm25Index> index, Create(std::move(analyzer), options));
  if (contents.terms.size() >= UINT32_MAX || contents.chunks.size() >= UINT32_MAX) {
    return InvalidArgument("BM25 contents too large");
  }
  const auto term_count = static_cast<uint32_t>(contents.terms.size());
  index->term_ids_.reserve(term_count);
  for (uint32_t id = 0; id < term_count; ++id) {
    if (!index->term_ids_.emplace(std::move(contents.terms[id]), id).second) {
      return InvalidArgument("BM25 term {} is listed twice", id);
    }
  }
  index->postings_.resize(term_count);
  index->document_frequency_.resize(term_count, 0);
  index->documents_.reserve(contents.chunks.size());
  index->lengths_.reserve(contents.chunks.size());
  index->document_index_.reserve(contents.chunks.size());
  for (auto& [id, chunk] : contents.chunks) {
    uint64_t sum = 0;
    uint32_t previous = 0;
    for (size_t i = 0; i < chunk.terms.size(); ++i) {
      const auto [term, frequency] = chunk.terms[i];
      if (term >= term_count || frequency == 0 || (i > 0 && term <= previous)) {
        return InvalidArgument("chunk {}: bad BM25 term {} (frequency {})", id, term, frequency);
      }
      previous = term;
      sum += frequency;
    }
    if (sum != chunk.length) {
      return InvalidArgument("chunk {}: BM25 length {} is not its {} terms", id, chunk.length, sum);
    }
    const auto document = static_cast<uint32_t>(index->documents_.size());
    for (const auto& [term, frequency] : chunk.terms) {
      index->postings_[term].push_back({document, frequency});
      ++index->document_frequency_[term];
    }
    index->live_postings_ += chunk.terms.size();
    index->total_length_ += chunk.length;
    index->lengths_.push_back(chunk.length);
    index->documents_.push_back(Document{id, chunk.length, true, std::move(chunk.terms)});
    index->document_index_.emplace(id, document);
  }
  return index;
}

bool Bm25Index::Remove(ChunkId id) {
  std::unique_lock lock(mutex_);
  auto it = document_index_.find(id);
  if (it == document_index_.end()) return false;
  Document& document = documents_[it->second];
  document.live = false;
  lengths_[it->second] = kRemoved;
  for (auto [term, frequency] : document.terms) --document_frequency_[term];
  total_length_ -= document.length;
  live_postings_ -= document.terms.size();
  dead_postings_ += document.terms.size();
  document_index_.erase(it);
  if (dead_postings_ > 1024 && dead_postings_ * 3 > live_postings_) CompactLocked();
  return true;
}

void Bm25Index::CompactLocked() {
  std::vector<Document> live;
  live.reserve(document_index_.size());
  for (Document& document : documents_) {
    if (document.live) live.push_back(std::move(document));
  }
  documents_ = std::move(live);
  lengths_.clear();
  for (const Document& document : documents_) lengths_.push_back(document.length);
  for (std::vector<Posting>& postings : postings_) postings.clear();
  document_index_.clear();
  for (uint32_t index = 0; index < documents_.size(); ++index) {
    document_index_.emplace(documents_[index].id, index);
    for (auto [term, frequency] : documents_[index].terms) {
      postings_[term].push_back({index, frequency});
    }
  }
  // Terms no live chunk holds keep their id (an empty list); they are few and cheap.
  dead_postings_ = 0;
}

Result<std::vector<Bm25Hit>> Bm25Index::Search(std::string_view query,
                                               const Bm25SearchOptions& options) const {
  ASSIGN_OR_RETURN(std::vector<std::string> terms, analyzer_->Analyze(query));
  std::sort(terms.begin(), terms.end());
  terms.erase(std::unique(terms.begin(), terms.end()), terms.end());

  std::shared_lock lock(mutex_);
  std::vector<Bm25Hit> hits;
  size_t live = document_index_.size();
  if (live == 0 || options.top_k == 0) return hits;
  double average = static_cast<double>(total_length_) / static_cast<double>(live);
  if (average <= 0) average = 1;
  const double k1 = options_.k1;
  const double b = options_.b;

  // Per-thread scratch, sized to the documents and all zero between searches (only the entries
  // a search touched are reset), so a search costs its postings, not the index size.
  struct Scratch {
    std::vector<double> scores;
    std::vector<uint8_t> state;  // 0 not seen, 1 scored, 2 not allowed
    std::vector<uint32_t> touched;
    std::vector<uint32_t> rejected;
  };
  thread_local Scratch scratch;
  if (scratch.scores.size() < documents_.size()) {
    scratch.scores.resize(documents_.size(), 0.0);
    scratch.state.resize(documents_.size(), 0);
  }
  std::vector<double>& scores = scratch.scores;
  std::vector<uint8_t>& state = scratch.state;
  std::vector<uint32_t>& touched = scratch.touched;
  std::vector<uint32_t>& rejected = scratch.rejected;
  struct Reset {
    Scratch& scratch;
    ~Reset() {
      for (uint32_t index : scratch.touched) {
        scratch.scores[index] = 0;
        scratch.state[index] = 0;
      }
      for (uint32_t index : scratch.rejected) scratch.state[index] = 0;
      scratch.touched.clear();
      scratch.rejected.clear();
    }
  } reset{scratch};
  double maximum = 0;
  for (const std::string& term : terms) {
    auto found = term_ids_.find(term);
    if (found == term_ids_.end()) continue;
    uint32_t df = document_frequency_[found->second];
    if (df == 0) continue;
    double idf = std::log(1.0 + (static_cast<double>(live) - df + 0.5) / (df + 0.5));
    maximum += idf * (k1 + 1);
    for (const Posting& posting : postings_[found->second]) {
      uint32_t length = lengths_[posting.document];
      if (length == kRemoved) continue;
      uint8_t& seen = state[posting.document];
      if (seen == 2) continue;
      if (seen == 0) {
        if (options.allowed && !options.allowed(documents_[posting.document].id)) {
          seen = 2;
          rejected.push_back(posting.document);
          continue;
        }
        seen = 1;
        touched.push_back(posting.document);
      }
      double tf = posting.frequency;
      scores[posting.document] += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / average));
    }
  }
  if (maximum <= 0) return hits;
  // The best top_k in a heap whose top is the worst kept hit: O(candidates * log k), no copy
  // of every candidate.
  auto better = [](const Bm25Hit& x, const Bm25Hit& y) {
    return x.raw_score != y.raw_score ? x.raw_score > y.raw_score : x.id < y.id;
  };
  double minimum = options.score_threshold * maximum;
  hits.reserve(std::min(options.top_k, touched.size()));
  for (uint32_t index : touched) {
    double score = scores[index];
    if (score <= 0 || score < minimum) continue;
    Bm25Hit hit{documents_[index].id, score / maximum, score};
    if (hits.size() < options.top_k) {
      hits.push_back(hit);
      std::push_heap(hits.begin(), hits.end(), better);
    } else if (better(hit, hits.front())) {
      std::pop_heap(hits.begin(), hits.end(), better);
      hits.back() = hit;
      std::push_heap(hits.begin(), hits.end(), better);
    }
  }
  std::sort_heap(hits.begin(), hits.end(), better);
  return hits;
}

size_t Bm25Index::size() const {
  std::shared_lock lock(mutex_);
  return document_index_.size();
}

size_t Bm25Index::term_count() const {
  std::shared_lock lock(mutex_);
  return static_cast<size_t>(std::count_if(document_frequency_.begin(), document_frequency_.end(),
                                           [](uint32_t df) { return df > 0; }));
}

double Bm25Index::average_length() const {
  std::shared_lock lock(mutex_);
  return document_index_.empty()
             ? 0.0
             : static_cast<double>(total_length_) / static_cast<double>(document_index_.size());
}

}  // namespace rampart::knowledge::hub
