// A results folder and its manifest.json, shared by every command that writes one (kvconf model's run_setup, the
// kernel sweep of kvconf kernels): the folder made and probed for writing, the manifest read as a JSON object, and
// written atomically. Errors are BadInput naming the folder or file.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>

namespace kvconf::protocol {

// Creates `out` (and its parents) and checks that a file can be written in it; BadInput "--out DIR: ..." otherwise.
void ensure_out_dir(const std::filesystem::path& out);

// The manifest at `file` as a JSON object: an empty object when there is none; BadInput when it is not a JSON object.
nlohmann::json read_manifest(const std::filesystem::path& file);

// Writes `manifest` to `file` atomically (temporary file, fsync, rename); BadInput naming the file otherwise.
void write_manifest_file(const std::filesystem::path& file, const nlohmann::json& manifest);

}  // namespace kvconf::protocol
