// A small SVG plot writer for report.html (internal): lines with an optional band, points, grouped bars; linear or
// log-10 y axis with ticks and labels, a title, axis labels, a legend. All text is escaped. No external resources.
#pragma once

#include <string>
#include <vector>

namespace kvconf::reports::detail {

struct SvgSeries {
  enum class Style { line, points, bars };
  std::string name;
  Style style = Style::line;
  std::vector<double> x, y;
  std::vector<double> lo, hi;  // optional band (same length as x), drawn under a line
};

struct SvgPlot {
  std::string title, xlabel, ylabel;
  std::vector<SvgSeries> series;
  bool allow_log_y = true;   // log-10 y when the positive values span 3 decades or more
  std::string empty_reason;  // shown when no series has a finite point
  int width = 760, height = 340;
};

inline SvgPlot make_plot(std::string title, std::string xlabel, std::string ylabel) {
  SvgPlot p;
  p.title = std::move(title), p.xlabel = std::move(xlabel), p.ylabel = std::move(ylabel);
  return p;
}
inline SvgSeries make_series(std::string name, SvgSeries::Style style = SvgSeries::Style::line) {
  SvgSeries s;
  s.name = std::move(name), s.style = style;
  return s;
}

// One <svg>…</svg> element.
std::string render_svg(const SvgPlot& p);

}  // namespace kvconf::reports::detail
