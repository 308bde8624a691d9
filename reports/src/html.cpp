// report_html: report.html, self-contained (inline CSS and SVG, no external resource): the report's tables and the
// plots — KL per decode step (mean and 95% band per strategy), flip-index histogram, per-layer drift (per model ×
// profile), oracle error vs sequence length and vs head dimension (kernel sweep).
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "kvconf/reports/report.hpp"
#include "report_json.hpp"
#include "report_tables.hpp"
#include "svg_plot.hpp"

namespace kvconf::reports {

namespace {

using detail::as_num;
using detail::SvgPlot;
using detail::SvgSeries;
using detail::xml_escape;
using nlohmann::json;

std::vector<double> nums(const json& a) {
  std::vector<double> v;
  if (a.is_array())
    for (const auto& x : a) v.push_back(x.is_null() ? NAN : as_num(x));
  return v;
}

std::vector<double> iota_d(std::size_t n) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = double(i);
  return v;
}

std::vector<const json*> conditions_of(const json& r, const json& mp) {
  std::vector<const json*> out;
  for (const auto& c : r["conditions"])
    if (c["model"] == mp["model"] && c["profile"] == mp["profile"]) out.push_back(&c);
  return out;
}

SvgPlot kl_plot(const std::string& label, const std::vector<const json*>& cs) {
  SvgPlot p = detail::make_plot("KL(p_on‖p_off) per decode step, free-running, mean and 95% band — " + label,
                                "decode step", "KL (nats)");
  p.empty_reason = "no decode steps recorded";
  for (const json* c : cs) {
    const json& s = (*c)["kl_per_step"]["free"];
    SvgSeries ser = detail::make_series((*c)["strategy"].get<std::string>());
    ser.y = nums(s["mean"]);
    ser.lo = nums(s["lo"]);
    ser.hi = nums(s["hi"]);
    ser.x = iota_d(ser.y.size());
    p.series.push_back(ser);
  }
  return p;
}

SvgPlot flip_histogram(const std::string& label, const std::vector<const json*>& cs) {
  SvgPlot p = detail::make_plot("Flip index (first step whose tokens differ) — " + label, "flip index (decode step)",
                                "diverged pairs");
  p.allow_log_y = false;
  p.empty_reason = "no pair diverged";
  double maxf = 0;
  for (const json* c : cs)
    for (double f : nums((*c)["flip_indices"])) maxf = std::max(maxf, f);
  const double width = std::max(1.0, std::ceil((maxf + 1) / 40.0));  // at most ~40 bins
  if (width > 1) p.xlabel += " (bins of " + detail::fmt(width) + ")";
  for (const json* c : cs) {
    std::map<double, double> bins;
    for (double f : nums((*c)["flip_indices"])) bins[std::floor(f / width) * width] += 1;
    SvgSeries s = detail::make_series((*c)["strategy"].get<std::string>(), SvgSeries::Style::bars);
    for (const auto& [b, n] : bins) s.x.push_back(b), s.y.push_back(n);
    p.series.push_back(s);
  }
  return p;
}

SvgPlot drift_plot(const std::string& label, const std::vector<const json*>& cs) {
  SvgPlot p = detail::make_plot("Per-layer drift cache-ON vs cache-OFF, teacher-forced — " + label,
                                "hidden state (0 = embeddings, l = after layer l)", "mean l2 of h_on − h_off");
  p.empty_reason = "no layer drift recorded";
  for (const json* c : cs) {
    SvgSeries s = detail::make_series((*c)["strategy"].get<std::string>());
    s.y = nums((*c)["layer_drift"]["mean_l2"]);
    s.x = iota_d(s.y.size());
    p.series.push_back(s);
  }
  return p;
}

SvgPlot oracle_plot(const json& r, const char* axis, const std::string& xlabel) {
  bool ratio = false;
  for (const auto& pt : r["oracle_points"])
    if (!pt["ratio"].is_null()) ratio = true;
  SvgPlot p = detail::make_plot(std::string("Oracle error vs ") + xlabel + " (rule oracle_bound)", xlabel,
                                ratio ? "error / a-priori bound" : "max |computed − oracle|");
  p.empty_reason = "no oracle_bound result with a " + xlabel;
  std::map<std::string, SvgSeries> by_kind;
  for (const auto& pt : r["oracle_points"]) {
    const double x = pt[axis].get<double>();
    if (x <= 0) continue;
    const double y = ratio ? (pt["ratio"].is_null() ? NAN : as_num(pt["ratio"])) : as_num(pt["error"]);
    auto& s = by_kind[pt["kind"].get<std::string>()];
    s.name = pt["kind"].get<std::string>();
    s.style = SvgSeries::Style::points;
    s.x.push_back(x), s.y.push_back(y);
  }
  for (auto& [_, s] : by_kind) p.series.push_back(s);
  return p;
}

void table_html(std::string& o, const detail::Table& t) {
  o += "<section id=\"" + xml_escape(t.id) + "\"><h2>" + xml_escape(t.title) + "</h2>";
  if (!t.note.empty()) o += "<p class=\"note\">" + xml_escape(t.note) + "</p>";
  o += "<div class=\"scroll\"><table><thead><tr>";
  for (const auto& h : t.header) o += "<th>" + xml_escape(h) + "</th>";
  o += "</tr></thead><tbody>";
  for (std::size_t i = 0; i < t.rows.size(); ++i) {
    const std::string cls = i < t.row_class.size() ? t.row_class[i] : "";
    o += cls.empty() ? "<tr>" : "<tr class=\"" + cls + "\">";
    for (const auto& c : t.rows[i]) o += "<td>" + xml_escape(c) + "</td>";
    o += "</tr>";
  }
  if (t.rows.empty()) o += "<tr><td colspan=\"" + std::to_string(t.header.size()) + "\">(none)</td></tr>";
  o += "</tbody></table></div></section>\n";
}

}  // namespace

