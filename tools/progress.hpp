// The progress display of kvconf model (and kvconf run's model part) on stderr: pairs done/total, rate in pairs/s and
// ETA. On a terminal one line redrawn in place; otherwise (a log file, CI) plain lines at most every few seconds.
#pragma once

#include <cstdio>
#include <string>

#include "kvconf/protocol/protocol.hpp"
#include "protocol_names.hpp"

namespace kvconf::tools {

// "[#####.....] 12/40 pairs  0.53 pairs/s  ETA 0:00:52  <last pair's key>": rate over the pairs run by this invocation
// (resumed ones excluded), ETA = pairs left / rate ("--" before the first new pair). `bar` characters wide (0: none).
std::string format_progress(const Progress& p, std::size_t bar);

class ProgressBar {
 public:
  // Lines start with `label` ("kvconf model"). tty: redraw one line with '\r'; otherwise print a line when at least
  // `interval_s` passed since the last one, and always for the first and the last pair.
  ProgressBar(std::string label, std::FILE* out, bool tty, double interval_s = 10.0);
  explicit ProgressBar(std::string label);  // on stderr, tty = isatty(stderr)
  ~ProgressBar();                           // finish()
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  void update(const Progress& p);
  void operator()(const Progress& p) { update(p); }  // usable as a ProgressFn through std::ref
  void finish();                                     // ends the redrawn line (tty)

 private:
  std::string label_;
  std::FILE* out_;
  bool tty_;
  double interval_s_;
  double last_print_ = -1.0;
  bool open_line_ = false;
};

}  // namespace kvconf::tools
