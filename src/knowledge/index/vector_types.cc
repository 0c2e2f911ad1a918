#include "knowledge/index/vector_types.h"

namespace rampart::knowledge {

std::string_view MetricName(Metric metric) {
  switch (metric) {
    case Metric::kCosine: return "cosine";
    case Metric::kDotProduct: return "dotproduct";
    case Metric::kEuclidean: return "euclidean";
  }
  return "cosine";
}

Result<Metric> ParseMetric(std::string_view name) {
  if (name == "cosine") return Metric::kCosine;
  if (name == "dotproduct") return Metric::kDotProduct;
  if (name == "euclidean") return Metric::kEuclidean;
  return InvalidArgument("metric must be one of cosine, dotproduct, euclidean (got '{}')", name);
}

}  // namespace rampart::knowledge
