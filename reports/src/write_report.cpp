// write_report: renders the four report files of a result directory (and of each model×profile when there are
// several) into memory, then writes each atomically (engine::write_file_atomic).
#include <map>
#include <set>

#include "kvconf/engine/atomic_file.hpp"
#include "kvconf/reports/report.hpp"

namespace kvconf::reports {

namespace {

struct Rendered {
  std::filesystem::path dir;
  std::string json, md, html, junit;
};

Rendered render(const ReportInput& in, const std::vector<RuleVerdict>& v, const std::filesystem::path& dir) {
  const nlohmann::json r = report_json(in, v);
  return {dir, r.dump(1) + "\n", report_markdown(r), report_html(r), junit_xml(in.title, v)};
}

}  // namespace

std::string slug(const std::string& model) {
  std::string s;
  for (char c : model) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    s += ok ? c : '-';
  }
  while (!s.empty() && (s.front() == '-' || s.front() == '.')) s.erase(s.begin());
  return s.empty() ? "model" : s;
}

void write_report(const ReportInput& in, const std::filesystem::path& dir) {
  const std::vector<RuleVerdict> v = evaluate_rules(in);
  std::vector<Rendered> out;
  out.push_back(render(in, v, dir));
  std::map<std::pair<std::string, std::string>, ReportInput> parts;
  for (const auto& p : in.pairs) {
    ReportInput& part = parts[{p.model, p.profile}];
    part.pairs.push_back(p);
  }
  if (parts.size() > 1) {
    for (auto& [mp, part] : parts) {
      part.title = in.title + " — " + mp.first + " " + mp.second;
      part.meta = in.meta;
      const std::string suite = "model." + mp.first + "." + mp.second;
      std::vector<RuleVerdict> pv;  // the verdicts of this model×profile, evaluated over the whole input
      for (const auto& x : v)
        if (x.suite == suite) pv.push_back(x);
      out.push_back(render(part, pv, dir / (slug(mp.first) + "__" + mp.second)));
    }
  }
  for (const Rendered& r : out) {
    engine::write_file_atomic(r.dir / "report.json", r.json);
    engine::write_file_atomic(r.dir / "report.md", r.md);
    engine::write_file_atomic(r.dir / "report.html", r.html);
    engine::write_file_atomic(r.dir / "junit.xml", r.junit);
  }
}

}  // namespace kvconf::reports
