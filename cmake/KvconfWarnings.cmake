# Compiler flags shared by every kvconf target, and the flag that keeps emulation code honest.
add_library(kvconf_flags INTERFACE)
add_library(kvconf::flags ALIAS kvconf_flags)
target_compile_options(kvconf_flags INTERFACE
  $<$<CXX_COMPILER_ID:GNU,Clang>:-Wall -Wextra -Wpedantic -Wshadow -Wno-unused-parameter>)

# Emulation and oracle code must round exactly where it says: no a*b+c contracted into an FMA
# behind our back (notes/numerics.md §4), and no x87 excess precision.
add_library(kvconf_strict_fp INTERFACE)
add_library(kvconf::strict_fp ALIAS kvconf_strict_fp)
target_compile_options(kvconf_strict_fp INTERFACE
  $<$<CXX_COMPILER_ID:GNU,Clang>:-ffp-contract=off -fno-fast-math -mfpmath=sse -msse2>)

# Code that parses, writes and orchestrates rather than computes (the CLI, reports, the protocol's files and runner,
# golden baselines, results, the llama.cpp trace tool, the test programs' own code) compiles at -O1 in Release builds.
# Its translation units spend about two thirds of their compile time in the optimiser, on nlohmann/json's and
# GoogleTest's templates (-ftime-report); at -O1 they compile 30-45 % faster (README, "Where .ci/run's time goes").
# The arithmetic kvconf emulates and checks (numerics, reference, kernels, engine, conformance, analysis) keeps -O3,
# and no result depends on the level: no FMA contraction, no fast-math, SSE arithmetic (kvconf_strict_fp above).
function(kvconf_light_optimisation target)
  target_compile_options(${target} PRIVATE $<$<AND:$<CONFIG:Release>,$<COMPILE_LANG_AND_ID:CXX,GNU,Clang>>:-O1>)
endfunction()
