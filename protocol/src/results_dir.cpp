// ensure_out_dir, read_manifest, write_manifest_file (results_dir.hpp).
#include "kvconf/protocol/results_dir.hpp"

#include <cerrno>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>

#include "kvconf/engine/atomic_file.hpp"
#include "kvconf/protocol/bad_input.hpp"

namespace kvconf::protocol {

void ensure_out_dir(const std::filesystem::path& out) {
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec || !std::filesystem::is_directory(out))
    throw BadInput("--out " + out.string() + ": cannot create the directory (" +
                   (ec ? ec.message() : std::string("a file of that name exists")) + ")");
  const auto probe = out / ".kvconf-write-probe";
  errno = 0;
  std::ofstream f(probe);
  if (!f)
    throw BadInput("--out " + out.string() + ": directory is not writable (" +
                   (errno ? std::generic_category().message(errno) : std::string("cannot create a file there")) + ")");
  f.close();
  std::filesystem::remove(probe, ec);
}

nlohmann::json read_manifest(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return nlohmann::json::object();
  std::ostringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw BadInput(file.string() + ": not a JSON object (a manifest of a kvconf run); choose another --out");
  return j;
}

void write_manifest_file(const std::filesystem::path& file, const nlohmann::json& manifest) {
  try {
    engine::write_file_atomic(file, manifest.dump(2) + "\n");
  } catch (const std::exception& e) {
    throw BadInput("--out " + file.parent_path().string() + ": cannot write " + file.filename().string() + " (" +
                   e.what() + ")");
  }
}

}  // namespace kvconf::protocol
