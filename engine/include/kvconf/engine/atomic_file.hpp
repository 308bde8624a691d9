// Atomic file writes: write to a temporary file in the same directory, fsync, then rename.
#pragma once

#include <filesystem>
#include <string_view>

namespace kvconf::engine {

// Writes `content` to `path` atomically (readers see the old file or the new one, never a torn
// one). Creates parent directories. Throws std::runtime_error naming the path on failure.
void write_file_atomic(const std::filesystem::path& path, std::string_view content);

}  // namespace kvconf::engine
