// The exception a kernel's run() throws when the kernel itself failed — an isolated plugin kernel killed by a signal,
// past its time limit, or returning an error code — as opposed to bad input to kvconf. The kernel sweep turns it
// into a failed rule (`kernel_ran`) of that item instead of ending the sweep; the suites report it as a failed case.
#pragma once

#include <stdexcept>
#include <string>

namespace kvconf::kernels {

struct KernelFailure : std::runtime_error {
  explicit KernelFailure(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace kvconf::kernels
