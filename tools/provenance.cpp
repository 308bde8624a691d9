// provenance(): the fields every report's meta starts with (provenance.hpp).
#include "provenance.hpp"

#include <unistd.h>

#include <ctime>

#include "kvconf/kernels/torch.hpp"

namespace kvconf::tools {

nlohmann::json provenance(const std::string& command, bool describe_torch) {
  char date[32] = "";
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  if (gmtime_r(&now, &utc)) std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &utc);
  char host[256] = "";
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  // The torch kernels in the sweep are judged as this libtorch built and dispatched them (version, CPU capability);
  // asking loads it, so a command that runs no torch kernel does not ask.
  const std::string torch =
      describe_torch ? kernels::torch_description() : "not loaded (" + command + " runs no torch kernel)";
  return {{"kvconf_version", KVCONF_VERSION}, {"command", command}, {"date", date}, {"host", host}, {"torch", torch}};
}

}  // namespace kvconf::tools
