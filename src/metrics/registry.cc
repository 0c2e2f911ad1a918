#include "metrics/registry.h"

#include <algorithm>
#include <type_traits>
#include <utility>

#include "core/check.h"
#include "metrics/text_format.h"

namespace rampart::metrics {
namespace {

// One sample line: name + suffix, `{labels[,extra_label="extra_value"]}`, value.
// `extra_value` is written as is; callers pass text that needs no escaping (a formatted number).
void AppendSample(std::string& out, std::string_view name, std::string_view suffix,
                  std::string_view labels_text, std::string_view extra_label,
                  std::string_view extra_value, double value) {
  out += name;
  out += suffix;
  if (!labels_text.empty() || !extra_label.empty()) {
    out += '{';
    out += labels_text;
    if (!extra_label.empty()) {
      if (!labels_text.empty()) out += ',';
      out += extra_label;
      out += "=\"";
      out += extra_value;
      out += '"';
    }
    out += '}';
  }
  out += ' ';
  AppendValue(out, value);
  out += '\n';
}

void AppendSamples(std::string& out, std::string_view name, std::string_view labels_text,
                   const Counter& counter) {
  AppendSample(out, name, "", labels_text, "", "", counter.Value());
}

void AppendSamples(std::string& out, std::string_view name, std::string_view labels_text,
                   const Gauge& gauge) {
  AppendSample(out, name, "", labels_text, "", "", gauge.Value());
}

void AppendSamples(std::string& out, std::string_view name, std::string_view labels_text,
                   const Histogram& histogram) {
  HistogramSnapshot snapshot = histogram.Snapshot();
  for (size_t i = 0; i < snapshot.cumulative.size(); ++i) {
    std::string le = i < snapshot.bounds.size() ? FormatValue(snapshot.bounds[i]) : "+Inf";
    AppendSample(out, name, "_bucket", labels_text, "le", le,
                 static_cast<double>(snapshot.cumulative[i]));
  }
  AppendSample(out, name, "_sum", labels_text, "", "", snapshot.sum);
  AppendSample(out, name, "_count", labels_text, "", "", static_cast<double>(snapshot.count));
}

void AppendSamples(std::string& out, std::string_view name, std::string_view labels_text,
                   const Summary& summary) {
  SummarySnapshot snapshot = summary.Snapshot();
  for (const auto& [quantile, value] : snapshot.quantiles) {
    AppendSample(out, name, "", labels_text, "quantile", FormatValue(quantile), value);
  }
  AppendSample(out, name, "_sum", labels_text, "", "", snapshot.sum);
  AppendSample(out, name, "_count", labels_text, "", "", static_cast<double>(snapshot.count));
}

// The label name a metric kind adds to its own samples, which users may not use.
template <typename Metric>
std::string_view ReservedLabel() {
  if constexpr (std::is_same_v<Metric, Histogram>) return "le";
  if constexpr (std::is_same_v<Metric, Summary>) return "quantile";
  return {};
}

}  // namespace

FamilyBase::FamilyBase(std::string name, std::string help, std::vector<std::string> label_names)
    : name_(std::move(name)), help_(std::move(help)), label_names_(std::move(label_names)) {}

template <typename Metric>
Family<Metric>::Family(std::string name, std::string help, std::vector<std::string> label_names,
                       Options default_options)
    : FamilyBase(std::move(name), std::move(help), std::move(label_names)),
      default_options_(std::move(default_options)) {
  CHECK(IsValidMetricName(this->name()));
  const std::vector<std::string>& names = this->label_names();
  for (size_t i = 0; i < names.size(); ++i) {
    CHECK(IsValidLabelName(names[i]));
    CHECK(names[i] != ReservedLabel<Metric>());
    CHECK(std::find(names.begin(), names.begin() + i, names[i]) == names.begin() + i);
  }
}

template <typename Metric>
Metric& Family<Metric>::WithLabels(const std::vector<std::string>& label_values) {
  return WithLabels(label_values, default_options_);
}

template <typename Metric>
typename Family<Metric>::Child& Family<Metric>::ChildLocked(
    const std::vector<std::string>& label_values, const Options& options) {
  CHECK(label_values.size() == label_names().size());
  auto it = children_.find(label_values);
  if (it != children_.end()) return it->second;

  Child child;
  for (size_t i = 0; i < label_values.size(); ++i) {
    if (i > 0) child.labels_text += ',';
    child.labels_text += label_names()[i];
    child.labels_text += "=\"";
    AppendEscapedLabelValue(child.labels_text, label_values[i]);
    child.labels_text += '"';
  }
  child.metric = std::make_unique<Metric>(options);
  return children_.emplace(label_values, std::move(child)).first->second;
}

template <typename Metric>
Metric& Family<Metric>::WithLabels(const std::vector<std::string>& label_values,
                                   const Options& options) {
  std::lock_guard lock(mutex_);
  return *ChildLocked(label_values, options).metric;
}

template <typename Metric>
Metric& Family<Metric>::Hold(const std::vector<std::string>& label_values, const Options& options) {
  std::lock_guard lock(mutex_);
  Child& child = ChildLocked(label_values, options);
  ++child.holders;
  return *child.metric;
}

template <typename Metric>
void Family<Metric>::Release(const std::vector<std::string>& label_values) {
  std::lock_guard lock(mutex_);
  auto it = children_.find(label_values);
  CHECK(it != children_.end() && it->second.holders > 0);
  if (--it->second.holders == 0) children_.erase(it);
}

template <typename Metric>
void Family<Metric>::RemoveChildrenIf(
    const std::function<bool(const std::vector<std::string>&)>& remove) {
  std::lock_guard lock(mutex_);
  std::erase_if(children_, [&](const auto& child) { return remove(child.first); });
}

template <typename Metric>
void Family<Metric>::AppendExposition(std::string& out) const {
  std::lock_guard lock(mutex_);
  if (children_.empty()) return;
  out += "# HELP ";
  out += name();
  out += ' ';
  AppendEscapedHelp(out, help());
  out += "\n# TYPE ";
  out += name();
  out += ' ';
  out += Metric::kTypeName;
  out += '\n';
  for (const auto& [label_values, child] : children_) {
    AppendSamples(out, name(), child.labels_text, *child.metric);
  }
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;
template class Family<Summary>;

Registry::Registry() = default;
Registry::~Registry() = default;

template <typename Metric>
Family<Metric>& Registry::GetOrCreate(std::string_view name, std::string_view help,
                                      std::vector<std::string> label_names,
                                      typename Metric::Options default_options) {
  std::lock_guard lock(mutex_);
  auto it = families_.find(name);
  if (it != families_.end()) {
    // Reusing a name with another kind or other labels would expose two meanings under one name.
    auto* family = dynamic_cast<Family<Metric>*>(it->second.get());
    CHECK(family != nullptr);
    CHECK(family->label_names() == label_names);
    return *family;
  }
  const bool labelless = label_names.empty();
  auto family = std::make_unique<Family<Metric>>(
      std::string(name), std::string(help), std::move(label_names), std::move(default_options));
  Family<Metric>& result = *family;
  families_.emplace(std::string(name), std::move(family));
  if (labelless) result.WithLabels({});
  return result;
}

CounterFamily& Registry::Counter(std::string_view name, std::string_view help,
                                 std::vector<std::string> label_names) {
  return GetOrCreate<metrics::Counter>(name, help, std::move(label_names), {});
}

GaugeFamily& Registry::Gauge(std::string_view name, std::string_view help,
                             std::vector<std::string> label_names) {
  return GetOrCreate<metrics::Gauge>(name, help, std::move(label_names), {});
}

HistogramFamily& Registry::Histogram(std::string_view name, std::string_view help,
                                     std::vector<std::string> label_names,
                                     std::vector<double> bounds) {
  CHECK(ValidateHistogramBuckets(bounds).ok());
  return GetOrCreate<metrics::Histogram>(name, help, std::move(label_names),
                                         metrics::Histogram::Options{std::move(bounds)});
}

SummaryFamily& Registry::Summary(std::string_view name, std::string_view help,
                                 std::vector<std::string> label_names,
                                 metrics::Summary::Options options) {
  return GetOrCreate<metrics::Summary>(name, help, std::move(label_names), std::move(options));
}

void Registry::AddCollector(std::unique_ptr<Collector> collector) {
  CHECK(collector != nullptr);
  std::lock_guard lock(collect_mutex_);
  collectors_.push_back(std::move(collector));
}

std::string Registry::Exposition() const {
  {
    std::lock_guard lock(collect_mutex_);
    for (const auto& collector : collectors_) collector->Collect();
  }
  std::string out;
  std::lock_guard lock(mutex_);
  out.reserve(families_.size() * 256);
  for (const auto& [name, family] : families_) family->AppendExposition(out);
  return out;
}

}  // namespace rampart::metrics
