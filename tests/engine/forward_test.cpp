// The forward pass seen through its seams (engine/src/forward.cpp): the captured intermediates are the layer's math
// under LayerTrace's names, the K/V store holds the rotated K and V rows, and an op patch rewrites its op's last row
// before the next op reads it. Exact properties only (bitwise equalities of a correct engine), on small random models.
#include <gtest/gtest.h>

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "kvconf/engine/context.hpp"
#include "kvconf/engine/profile.hpp"
#include "random_model.hpp"

namespace kvconf::engine {
namespace {

using testing::random_model;
using testing::random_tokens;
using testing::small_config;
using Vec = std::vector<float>;

const kernels::Registry& registry() {
  static const kernels::Registry r = kernels::cpu_registry();
  return r;
}

// Rows [r0, r1) of t: (rows, width).
Vec rows(const Vec& t, std::size_t width, std::size_t r0, std::size_t r1) {
  return {t.begin() + static_cast<std::ptrdiff_t>(r0 * width), t.begin() + static_cast<std::ptrdiff_t>(r1 * width)};
}

// fl(a ∘ b) elementwise in fp32: the fp32 profile's rounding of the residual adds and the gate product.
Vec add(const Vec& a, const Vec& b) {
  Vec y(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) y[i] = a[i] + b[i];
  return y;
}
Vec mul(const Vec& a, const Vec& b) {
  Vec y(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) y[i] = a[i] * b[i];
  return y;
}

class ForwardPerArch : public ::testing::TestWithParam<Arch> {};

// A second prefill chunk (rows at positions 5..7 over 5 cached rows), captured under the fp32 profile, where every
// elementwise op is a plain float op: each layer's values are wired as the model says (x_in is the stream entering,
// h_mid = x_in + o (Gemma-2: + o_normed), prod = act · up, x_out = h_mid + down (Gemma-2: + down_normed) is the
// stream leaving), and the layer's cache rows hold exactly k_rope and v.
TEST_P(ForwardPerArch, CapturedLayerIsTheLayerMath) {
  const ModelConfig c = small_config(GetParam());
  const Model m = random_model(c, Format::fp32, 31);
  Context ctx(m, resolve(find_profile("fp32"), registry()));
  const std::vector<int> tokens = random_tokens(8, c.vocab, 32);
  ctx.prefill(std::span(tokens).first(5));
  ForwardOptions o;
  o.capture_hidden = o.capture_layers = true;
  ctx.prefill(std::span(tokens).subspan(5), o);
  const Trace& t = ctx.trace();
  const std::size_t n = 3, kvd = c.kv_dim();
  ASSERT_EQ(t.layers.size(), c.n_layers);
  ASSERT_EQ(t.hidden.size(), c.n_layers + 1);
  for (std::size_t l = 0; l < c.n_layers; ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    const LayerTrace& a = t.layers[l];
    EXPECT_EQ(a.x_in, t.hidden[l]);
    EXPECT_EQ(a.x_out, t.hidden[l + 1]);
    EXPECT_EQ(a.o_normed.empty(), !c.post_norms);
    EXPECT_EQ(a.down_normed.empty(), !c.post_norms);
    EXPECT_EQ(a.h_mid, add(a.x_in, c.post_norms ? a.o_normed : a.o));
    EXPECT_EQ(a.prod, mul(a.act, a.up));
    EXPECT_EQ(a.x_out, add(a.h_mid, c.post_norms ? a.down_normed : a.down));
    EXPECT_EQ(a.q.size(), n * c.q_dim());
    EXPECT_EQ(a.q_rope.size(), a.q.size());
    EXPECT_NE(a.k_rope, a.k);  // rotated at positions 5..7
    EXPECT_EQ(rows(ctx.cache().k[l], kvd, 5, 8), a.k_rope);
    EXPECT_EQ(rows(ctx.cache().v[l], kvd, 5, 8), a.v);
  }
  EXPECT_EQ(t.final_normed.size(), c.hidden);
}

INSTANTIATE_TEST_SUITE_P(Engine, ForwardPerArch, ::testing::Values(Arch::llama, Arch::mistral, Arch::gemma2),
                         [](const auto& i) { return std::string(arch_name(i.param)); });

// Each op patch (ForwardOptions::op_patches) on Mistral's GQA shapes (q: 4 heads, k and v: 2): the op's captured
// output has the patch as its last row and the unpatched values in every other row, a patched k_rope or v is what the
// cache row holds, the logits move; a patch of the wrong width throws naming the op and the layer.
TEST(EngineForward, OpPatchRewritesTheLastRowOfItsOp) {
  const ModelConfig c = small_config(Arch::mistral);
  const Model m = random_model(c, Format::fp16, 33);
  Context ctx(m, resolve(find_profile("fp16-eager"), registry()));
  const std::vector<int> prompt = random_tokens(6, c.vocab, 34);
  ForwardOptions cap;
  cap.capture_layers = true;
  const Vec base = ctx.recompute(prompt, cap);
  const std::vector<LayerTrace> plain = ctx.trace().layers;
  const std::size_t n = prompt.size(), l = 1;
  struct Op {
    OpStage stage;
    Vec LayerTrace::*value;  // the captured output; v: none (LayerTrace::v is the projection), the cache row instead
    std::size_t width;
  };
  const std::vector<Op> ops = {
      {OpStage::attn_in, &LayerTrace::attn_in, c.hidden}, {OpStage::q_rope, &LayerTrace::q_rope, c.q_dim()},
      {OpStage::k_rope, &LayerTrace::k_rope, c.kv_dim()}, {OpStage::v, nullptr, c.kv_dim()},
      {OpStage::attn, &LayerTrace::attn, c.q_dim()},      {OpStage::o, &LayerTrace::o, c.hidden},
      {OpStage::mlp_in, &LayerTrace::mlp_in, c.hidden},   {OpStage::down, &LayerTrace::down, c.hidden}};
  for (const Op& op : ops) {
    SCOPED_TRACE(op_stage_name(op.stage));
    Vec row(op.width);
    for (std::size_t i = 0; i < row.size(); ++i) row[i] = 0.25f + static_cast<float>(i % 7) * 0.0625f;  // fp16-exact
    ForwardOptions o = cap;
    o.op_patches.push_back({l, op.stage, row});
    EXPECT_NE(ctx.recompute(prompt, o), base);
    const LayerTrace& a = ctx.trace().layers[l];
    if (op.value != nullptr) {
      EXPECT_EQ(rows(a.*op.value, op.width, n - 1, n), row);
      EXPECT_EQ(rows(a.*op.value, op.width, 0, n - 1), rows(plain[l].*op.value, op.width, 0, n - 1));
    }
    const KvCache& cache = ctx.last_recompute_cache();
    if (op.stage == OpStage::k_rope) {
      EXPECT_EQ(rows(cache.k[l], op.width, n - 1, n), row);
    }
    if (op.stage == OpStage::v) {
      EXPECT_EQ(rows(cache.v[l], op.width, n - 1, n), row);
    }

    ForwardOptions bad = cap;
    bad.op_patches.push_back({l, op.stage, Vec(op.width + 1)});
    try {
      ctx.recompute(prompt, bad);
      ADD_FAILURE() << "a patch of " << op.width + 1 << " values was taken";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("op patch ") + op_stage_name(op.stage) + " of layer 1"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace kvconf::engine
