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
