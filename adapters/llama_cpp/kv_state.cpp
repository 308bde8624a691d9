// Reads a sequence's K and V rows out of llama.cpp's saved sequence state. The layout, as llama.cpp 0c1e570 writes it
// (src/llama-context.cpp state_seq_get_data, then src/llama-kv-cache.cpp llama_kv_cache::state_write,
// state_write_meta, state_write_data):
//   u32 magic 0xaf143cd8, i32 seq_id;
//   u32 n_stream; per stream: u32 cell_count, and when it is not 0:
//     per cell (in cell order): i32 pos, u32 n_seq_id, i32 seq_id × n_seq_id
//     u32 v_trans, u32 n_layer; per layer: i32 k_type, u64 k_row_bytes, cell_count K rows
//     v_trans = 0: per layer: i32 v_type, u64 v_row_bytes, cell_count V rows
//     v_trans = 1: per layer: i32 v_type, u32 element_bytes, u32 n_embd_v, then for each of the n_embd_v elements of a
//                  row, that element of every cell
// A model with sliding-window layers saves a second cache after the first (llama_kv_cache_iswa), which this reader
// refuses. Anything that does not add up to the state's size is refused too: another version's layout.
#include "kv_state.hpp"

#include <ggml.h>
#include <llama.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>

#include "llama_run.hpp"

