#pragma once

// HnswGraph: one hnswlib HierarchicalNSW graph (hnswlib 0.6.2, Debian's libhnswlib-dev), behind
// a header that does not include hnswlib: its headers define non-inline globals, so exactly one
// translation unit (hnsw_graph.cc) may include them.
//
// Labels are the engine's slot numbers. Distances are hnswlib's: 1 - dot product for the inner
// product space (cosine and dotproduct), the squared euclidean distance for L2.
//
// Threads: Add may run concurrently with Search (hnswlib locks per node), except an Add for
// which AddMovesEntryPoint() is true (searches read the entry point and top level unlocked);
// Resize and MarkDeleted must not run beside anything. The engine's locks see to it.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "knowledge/index/vector_types.h"

namespace rampart::knowledge {

class HnswGraph {
 public:
  HnswGraph(Metric metric, size_t dimension, size_t capacity, size_t m, size_t ef_construction);
  ~HnswGraph();
  HnswGraph(const HnswGraph&) = delete;
  HnswGraph& operator=(const HnswGraph&) = delete;

  // Whether the next Add will make the graph's first node or raise its top level (the level is
  // drawn from a copy of the graph's own generator, so this is exact).
  bool AddMovesEntryPoint() const;
  // REQUIRES: size() < capacity(). Unavailable when memory runs out.
  Status Add(const float* vector, size_t label);
  // Hides `label` from searches (it stays in the graph); false when it is not in the graph or
  // already hidden.
  bool MarkDeleted(size_t label);
  void Resize(size_t capacity);

  size_t size() const;  // nodes, hidden ones included
  size_t capacity() const;
  size_t hidden() const;  // nodes marked deleted
  // Bytes the graph holds: its preallocated level-0 block and locks, and upper-level links.
  size_t MemoryBytes() const;

  // The graph as bytes (hnswlib's own fields in hnswlib's own layout, after a tag naming that
  // layout), with a digest of an unhidden node's values in place of them (its record holds
  // them): what Import reads back. Reads the graph: nothing may change it meanwhile.
  std::string Export() const;
  // A graph from Export's bytes, made with the same parameters; its unhidden nodes have no
  // values until AdoptLabels gives them theirs, so it must not be searched before.
  // FailedPrecondition when the bytes are of another layout (another hnswlib, other parameters);
  // InvalidArgument when they are damaged (every link, level, count and label is checked, so a
  // graph that loads cannot make a search read out of bounds); Unavailable when memory runs out.
  static Result<std::unique_ptr<HnswGraph>> Import(Metric metric, size_t dimension, size_t m,
                                                   size_t ef_construction, std::string_view bytes);
  // After Import: renumbers the labels and puts the records' values in: the node labelled
  // record_labels[i] must be unhidden and have held exactly the values vector_of(i) points to
  // (dimension floats, as the engine searches them; checked by digest), gets them, and becomes
  // label i; every other node must be hidden, and
  // becomes record_labels.size(), +1, ... in node order. InvalidArgument (the graph unchanged)
  // when the graph and the records disagree in any of this.
  Status AdoptLabels(std::span<const uint64_t> record_labels,
                     const std::function<const float*(size_t record)>& vector_of);

  // The `keep` nearest unhidden nodes (fewer when the graph has fewer) among those a search of
  // breadth `breadth` (hnswlib's ef) finds, as (distance, label), farthest first.
  std::vector<std::pair<float, size_t>> Search(const float* query, size_t breadth,
                                               size_t keep) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rampart::knowledge
