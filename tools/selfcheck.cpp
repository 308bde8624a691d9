// The list of self-checks `kvconf run` executes, in order.
#include "selfcheck.hpp"

namespace kvconf::tools {

std::vector<SelfCheck> all_self_checks() {
  std::vector<SelfCheck> checks;
  add_format_checks(checks);
  add_oracle_checks(checks);
  add_bound_checks(checks);
  return checks;
}

}  // namespace kvconf::tools
