// Shared by the statistics tests: EXPECT_INVALID(expr, "fn") expects std::invalid_argument whose message starts "fn:".
#pragma once

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#define EXPECT_INVALID(expr, fn)                                                        \
  do {                                                                                  \
    try {                                                                               \
      (void)(expr);                                                                     \
      ADD_FAILURE() << #expr " did not throw";                                          \
    } catch (const std::invalid_argument& e) {                                          \
      EXPECT_EQ(std::string(e.what()).rfind(std::string(fn) + ":", 0), 0u) << e.what(); \
    }                                                                                   \
  } while (0)
