// LoadError construction: every loader failure is one line "<file>: <field>: <problem>", printed by the CLI as is.
#include "kvconf/engine/error.hpp"

namespace kvconf::engine {

void fail(const std::string& file, const std::string& field, const std::string& problem) {
  std::string msg = file;
  msg += ": ";
  if (!field.empty()) {
    msg += field;
    msg += ": ";
  }
  msg += problem;
  throw LoadError(msg);
}

}  // namespace kvconf::engine
