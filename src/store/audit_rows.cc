#include "store/audit_rows.h"

namespace rampart::store::internal {

Status ValidateAuditRows(const std::vector<AuditRow>& rows) {
  if (rows.empty()) return InvalidArgument("no audit records to append");
  if (rows.front().sequence < 1) {
    return InvalidArgument("audit sequence {} is not positive", rows.front().sequence);
  }
  for (size_t i = 1; i < rows.size(); ++i) {
    if (rows[i].sequence != rows[i - 1].sequence + 1) {
      return InvalidArgument("audit sequences {} and {} are not consecutive", rows[i - 1].sequence,
                             rows[i].sequence);
    }
  }
  return Status::Ok();
}

Status ValidateAuditQuery(const AuditQuery& query) {
  if (query.limit < 1 || query.limit > kMaxAuditQueryLimit) {
    return InvalidArgument("limit must be 1..{}, not {}", kMaxAuditQueryLimit, query.limit);
  }
  if (query.from_unix_ns < 0 || query.to_unix_ns < 0 || query.after_sequence < 0) {
    return InvalidArgument("time bounds and after_sequence must not be negative");
  }
  return Status::Ok();
}

AuditQueryShape ShapeAuditQuery(const AuditQuery& query) {
  AuditQueryShape shape;
  const auto add = [&](int bit, bool set, std::string value) {
    if (!set) return;
    shape.mask |= 1 << bit;
    shape.parameters.push_back(std::move(value));
  };
  add(0, query.from_unix_ns != 0, std::to_string(query.from_unix_ns));
  add(1, query.to_unix_ns != 0, std::to_string(query.to_unix_ns));
  add(2, !query.tenant.empty(), query.tenant);
  add(3, !query.principal.empty(), query.principal);
  add(4, !query.trace_id.empty(), query.trace_id);
  return shape;
}

}  // namespace rampart::store::internal
