// The SVG plot writer of report.html (svg_plot.hpp): scales, "nice" ticks (1, 2, 5 × 10^k), decade ticks on log axes.
#include "svg_plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "report_json.hpp"

namespace kvconf::reports::detail {

namespace {

const char* kColors[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#8C564B", "#000000"};

std::string f2(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", x);
  return b;
}

double nice_step(double range, int target) {
  const double raw = range / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double r = raw / mag;
  return (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * mag;
}

std::string tick_label(double v, double step) {
  if (std::fabs(v) < step * 1e-9) v = 0;
  char b[32];
  if (v != 0 && (std::fabs(v) >= 1e5 || std::fabs(v) < 1e-3))
    std::snprintf(b, sizeof b, "%.0e", v);
  else
    std::snprintf(b, sizeof b, "%g", v);
  return b;
}

struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  double map(double v, double p0, double p1) const {
    const double t = log ? (std::log10(v) - lo) / (hi - lo) : (v - lo) / (hi - lo);
    return p0 + t * (p1 - p0);
  }
  bool ok(double v) const { return std::isfinite(v) && (!log || v > 0); }
};

}  // namespace

std::string render_svg(const SvgPlot& p) {
  const double W = p.width, H = p.height, L = 72, R = 190, T = 34, B = 50;
  const double x0 = L, x1 = W - R, y0 = H - B, y1 = T;  // plot area: x0..x1 left to right, y0 (bottom)..y1 (top)
  double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY, ypos = INFINITY;
  bool any_bars = false;
  std::size_t n_bar_series = 0;
  double bin = INFINITY;
  for (const auto& s : p.series) {
    if (s.style == SvgSeries::Style::bars) ++n_bar_series, any_bars = true;
    for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      xmin = std::min(xmin, s.x[i]), xmax = std::max(xmax, s.x[i]);
      for (double y : {s.y[i], i < s.lo.size() ? s.lo[i] : s.y[i], i < s.hi.size() ? s.hi[i] : s.y[i]}) {
        if (!std::isfinite(y)) continue;
        ymin = std::min(ymin, y), ymax = std::max(ymax, y);
        if (y > 0) ypos = std::min(ypos, y);
      }
      if (s.style == SvgSeries::Style::bars && i > 0 && s.x[i] != s.x[i - 1])
        bin = std::min(bin, std::fabs(s.x[i] - s.x[i - 1]));
    }
  }
  std::ostringstream o;
  o << "<svg class=\"plot\" width=\"" << p.width << "\" height=\"" << p.height << "\" viewBox=\"0 0 " << p.width << " "
    << p.height << "\" role=\"img\" aria-label=\"" << xml_escape(p.title) << "\">";
  o << "<rect x=\"0\" y=\"0\" width=\"" << W << "\" height=\"" << H << "\" fill=\"#ffffff\"/>";
  o << "<text x=\"10\" y=\"20\" font-size=\"13\" font-weight=\"bold\">" << xml_escape(p.title) << "</text>";
  o << "<rect x=\"" << x0 << "\" y=\"" << y1 << "\" width=\"" << x1 - x0 << "\" height=\"" << y0 - y1
    << "\" fill=\"none\" stroke=\"#333\"/>";
  if (!std::isfinite(xmin)) {
    o << "<text x=\"" << f2((x0 + x1) / 2) << "\" y=\"" << f2((y0 + y1) / 2)
      << "\" text-anchor=\"middle\" font-size=\"13\" fill=\"#666\">no data: "
      << xml_escape(p.empty_reason.empty() ? "nothing to plot" : p.empty_reason) << "</text></svg>";
    return o.str();
  }
  if (!std::isfinite(bin)) bin = 1;
  // x axis
  Axis ax;
  ax.lo = xmin, ax.hi = xmax;
  if (any_bars) ax.lo -= bin / 2, ax.hi += bin / 2;
  bool any_points = false;
  for (const auto& s : p.series) any_points |= s.style == SvgSeries::Style::points;
  // log-10 x for positive points spanning 2 decades or more (sequence lengths 16 … 4096)
  ax.log = any_points && !any_bars && xmin > 0 && xmax / xmin >= 100;
  if (ax.log) {
    ax.lo = std::log10(xmin) - 0.08, ax.hi = std::log10(xmax) + 0.08;
  } else if (any_points && ax.hi > ax.lo) {  // keep markers off the frame
    const double pad = 0.03 * (ax.hi - ax.lo);
    ax.lo -= pad, ax.hi += pad;
  }
  if (ax.hi == ax.lo) ax.lo -= 1, ax.hi += 1;
  // y axis: log when the positive values span 3 decades or more
  Axis ay;
  ay.log = p.allow_log_y && !any_bars && std::isfinite(ypos) && ymax > 0 && ymax / ypos >= 1e3;
  bool dropped_nonpositive = false;
  if (ay.log) {
    ay.lo = std::floor(std::log10(ypos));
    ay.hi = std::ceil(std::log10(ymax));
    if (ay.hi == ay.lo) ay.hi += 1;
    dropped_nonpositive = ymin <= 0;
  } else {
    ay.lo = std::min(0.0, ymin);
    ay.hi = ymax > ay.lo ? ymax : ay.lo + 1;
    const double st = nice_step(ay.hi - ay.lo, 5);
    ay.hi = std::ceil(ay.hi / st - 1e-9) * st;
    ay.lo = std::floor(ay.lo / st + 1e-9) * st;
  }
  // ticks and grid
  auto hline = [&](double py, const std::string& label) {
    o << "<line x1=\"" << x0 << "\" x2=\"" << x1 << "\" y1=\"" << f2(py) << "\" y2=\"" << f2(py)
      << "\" stroke=\"#e3e3e3\"/><line x1=\"" << x0 - 5 << "\" x2=\"" << x0 << "\" y1=\"" << f2(py) << "\" y2=\""
      << f2(py) << "\" stroke=\"#333\"/><text x=\"" << x0 - 8 << "\" y=\"" << f2(py + 4)
      << "\" text-anchor=\"end\" font-size=\"11\">" << xml_escape(label) << "</text>";
  };
  if (ay.log) {
    const int decades = static_cast<int>(ay.hi - ay.lo);
    const int every = std::max(1, decades / 8 + (decades % 8 ? 1 : 0));
    for (int k = static_cast<int>(ay.lo); k <= static_cast<int>(ay.hi); k += every) {
      char b[16];
      std::snprintf(b, sizeof b, "1e%d", k);
      hline(ay.map(std::pow(10.0, k), y0, y1), k == 0 ? "1" : b);
    }
  } else {
    const double st = nice_step(ay.hi - ay.lo, 5);
    for (double v = ay.lo; v <= ay.hi + st * 1e-6; v += st) hline(ay.map(v, y0, y1), tick_label(v, st));
  }
  if (ax.log) {
    for (int k = static_cast<int>(std::floor(ax.lo)); k <= static_cast<int>(std::floor(ax.hi)); ++k)
      for (int m : {1, 2, 5}) {
        const double v = m * std::pow(10.0, k);
        if (std::log10(v) > ax.hi) break;
        if (std::log10(v) < ax.lo) continue;
        const double px = ax.map(v, x0, x1);
        o << "<line x1=\"" << f2(px) << "\" x2=\"" << f2(px) << "\" y1=\"" << y0 << "\" y2=\"" << y0 + 5
          << "\" stroke=\"#333\"/><text x=\"" << f2(px) << "\" y=\"" << y0 + 18
          << "\" text-anchor=\"middle\" font-size=\"11\">" << xml_escape(tick_label(v, 1)) << "</text>";
      }
    o << "<text x=\"" << x1 + 12 << "\" y=\"" << y0 + 18 << "\" font-size=\"11\" fill=\"#555\">log x</text>";
  } else {
    double st = nice_step(ax.hi - ax.lo, 8);
    if (any_bars || xmax - xmin >= 1) st = std::max(st, 1.0);  // integer steps, bins
    for (double v = std::ceil(ax.lo / st - 1e-9) * st; v <= ax.hi + st * 1e-6; v += st) {
      const double px = ax.map(v, x0, x1);
      o << "<line x1=\"" << f2(px) << "\" x2=\"" << f2(px) << "\" y1=\"" << y0 << "\" y2=\"" << y0 + 5
        << "\" stroke=\"#333\"/><text x=\"" << f2(px) << "\" y=\"" << y0 + 18
        << "\" text-anchor=\"middle\" font-size=\"11\">" << xml_escape(tick_label(v, st)) << "</text>";
    }
  }
  o << "<text x=\"" << f2((x0 + x1) / 2) << "\" y=\"" << H - 10 << "\" text-anchor=\"middle\" font-size=\"12\">"
    << xml_escape(p.xlabel) << "</text>";
  o << "<text transform=\"translate(16," << f2((y0 + y1) / 2)
    << ") rotate(-90)\" text-anchor=\"middle\" font-size=\"12\">" << xml_escape(p.ylabel) << "</text>";
  if (ay.log)  // the scale note under the legend, where it has room
    o << "<text x=\"" << x1 + 12 << "\" y=\"" << y0 << "\" font-size=\"11\" fill=\"#555\">"
      << (dropped_nonpositive ? "log scale; zeros not shown" : "log scale") << "</text>";
  // data, clipped to the plot area
  o << "<g>";
  std::size_t bar_i = 0;
  const double clamp_lo = ay.log ? std::pow(10.0, ay.lo) : ay.lo;
  for (std::size_t si = 0; si < p.series.size(); ++si) {
    const auto& s = p.series[si];
    const char* col = kColors[si % (sizeof kColors / sizeof *kColors)];
    const std::size_t n = std::min(s.x.size(), s.y.size());
    if (s.style == SvgSeries::Style::line) {
      if (s.lo.size() == n && s.hi.size() == n) {  // band: hi forward, lo back; one polygon per finite run
        std::size_t i = 0;
        while (i < n) {
          while (i < n && !(ax.ok(s.x[i]) && std::isfinite(s.hi[i]) && std::isfinite(s.lo[i]) && ay.ok(s.hi[i]))) ++i;
          std::size_t j = i;
          while (j < n && ax.ok(s.x[j]) && std::isfinite(s.hi[j]) && std::isfinite(s.lo[j]) && ay.ok(s.hi[j])) ++j;
          if (j > i + 1) {
            o << "<polygon fill=\"" << col << "\" fill-opacity=\"0.18\" stroke=\"none\" points=\"";
            for (std::size_t k = i; k < j; ++k)
              o << f2(ax.map(s.x[k], x0, x1)) << "," << f2(ay.map(s.hi[k], y0, y1)) << " ";
            for (std::size_t k = j; k-- > i;)
              o << f2(ax.map(s.x[k], x0, x1)) << "," << f2(ay.map(std::max(s.lo[k], clamp_lo), y0, y1)) << " ";
            o << "\"/>";
          }
          i = j;
        }
      }
      std::string d;
      bool pen = false;
      for (std::size_t i = 0; i < n; ++i) {
        if (!ax.ok(s.x[i]) || !ay.ok(s.y[i])) {
          pen = false;
          continue;
        }
        d += (pen ? "L" : "M") + f2(ax.map(s.x[i], x0, x1)) + "," + f2(ay.map(s.y[i], y0, y1)) + " ";
        pen = true;
      }
      if (!d.empty()) o << "<path fill=\"none\" stroke=\"" << col << "\" stroke-width=\"1.8\" d=\"" << d << "\"/>";
      if (n == 1 && ay.ok(s.y[0]))
        o << "<circle cx=\"" << f2(ax.map(s.x[0], x0, x1)) << "\" cy=\"" << f2(ay.map(s.y[0], y0, y1))
          << "\" r=\"3\" fill=\"" << col << "\"/>";
    } else if (s.style == SvgSeries::Style::points) {
      for (std::size_t i = 0; i < n; ++i)
        if (ax.ok(s.x[i]) && ay.ok(s.y[i]))
          o << "<circle cx=\"" << f2(ax.map(s.x[i], x0, x1)) << "\" cy=\"" << f2(ay.map(s.y[i], y0, y1))
            << "\" r=\"3.5\" fill=\"" << col << "\" fill-opacity=\"0.75\"/>";
    } else {
      const double bw =
          (ax.map(bin, x0, x1) - ax.map(0, x0, x1)) * 0.8 / double(std::max<std::size_t>(1, n_bar_series));
      for (std::size_t i = 0; i < n; ++i) {
        if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i]) || s.y[i] <= 0) continue;
        const double cx = ax.map(s.x[i], x0, x1) - bw * double(n_bar_series) / 2 + bw * double(bar_i);
        const double top = ay.map(s.y[i], y0, y1), base = ay.map(std::max(0.0, ay.lo), y0, y1);
        o << "<rect x=\"" << f2(cx) << "\" y=\"" << f2(top) << "\" width=\"" << f2(bw) << "\" height=\""
          << f2(base - top) << "\" fill=\"" << col << "\"/>";
      }
      ++bar_i;
    }
  }
  o << "</g>";
  // legend, right of the plot area
  double ly = y1 + 8;
  for (std::size_t si = 0; si < p.series.size(); ++si) {
    const char* col = kColors[si % (sizeof kColors / sizeof *kColors)];
    std::string name = p.series[si].name;
    if (name.size() > 28) name = name.substr(0, 27) + "…";
    o << "<rect x=\"" << x1 + 12 << "\" y=\"" << f2(ly) << "\" width=\"14\" height=\"10\" fill=\"" << col
      << "\"/><text x=\"" << x1 + 32 << "\" y=\"" << f2(ly + 9) << "\" font-size=\"11\">" << xml_escape(name)
      << "</text>";
    ly += 16;
  }
  o << "</svg>";
  return o.str();
}

}  // namespace kvconf::reports::detail