namespace kvconf::llama_cpp {

namespace {

// A cursor over the state's bytes; BadInput naming the field when they run out.
struct Reader {
  const std::vector<std::uint8_t>& b;
  std::size_t at = 0;
  const std::uint8_t* take(std::size_t n, const char* what) {
    if (n > b.size() - at)
      throw BadInput("--kv: llama.cpp's sequence state ends inside " + std::string(what) + " (at byte " +
                     std::to_string(at) + " of " + std::to_string(b.size()) +
                     "): a layout this adapter does not read (another llama.cpp version?)");
    const std::uint8_t* p = b.data() + at;
    at += n;
    return p;
  }
  template <class T>
  T get(const char* what) {
    T v;
    std::memcpy(&v, take(sizeof v, what), sizeof v);
    return v;
  }
};

// Elements of `type` as floats (f32 copied, every other type through ggml's own dequantisation).
void to_float(std::int32_t type, const std::uint8_t* src, std::size_t n, float* dst) {
  const auto t = static_cast<ggml_type>(type);
  if (t == GGML_TYPE_F32) {
    std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  const ggml_type_traits* tr = ggml_get_type_traits(t);
  if (type < 0 || type >= GGML_TYPE_COUNT || !tr || !tr->to_float || n % static_cast<std::size_t>(tr->blck_size))
    throw BadInput("--kv: the cache's ggml type " + std::to_string(type) + " cannot be read as floats");
  tr->to_float(src, dst, static_cast<std::int64_t>(n));
}

// Elements in a row of `bytes` bytes of `type`.
std::size_t elements(std::int32_t type, std::uint64_t bytes) {
  const auto t = static_cast<ggml_type>(type);
  if (type < 0 || type >= GGML_TYPE_COUNT || ggml_type_size(t) == 0 || bytes % ggml_type_size(t))
    throw BadInput("--kv: a row of " + std::to_string(bytes) + " bytes of ggml type " + std::to_string(type));
  return static_cast<std::size_t>(bytes / ggml_type_size(t) * static_cast<std::uint64_t>(ggml_blck_size(t)));
}

}  // namespace

std::vector<std::uint8_t> save_sequence(llama_context* ctx, int seq) {
  std::vector<std::uint8_t> bytes(llama_state_seq_get_size(ctx, seq));
  if (llama_state_seq_get_data(ctx, bytes.data(), bytes.size(), seq) != bytes.size())
    throw std::runtime_error("llama_state_seq_get_data wrote another size than llama_state_seq_get_size said");
  return bytes;
}

KvRows read_kv(llama_context* ctx, int seq, std::size_t n_layers) {
  const std::vector<std::uint8_t> bytes = save_sequence(ctx, seq);
  Reader r{bytes};
  KvRows out;
  bool found = false;
  if (r.get<std::uint32_t>("the magic number") != 0xaf143cd8u || r.get<std::int32_t>("the sequence id") != seq)
    throw BadInput("--kv: llama.cpp's sequence state does not start with its magic number and the sequence id");
  const auto n_stream = r.get<std::uint32_t>("n_stream");
  for (std::uint32_t s = 0; s < n_stream; ++s) {
    const auto cells = r.get<std::uint32_t>("cell_count");
    if (cells == 0) continue;
    if (found) throw BadInput("--kv: the sequence's rows are in two streams of llama.cpp's cache");
    found = true;
    std::vector<std::int32_t> pos(cells);
    for (std::uint32_t c = 0; c < cells; ++c) {
      pos[c] = r.get<std::int32_t>("a cell's position");
      const auto n_seq = r.get<std::uint32_t>("a cell's sequence count");
      r.take(static_cast<std::size_t>(n_seq) * sizeof(std::int32_t), "a cell's sequence ids");
    }
    // Cell c holds position pos[c]: the rows must be exactly 0 .. cells − 1, each once.
    std::vector<std::size_t> row_of_cell(cells);
    std::vector<bool> seen(cells, false);
    for (std::uint32_t c = 0; c < cells; ++c) {
      if (pos[c] < 0 || static_cast<std::uint32_t>(pos[c]) >= cells || seen[static_cast<std::size_t>(pos[c])])
        throw BadInput("--kv: the saved cells hold positions other than 0 .. " + std::to_string(cells - 1) +
                       " each once (cell " + std::to_string(c) + " holds " + std::to_string(pos[c]) + ")");
      seen[static_cast<std::size_t>(pos[c])] = true;
      row_of_cell[c] = static_cast<std::size_t>(pos[c]);
    }
    const auto v_trans = r.get<std::uint32_t>("v_trans");
    const auto layers = r.get<std::uint32_t>("n_layer");
    if (layers != n_layers)
      throw BadInput("--kv: the saved cache holds " + std::to_string(layers) + " layers, the model " +
                     std::to_string(n_layers) + " (a model with sliding-window layers saves them apart)");
    out.layers = layers;
    out.rows = cells;
    std::vector<float> row;
    // K (then V when not transposed): per layer a type, a row size and `cells` rows.
    const auto rows_of = [&](std::vector<float>& dst, const char* what) {
      for (std::uint32_t l = 0; l < layers; ++l) {
        const auto type = r.get<std::int32_t>(what);
        const auto row_bytes = r.get<std::uint64_t>(what);
        const std::size_t dim = elements(type, row_bytes);
        if (out.dim == 0) out.dim = dim, out.k.assign(layers * cells * dim, 0.0f), out.v = out.k;
        if (dim != out.dim) throw BadInput("--kv: layers of different widths (" + std::to_string(dim) + ")");
        row.resize(dim);
        for (std::uint32_t c = 0; c < cells; ++c) {
          to_float(type, r.take(row_bytes, what), dim, row.data());
          std::copy(row.begin(), row.end(),
                    dst.begin() + static_cast<std::ptrdiff_t>((l * cells + row_of_cell[c]) * dim));
        }
      }
    };
    rows_of(out.k, "the K rows");
    if (v_trans == 0) {
      rows_of(out.v, "the V rows");
    } else {
      for (std::uint32_t l = 0; l < layers; ++l) {
        const auto type = r.get<std::int32_t>("the V type");
        const auto el = r.get<std::uint32_t>("the V element size");
        const auto dim = r.get<std::uint32_t>("the V width");
        if (dim != out.dim || el != ggml_type_size(static_cast<ggml_type>(type)) ||
            ggml_blck_size(static_cast<ggml_type>(type)) != 1)
          throw BadInput("--kv: a transposed V of width " + std::to_string(dim) + " and elements of " +
                         std::to_string(el) + " bytes");
        float x = 0.0f;
        for (std::uint32_t j = 0; j < dim; ++j)
          for (std::uint32_t c = 0; c < cells; ++c) {
            to_float(type, r.take(el, "the transposed V"), 1, &x);
            out.v[(l * cells + row_of_cell[c]) * out.dim + j] = x;
          }
      }
    }
  }
  if (!found) throw BadInput("--kv: llama.cpp saved no rows for sequence " + std::to_string(seq));
  if (r.at != bytes.size())
    throw BadInput(
        "--kv: " + std::to_string(bytes.size() - r.at) +
        " bytes of llama.cpp's sequence state follow its cache: a model with sliding-window layers (a second, "
        "windowed cache), which this adapter does not read");
  return out;
}

}  // namespace kvconf::llama_cpp
