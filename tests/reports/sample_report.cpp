// kvconf_report_sample DIR: writes a sample report (report.json/md/html, junit.xml and the per model×profile
// sub-reports) from synthetic records, for the XML well-formedness test and for looking at the HTML in a browser.
#include <cmath>
#include <cstdio>
#include <iostream>

#include "kvconf/reports/report.hpp"
#include "synthetic_records.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: kvconf_report_sample DIR\n");
    return 2;
  }
  using kvconf::test::synthetic_kernel;
  using kvconf::test::synthetic_pair;
  kvconf::reports::ReportInput in;
  in.title = "kvconf sample report <synthetic records> & \"quotes\"";  // markup characters: escaping is tested
  in.meta = {{"kvconf_version", "sample"}, {"command", "kvconf_report_sample"}, {"note", "synthetic <records> & co"}};
  std::uint64_t lcg = 12345;
  auto next = [&] { return (lcg = lcg * 6364136223846793005ull + 1442695040888963407ull) >> 33; };
  for (const char* model : {"fixture:llama2-tiny", "fixture:mistral-tiny"})
    for (const char* strategy : {"greedy", "topk", "topp"})
      for (std::uint64_t seed = 0; seed < 3; ++seed)
        for (int i = 0; i < 12; ++i) {
          const std::string id = "gsm8k:" + std::to_string(100 + i);
          const std::size_t flip = next() % 24;
          in.pairs.push_back(synthetic_pair(model, "fp16-eager", strategy, seed, id, 32, flip,
                                            1e-6 * (1 + double(next() % 10)), 0.2 + 1.5 / (1.0 + double(flip))));
          in.pairs.back().correct_on = next() % 10 < 3;  // graded answers: ~30% vs ~20% correct
          in.pairs.back().correct_off = next() % 10 < 2;
          in.pairs.push_back(synthetic_pair(model, "fp32", strategy, seed, id, 32, std::nullopt,
                                            1e-15 * (1 + double(next() % 10)), 0));
          in.pairs.back().correct_on = in.pairs.back().correct_off = next() % 10 < 3;
        }
  for (std::size_t n : {16, 32, 64, 128, 256})
    for (std::size_t d : {64, 128, 256}) {
      in.kernels.push_back(
          synthetic_kernel("cpu.attn.a1_flash2.f16", "attention", n, d, 0.05 + 0.01 * double(next() % 30)));
      in.kernels.push_back(
          synthetic_kernel("cpu.attn.a7_invariant.f16", "attention", n, d, 0.02 + 0.01 * double(next() % 10)));
    }
  in.kernels.push_back(synthetic_kernel("cpu.gemm.g1.f16", "gemm", 4096, 0, 0.3));
  in.kernels.push_back(synthetic_kernel("cpu.attn.a1_flash2.f16", "attention", 16, 512, 0, "head_dim 512 > 256"));
  kvconf::reports::write_report(in, argv[1]);
  std::cout << kvconf::reports::terminal_summary(in, kvconf::reports::evaluate_rules(in));
  return 0;
}
