// XML/HTML escaping for junit.xml, report.html and the SVG plots. Control characters other than tab, newline and
// carriage return (not allowed in XML 1.0) become U+FFFD.
#include "report_json.hpp"

namespace kvconf::reports::detail {

std::string xml_escape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&#39;";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r')
          o += "\xEF\xBF\xBD";
        else
          o += c;
    }
  }
  return o;
}

}  // namespace kvconf::reports::detail
