#pragma once

// Pieces of the Prometheus text exposition format 0.0.4 that the Registry writes with: number
// formatting that Prometheus' parser reads back exactly, escaping for label values and help text,
// and the name rules. Exposed for the registry and its tests; callers normally want
// Registry::Exposition() instead.
//
// Thread safety: pure functions.

#include <string>
#include <string_view>

namespace rampart::metrics {

// Appends `value` as Prometheus writes floats: "+Inf", "-Inf", "NaN"; integral values below
// 2^53 in plain digits ("1000000", not "1e+06", so `le` labels stay readable and stable);
// anything else in the shortest form that round-trips ("0.25", "1e-07", "1.5e+300").
void AppendValue(std::string& out, double value);
std::string FormatValue(double value);

// Appends a label value with `\`, `"` and newline escaped. Bytes that are not valid UTF-8 (model
// names come from directory names) become U+FFFD, because Prometheus rejects invalid UTF-8.
void AppendEscapedLabelValue(std::string& out, std::string_view value);
// Appends HELP text with `\` and newline escaped, and invalid UTF-8 replaced as above.
void AppendEscapedHelp(std::string& out, std::string_view help);

// [a-zA-Z_:][a-zA-Z0-9_:]*
bool IsValidMetricName(std::string_view name);
// [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__" (reserved by Prometheus).
bool IsValidLabelName(std::string_view name);

}  // namespace rampart::metrics
