// The device KV mirrors' bookkeeping (kernels/cuda/kv_mirror.hpp), on the CPU: which rows a call uploads, when a
// mirror starts over, and the public entry points gpu_kv_track / gpu_kv_forget / gpu_kv_rows_changed. The device
// side (that the planned copies reach the kernels) is gpu_kv_mirror_engine_test's, on a GPU.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "kv_mirror.hpp"
#include "kvconf/kernels/gpu.hpp"

namespace kvconf::kernels::cuda {
namespace {

const KvMirrorShape kShape{64, 8, Format::fp16};  // 64 rows of 8 values

// Carries out a plan as the CUDA wrapper does: a fake device allocation when there is none, then commit.
KvSyncPlan run(KvMirrorTable& t, const void* host, std::size_t n_kv, std::size_t n_new, KvMirrorShape s = kShape) {
  auto p = t.plan(host, s, n_kv, n_new);
  EXPECT_TRUE(p.has_value());
  if (!p) return {};
  std::shared_ptr<void> dev = p->device ? p->device : std::make_shared<int>(0);
  t.commit(host, p->generation, dev, n_kv);
  return *p;
}

TEST(KvMirror, UntrackedBuffersGetNoPlan) {
  KvMirrorTable t;
  std::vector<float> buf(64 * 8);
  EXPECT_FALSE(t.plan(buf.data(), kShape, 10, 10).has_value());
  EXPECT_FALSE(t.synced(buf.data()).has_value());
}

TEST(KvMirror, AppendsUploadOnlyTheNewRows) {
  KvMirrorTable t;
  std::vector<float> buf(64 * 8);
  t.track(buf.data());
  KvSyncPlan p = run(t, buf.data(), 10, 10);  // prefill of 10 rows: everything, into a new allocation
  EXPECT_FALSE(p.device);
  EXPECT_EQ(p.upload_begin, 0u);
  EXPECT_EQ(p.upload_end, 10u);
  EXPECT_EQ(t.synced(buf.data()), 10u);
  for (std::size_t n = 11; n <= 20; ++n) {  // decode steps: one row each, into the same allocation
    p = run(t, buf.data(), n, 1);
    EXPECT_TRUE(p.device);
    EXPECT_EQ(p.upload_begin, n - 1);
    EXPECT_EQ(p.upload_end, n);
    EXPECT_EQ(p.poison_begin, p.poison_end);
  }
  p = run(t, buf.data(), 24, 4);  // a chunk of 4
  EXPECT_EQ(p.upload_begin, 20u);
  EXPECT_EQ(p.upload_rows(), 4u);
  // The same rows read again by a call that wrote none (n_new = 0): nothing to copy.
  p = run(t, buf.data(), 24, 0);
  EXPECT_EQ(p.upload_rows(), 0u);
}

TEST(KvMirror, ACallsOwnRowsAreAlwaysUploaded) {
  KvMirrorTable t;
  std::vector<float> buf(64 * 8);
  t.track(buf.data());
  run(t, buf.data(), 12, 12);
  // A retried call rewriting rows [8, 12) (say after an exception), not reported: its own rows go up anyway.
  const KvSyncPlan p = run(t, buf.data(), 12, 4);
  EXPECT_EQ(p.upload_begin, 8u);
  EXPECT_EQ(p.upload_end, 12u);
}

TEST(KvMirror, RowsChangedForcesReupload) {
  KvMirrorTable t;
  std::vector<float> buf(64 * 8);
  t.track(buf.data());
  run(t, buf.data(), 30, 30);
  t.rows_changed(buf.data(), 5);  // patch_cache of rows [5, 9)
  KvSyncPlan p = run(t, buf.data(), 31, 1);
  EXPECT_EQ(p.upload_begin, 5u);
  EXPECT_EQ(p.upload_end, 31u);
  t.rows_changed(buf.data(), 40);  // past the synced rows: nothing to redo
  p = run(t, buf.data(), 32, 1);
  EXPECT_EQ(p.upload_begin, 31u);
}

TEST(KvMirror, ShorterCallPoisonsTheStaleRows) {
  KvMirrorTable t;
  std::vector<float> buf(64 * 8);
  t.track(buf.data());
  run(t, buf.data(), 40, 40);
  t.rows_changed(buf.data(), 0);  // rewritten from row 0 (a rollback / a new prompt in place)
  const KvSyncPlan p = run(t, buf.data(), 16, 16);
  EXPECT_EQ(p.upload_begin, 0u);
  EXPECT_EQ(p.upload_end, 16u);
  EXPECT_EQ(p.poison_begin, 16u);  // rows [16, 40) of the earlier contents go back to NaN
  EXPECT_EQ(p.poison_end, 40u);
}

TEST(KvMirror, ForgetStartsFromZeroAndFreesTheDeviceCopy) {
  KvMirrorTable t;
  std::vector<float> buf(64 * 8);
  t.track(buf.data());
  const KvSyncPlan first = run(t, buf.data(), 20, 20);
  std::weak_ptr<void> dev;
  {
    const auto p = t.plan(buf.data(), kShape, 21, 1);
    ASSERT_TRUE(p && p->device);
    dev = p->device;
  }
  t.forget(buf.data());
  EXPECT_TRUE(dev.expired()) << "the device allocation outlived forget";
  EXPECT_FALSE(t.tracked(buf.data()));
  EXPECT_FALSE(t.plan(buf.data(), kShape, 21, 1).has_value()) << "forget also ends the opt-in";
  // A different buffer at the same address (same capacity): a new mirror, everything uploaded.
  t.track(buf.data());
  const KvSyncPlan p = run(t, buf.data(), 21, 1);
  EXPECT_FALSE(p.device);
  EXPECT_EQ(p.upload_begin, 0u);
  EXPECT_EQ(p.upload_end, 21u);
  EXPECT_NE(p.generation, first.generation);
}

TEST(KvMirror, ShapeChangeResets) {
  KvMirrorTable t;
  std::vector<float> buf(128 * 8);
  t.track(buf.data());
  const KvSyncPlan a = run(t, buf.data(), 20, 20);
  for (const KvMirrorShape s : {KvMirrorShape{128, 8, Format::fp16}, KvMirrorShape{128, 4, Format::fp16},
                                KvMirrorShape{128, 4, Format::fp32}}) {
    const KvSyncPlan p = run(t, buf.data(), 21, 1, s);
    EXPECT_FALSE(p.device) << "capacity / row width / format change must reallocate";
    EXPECT_EQ(p.upload_begin, 0u);
    EXPECT_NE(p.generation, a.generation);
  }
}

TEST(KvMirror, CommitOfAStalePlanIsIgnored) {
  KvMirrorTable t;
  std::vector<float> buf(64 * 8);
  t.track(buf.data());
  const auto p = t.plan(buf.data(), kShape, 10, 10);
  ASSERT_TRUE(p);
  t.forget(buf.data());
  t.track(buf.data());
  t.commit(buf.data(), p->generation, std::make_shared<int>(0), 10);  // from the forgotten life
  EXPECT_EQ(t.synced(buf.data()), 0u);
  const auto q = t.plan(buf.data(), kShape, 10, 0);
  ASSERT_TRUE(q);
  EXPECT_EQ(q->upload_begin, 0u);
}

TEST(KvMirror, PublicEntryPointsAreCheapNoOpsWithoutAMirror) {
  std::vector<float> buf(16);
  const std::size_t before = gpu_kv_stats().mirrors;
  gpu_kv_forget(buf.data());
  gpu_kv_rows_changed(buf.data(), 0);
  EXPECT_EQ(gpu_kv_stats().mirrors, before);
  gpu_kv_track(buf.data());
  EXPECT_EQ(gpu_kv_stats().mirrors, before + 1);
  EXPECT_TRUE(kv_mirrors().tracked(buf.data()));
  gpu_kv_rows_changed(buf.data(), 0);
  gpu_kv_forget(buf.data());
  EXPECT_EQ(gpu_kv_stats().mirrors, before);
}

}  // namespace
}  // namespace kvconf::kernels::cuda
