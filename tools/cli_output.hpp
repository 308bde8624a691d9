// What kvconf's commands print alike: an error message on one line with the status it means, the report written with
// its terminal summary, and the rules of the pairs that failed.
#pragma once

#include <cstddef>
#include <exception>
#include <string>
#include <vector>

#include "kvconf/results/records.hpp"
#include "kvconf/reports/report.hpp"

namespace kvconf::tools {

// The message with its line breaks turned into spaces and trailing spaces dropped (bad input: one stderr line).
std::string one_line(std::string s);

// A command's failure, one stderr line: bad input (protocol::BadInput) "<command>: <message>", returning status 2;
// any other exception "<command>: error: <message>", returning status 1.
int print_failure(const std::string& command, const std::exception& e);

// Evaluates the report's rules, writes report.{html,md,json} and junit.xml to `out`, prints the terminal summary and
// where the report is; returns how many rule verdicts failed.
std::size_t write_report_with_summary(const reports::ReportInput& in, const std::string& out);

// Prints "FAIL <key> <rule>: ..." for the failing rules of the first 5 failing pairs and "<command>: N of M pairs
// failed a rule" when any failed; returns N.
std::size_t print_failed_pairs(const std::vector<results::RunPairRecord>& records, const std::string& command);

}  // namespace kvconf::tools
