#pragma once

// Registry: owns metric families and writes them in the Prometheus text format.
//
//   metrics::Registry registry;
//   metrics::Counter& inferences =
//       registry.Counter("nv_inference_count", "Number of inferences performed",
//                        {"model", "version"})
//           .WithLabels({"simple", "1"});
//   inferences.Increment(batch_size);           // hot path: lock-free, no lookup
//   std::string body = registry.Exposition();   // GET /metrics
//
// Ownership: the Registry owns every family, every child and every collector. References it
// returns (families, children) stay valid until the Registry is destroyed, except for children a
// Collector removes (RemoveChildrenIf), which only it may hold, and held children (Hold), which
// go when their last holder releases them.
//
// Thread safety: every method of Registry and Family may be called from any thread. Creating or
// finding families and children takes a mutex (do it when a model loads, not per request);
// updating a child is lock-free (metrics.h). Exposition() runs the collectors one scrape at a
// time, then writes a snapshot of each child.
//
// Errors: metric and label names, label counts and reuse of a name with another type or other
// label names are programming errors and CHECK-fail. Label values may be any bytes (they are
// escaped, and invalid UTF-8 is replaced).

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "metrics/metrics.h"

namespace rampart::metrics {

// The parts every family shares, and its exposition.
class FamilyBase {
 public:
  virtual ~FamilyBase() = default;
  FamilyBase(const FamilyBase&) = delete;
  FamilyBase& operator=(const FamilyBase&) = delete;

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  virtual std::string_view type_name() const = 0;

  // Appends "# HELP", "# TYPE" and one sample group per child, children ordered by label values.
  // Appends nothing for a family without children.
  virtual void AppendExposition(std::string& out) const = 0;

 protected:
  FamilyBase(std::string name, std::string help, std::vector<std::string> label_names);

 private:
  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
};

// A named family of one metric kind; children are told apart by their label values.
template <typename Metric>
class Family final : public FamilyBase {
 public:
  using Options = typename Metric::Options;

  // Use Registry's factory methods rather than constructing families directly.
  // REQUIRES: valid metric name and label names (CHECKed).
  Family(std::string name, std::string help, std::vector<std::string> label_names,
         Options default_options);

  std::string_view type_name() const override { return Metric::kTypeName; }

  // The child for these label values (in label_names() order), created on first use with the
  // family's default options. The reference is valid for the registry's life.
  // REQUIRES: label_values.size() == label_names().size() (CHECKed).
  Metric& WithLabels(const std::vector<std::string>& label_values);
  // As above, creating the child with `options` (e.g. a model's own histogram buckets). When the
  // child already exists it is returned unchanged: options apply only at creation.
  Metric& WithLabels(const std::vector<std::string>& label_values, const Options& options);

  // Removes the children whose label values `remove` picks, so they are no longer exposed (a
  // series whose subject is gone, e.g. an unloaded model's queue depth). Invalidates references
  // to them: only for children that a Collector looks up again at every scrape, never for ones
  // held across scrapes.
  void RemoveChildrenIf(const std::function<bool(const std::vector<std::string>&)>& remove);

  // WithLabels for a holder that keeps the reference for its own life and calls Release with the
  // same label values when done: the child is removed (no longer exposed, the reference invalid)
  // when its last holder releases it. Two holders of the same labels share the child (a model
  // version reloaded under the same number keeps counting).
  Metric& Hold(const std::vector<std::string>& label_values, const Options& options);
  Metric& Hold(const std::vector<std::string>& label_values) {
    return Hold(label_values, default_options_);
  }
  void Release(const std::vector<std::string>& label_values);

  void AppendExposition(std::string& out) const override;

 private:
  struct Child {
    std::string labels_text;  // `model="simple",version="1"`, escaped, without braces
    std::unique_ptr<Metric> metric;
    int holders = 0;  // Hold calls not yet released
  };

  // The child for `label_values`, created with `options` when new. REQUIRES: mutex_ held.
  Child& ChildLocked(const std::vector<std::string>& label_values, const Options& options);

  const Options default_options_;
  mutable std::mutex mutex_;
  std::map<std::vector<std::string>, Child> children_;  // guarded by mutex_
};

using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;
using HistogramFamily = Family<Histogram>;
using SummaryFamily = Family<Summary>;

extern template class Family<Counter>;
extern template class Family<Gauge>;
extern template class Family<Histogram>;
extern template class Family<Summary>;

// Refreshes metrics whose values are read at scrape time (process CPU and memory, ...).
// Collect() is called by Registry::Exposition(), one call at a time, and must not call
// Exposition() itself; it may create families and children.
class Collector {
 public:
  virtual ~Collector() = default;
  virtual void Collect() = 0;
};

class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Each returns the family with this name, creating it on first use. A family without labels
  // gets its one child immediately, so it is exposed (at zero) before anything is recorded.
  // Calling again with the same name returns the same family; help text and default options of
  // the first call stay.
  // REQUIRES: the name is not in use by a family of another type or other label names (CHECKed).
  CounterFamily& Counter(std::string_view name, std::string_view help,
                         std::vector<std::string> label_names = {});
  GaugeFamily& Gauge(std::string_view name, std::string_view help,
                     std::vector<std::string> label_names = {});
  // `bounds`: default bucket upper bounds for the family's children, in the unit of the metric.
  // REQUIRES: ValidateHistogramBuckets(bounds).ok() (CHECKed; parse untrusted lists with
  // ParseHistogramBuckets first). "le" is not allowed as a label name.
  HistogramFamily& Histogram(std::string_view name, std::string_view help,
                             std::vector<std::string> label_names, std::vector<double> bounds);
  // "quantile" is not allowed as a label name.
  SummaryFamily& Summary(std::string_view name, std::string_view help,
                         std::vector<std::string> label_names,
                         metrics::Summary::Options options = {});

  // Takes ownership; `collector` runs at the start of every Exposition() from now on.
  void AddCollector(std::unique_ptr<Collector> collector);

  // The whole registry in Prometheus text format 0.0.4 (Content-Type
  // "text/plain; version=0.0.4; charset=utf-8"), families ordered by name.
  std::string Exposition() const;

 private:
  template <typename Metric>
  Family<Metric>& GetOrCreate(std::string_view name, std::string_view help,
                              std::vector<std::string> label_names,
                              typename Metric::Options default_options);

  // Serialises collectors (their "since last scrape" state) across concurrent scrapes. Taken
  // before mutex_, never while holding it.
  mutable std::mutex collect_mutex_;
  std::vector<std::unique_ptr<Collector>> collectors_;  // guarded by collect_mutex_

  mutable std::mutex mutex_;
  std::map<std::string, std::unique_ptr<FamilyBase>, std::less<>> families_;  // guarded by mutex_
};

}  // namespace rampart::metrics