std::string report_html(const json& r) {
  const std::string title = r.value("title", std::string("kvconf report"));
  std::string o =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + xml_escape(title) +
      "</title>\n<style>\n"
      "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px;color:#222;max-width:1400px}\n"
      "h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ccc}\n"
      "table{border-collapse:collapse;font-size:12px}th,td{border:1px solid #ccc;padding:3px 6px;text-align:left;"
      "vertical-align:top}th{background:#f0f0f0}\n"
      "tr.fail td{background:#fde2e2}tr.skip td{color:#777}.note{font-size:13px;color:#444;max-width:1100px}\n"
      ".scroll{overflow-x:auto}.plots{display:flex;flex-wrap:wrap;gap:12px}.plot{border:1px solid #ddd}\n"
      ".ok{color:#0a7a2f;font-weight:bold}.bad{color:#b00020;font-weight:bold}\n"
      "</style></head><body>\n";
  const bool failed = r["totals"]["failed"].get<std::size_t>() > 0;
  o += "<h1>" + xml_escape(title) + "</h1>\n<p><span class=\"" + (failed ? "bad\">FAIL" : "ok\">PASS") + "</span> — " +
       xml_escape(detail::summary_line(r)) + ". Schema <code>" + xml_escape(r.value("schema", std::string())) +
       "</code> (docs/REPORTS.md).</p>\n";
  if (r.contains("meta") && r["meta"].is_object() && !r["meta"].empty()) {
    o += "<details><summary>Provenance</summary><table>";
    for (const auto& [k, v] : r["meta"].items())
      o += "<tr><th>" + xml_escape(k) + "</th><td><code>" +
           xml_escape(v.is_string() ? v.get<std::string>() : v.dump()) + "</code></td></tr>";
    o += "</table></details>\n";
  }
  const auto tables = detail::report_tables(r);
  table_html(o, tables.front());  // verdicts first, then the plots
  o += "<section id=\"plots\"><h2>Plots</h2><div class=\"plots\">\n";
  for (const auto& mp : r["model_profiles"]) {
    const std::string label = mp["model"].get<std::string>() + " " + mp["profile"].get<std::string>();
    const auto cs = conditions_of(r, mp);
    for (const SvgPlot& p : {kl_plot(label, cs), flip_histogram(label, cs), drift_plot(label, cs)})
      o += detail::render_svg(p) + "\n";
  }
  if (r.contains("experiments"))
    for (const auto& e : r["experiments"])
      for (const auto& jp : e["plots"]) {
        SvgPlot p = detail::make_plot(e["name"].get<std::string>() + ": " + jp["title"].get<std::string>(),
                                      jp["xlabel"].get<std::string>(), jp["ylabel"].get<std::string>());
        for (const auto& js : jp["series"]) {
          const std::string st = js["style"].get<std::string>();
          SvgSeries s = detail::make_series(js["name"].get<std::string>(), st == "points" ? SvgSeries::Style::points
                                                                           : st == "bars" ? SvgSeries::Style::bars
                                                                                          : SvgSeries::Style::line);
          for (const auto& x : js["x"]) s.x.push_back(as_num(x));
          for (const auto& y : js["y"]) s.y.push_back(as_num(y));
          p.series.push_back(s);
        }
        p.allow_log_y = jp["ylabel"].get<std::string>().find("KL") != std::string::npos ||
                        jp["ylabel"].get<std::string>().find("|") != std::string::npos;
        p.empty_reason = "no pair of this experiment had data for this plot";
        o += detail::render_svg(p) + "\n";
      }
  if (!r["kernels"].empty()) {
    o += detail::render_svg(oracle_plot(r, "seq_len", "sequence length")) + "\n";
    o += detail::render_svg(oracle_plot(r, "head_dim", "head dimension")) + "\n";
  }
  o += "</div></section>\n";
  for (std::size_t i = 1; i < tables.size(); ++i) table_html(o, tables[i]);
  o += "</body></html>\n";
  return o;
}

}  // namespace kvconf::reports
