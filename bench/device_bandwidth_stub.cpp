// The device bandwidth probe in a build without CUDA (KVCONF_ENABLE_CUDA=OFF): it always gives its reason.
#include <stdexcept>

#include "device_bandwidth.hpp"

namespace kvconf::bench {

std::optional<std::string> device_bandwidth_unavailable() {
  return std::string("built without CUDA (KVCONF_ENABLE_CUDA=OFF)");
}

Bandwidth measure_device_copy_bandwidth(std::size_t, int) {
  throw std::runtime_error("device copy bandwidth: " + *device_bandwidth_unavailable());
}

}  // namespace kvconf::bench
