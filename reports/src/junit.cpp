// junit_xml: junit.xml, one <testcase> per rule verdict grouped in a <testsuite> per suite, with the measured value,
// threshold and headroom as <properties>; failures carry the detail, rules not applied are <skipped/>.
#include <map>
#include <sstream>

#include "kvconf/reports/report.hpp"
#include "report_json.hpp"

namespace kvconf::reports {

std::string junit_xml(const std::string& title, const std::vector<RuleVerdict>& v) {
  using detail::xml_escape;
  std::map<std::string, std::vector<const RuleVerdict*>> suites;
  detail::VerdictCounts n;
  for (const auto& x : v) {
    suites[x.suite].push_back(&x);
    n.add(x);
  }
  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o << "<testsuites name=\"" << xml_escape(title) << "\" tests=\"" << v.size() << "\" failures=\"" << n.failed
    << "\" errors=\"0\" skipped=\"" << n.skipped << "\">\n";
  for (const auto& [suite, cases] : suites) {
    detail::VerdictCounts cn;
    for (const auto* c : cases) cn.add(*c);
    o << "  <testsuite name=\"" << xml_escape(suite) << "\" tests=\"" << cases.size() << "\" failures=\"" << cn.failed
      << "\" errors=\"0\" skipped=\"" << cn.skipped << "\">\n";
    for (const auto* c : cases) {
      o << "    <testcase classname=\"" << xml_escape(suite) << "\" name=\"" << xml_escape(c->name) << "\">\n";
      o << "      <properties>\n";
      o << "        <property name=\"measured\" value=\"" << detail::fmt(c->measured, 17) << "\"/>\n";
      o << "        <property name=\"threshold\" value=\"" << detail::fmt(c->threshold, 17) << "\"/>\n";
      o << "        <property name=\"headroom\" value=\"" << detail::fmt(c->headroom, 17) << "\"/>\n";
      o << "      </properties>\n";
      if (!c->skipped.empty()) {
        o << "      <skipped message=\"" << xml_escape(c->skipped) << "\"/>\n";
      } else if (!c->pass) {
        o << "      <failure message=\""
          << xml_escape(c->name + " failed: measured " + detail::fmt(c->measured) + ", threshold " +
                        detail::fmt(c->threshold))
          << "\">" << xml_escape(c->detail) << "</failure>\n";
      } else if (!c->detail.empty()) {
        o << "      <system-out>" << xml_escape(c->detail) << "</system-out>\n";
      }
      o << "    </testcase>\n";
    }
    o << "  </testsuite>\n";
  }
  o << "</testsuites>\n";
  return o.str();
}

}  // namespace kvconf::reports
