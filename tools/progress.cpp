// Progress bar / progress lines on stderr for the protocol (progress.hpp).
#include "progress.hpp"

#include <unistd.h>

#include <cmath>
#include <utility>

namespace kvconf::tools {
namespace {

std::string hms(double s) {
  if (!std::isfinite(s) || s < 0) return "--";
  const long long t = std::llround(s);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", t / 3600, (t / 60) % 60, t % 60);
  return buf;
}

}  // namespace

std::string format_progress(const Progress& p, std::size_t bar) {
  std::string s;
  if (bar > 0) {
    const std::size_t filled = p.total && p.done < p.total ? p.done * bar / p.total : bar;
    s.push_back('[');
    s.append(filled, '#');
    s.append(bar - filled, '.');
    s.append("] ");
  }
  const std::size_t fresh = p.done >= p.resumed ? p.done - p.resumed : 0;
  const double rate = p.elapsed_s > 0 && fresh > 0 ? static_cast<double>(fresh) / p.elapsed_s : 0.0;
  char buf[160];
  std::snprintf(buf, sizeof buf, "%zu/%zu pairs", p.done, p.total);
  s += buf;
  if (p.resumed) s += " (" + std::to_string(p.resumed) + " resumed)";
  if (rate > 0) {
    std::snprintf(buf, sizeof buf, "  %.3g pairs/s  ETA %s", rate,
                  hms(static_cast<double>(p.total - p.done) / rate).c_str());
    s += buf;
  } else {
    s += "  -- pairs/s  ETA --";
  }
  if (p.last) s += "  " + p.last->key();
  return s;
}

ProgressBar::ProgressBar(std::string label, std::FILE* out, bool tty, double interval_s)
    : label_(std::move(label)), out_(out), tty_(tty), interval_s_(interval_s) {}

ProgressBar::ProgressBar(std::string label) : ProgressBar(std::move(label), stderr, ::isatty(::fileno(stderr)) != 0) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(const Progress& p) {
  const bool last = p.done >= p.total;
  if (tty_) {
    std::fprintf(out_, "\r\033[K%s: %s", label_.c_str(), format_progress(p, 30).c_str());
    open_line_ = true;
    if (last) finish();
  } else if (last_print_ < 0 || last || p.elapsed_s - last_print_ >= interval_s_) {
    std::fprintf(out_, "%s: %s\n", label_.c_str(), format_progress(p, 0).c_str());
    last_print_ = p.elapsed_s;
  }
  std::fflush(out_);
}

void ProgressBar::finish() {
  if (tty_ && open_line_) std::fputc('\n', out_);
  open_line_ = false;
  std::fflush(out_);
}

}  // namespace kvconf::tools
