// The progress line of `kvconf model` / `kvconf run` (tools/progress.hpp): counts, rate and ETA.
#include "progress.hpp"

#include <gtest/gtest.h>

namespace kvconf::tools {
namespace {

TEST(Progress, FormatsCountsRateAndEta) {
  Progress p;
  p.done = 12;
  p.total = 40;
  p.resumed = 2;
  p.elapsed_s = 20.0;  // 10 new pairs in 20 s: 0.5 pairs/s, 28 left: 56 s
  EXPECT_EQ(format_progress(p, 10), "[###.......] 12/40 pairs (2 resumed)  0.5 pairs/s  ETA 0:00:56");
  p.done = p.resumed;
  EXPECT_EQ(format_progress(p, 0), "2/40 pairs (2 resumed)  -- pairs/s  ETA --");
}

}  // namespace
}  // namespace kvconf::tools
