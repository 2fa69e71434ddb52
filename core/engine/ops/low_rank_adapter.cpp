// Low-rank adapters applied by the engine's products (engine/low_rank_adapter.hpp): the
// registry of attached adapters (by storage), the adapted product, and the refusals.
//
// Adapted product, for y = op(a) · op(b) with op(b) = W[v0, v0 + n)ᵀ [K, n] and x = op(a)
// [..., M, K]: y = base + U · Bbᵀ where base = the plain product (no dW when W is frozen),
// U = [s · drop_i(x) · A_iᵀ]_i [..., M, Σr] and Bb [n, Σr] holds each adapter's B rows at the
// columns its rows take in the view (zeros elsewhere). Everything after the base is ordinary
// differentiable ops, so autograd gives dA_i, dB_i and their share of dx.
#include "engine/low_rank_adapter.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <mutex>
#include <vector>

#include "common/error.hpp"
#include "engine/autograd.hpp"
#include "engine/generator.hpp"
#include "engine/ops.hpp"
#include "engine/ops/low_rank_adapter_internal.hpp"

namespace patchbay::engine {
namespace {

struct Entry {
  int64_t id = 0;
  LowRankAdapter spec;
  Generator generator;
  std::atomic<int64_t> uses{0};
};

struct Registry {
  std::mutex mutex;
  std::vector<std::shared_ptr<Entry>> entries;
  int64_t next_id = 0;
  std::atomic<int64_t> count{0};
};

Registry& registry() {
  static Registry r;
  return r;
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

uint64_t stream_seed(uint64_t seed, uint64_t stream, uint64_t key) {
  return splitmix64(splitmix64(splitmix64(seed) ^ stream) ^ key);
}

// The adapters on x's storage, in attach order.
std::vector<std::shared_ptr<Entry>> entries_on(const Tensor& x) {
  std::vector<std::shared_ptr<Entry>> found;
  if (!x.defined()) return found;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const std::shared_ptr<Entry>& e : r.entries)
    if (e->spec.weight.impl()->storage == x.impl()->storage) found.push_back(e);
  return found;
}

std::string labels_of(const std::vector<std::shared_ptr<Entry>>& entries) {
  std::string text;
  for (const std::shared_ptr<Entry>& e : entries)
    text += (text.empty() ? "'" : ", '") + e->spec.label + "'";
  return text;
}

std::string strides_text(const Tensor& x) {
  std::string text = "[";
  for (size_t i = 0; i < x.strides().size(); ++i)
    text += (i ? ", " : "") + std::to_string(x.strides()[i]);
  return text + "]";
}

[[noreturn]] void refuse(const std::vector<std::shared_ptr<Entry>>& entries, const std::string& use,
                         const Tensor& found) {
  throw Error(
      ErrorKind::kInvalidArgument,
      "low-rank adapter " + labels_of(entries) + ": " + use + " reads the adapted weight " +
          entries[0]->spec.weight.str() + " as " + found.str() + " (strides " +
          strides_text(found) + ", offset " +
          std::to_string(found.storage_offset() - entries[0]->spec.weight.storage_offset()) +
          "), a form the adapter cannot follow. The engine adapts products y = x · W[rows]ᵀ "
          "only: matmul(x, W.slice(0, lo, hi), false, true) or linear(x, W[rows], bias). "
          "Compute with the weight in that form, or leave this weight out of the adapter "
          "targets (train.lora.targets)");
}

// Draws drop(x) with the adapter's own stream (advanced as dropout draws).
Tensor adapter_dropout(Entry& e, const Tensor& x) {
  Registry& r = registry();
  Generator generator;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    generator = e.generator;
  }
  Tensor dropped = dropout(x, e.spec.dropout, generator, true);
  std::lock_guard<std::mutex> lock(r.mutex);
  e.generator = generator;
  return dropped;
}

void check_adapter(const LowRankAdapter& s) {
  const std::string who = "attach_low_rank_adapter '" + s.label + "': ";
  auto fail = [&](const std::string& what) {
    throw Error(ErrorKind::kInvalidArgument, who + what);
  };
  if (!s.weight.defined() || s.weight.dim() != 2 || s.weight.dtype() != DType::kF32 ||
      !s.weight.is_contiguous())
    fail("expected the weight as a contiguous f32 [N, K] tensor, found " +
         (s.weight.defined() ? s.weight.str() : std::string("an undefined tensor")));
  const int64_t n = s.weight.size(0), k = s.weight.size(1);
  if (s.rows < 1 || s.row_begin < 0 || s.row_begin + s.rows > n)
    fail("rows [" + std::to_string(s.row_begin) + ", " + std::to_string(s.row_begin + s.rows) +
         ") are not inside the weight's " + std::to_string(n) + " rows");
  if (!s.a.defined() || s.a.dim() != 2 || s.a.size(1) != k || s.a.size(0) < 1 ||
      !is_floating(s.a.dtype()))
    fail("expected A [r, " + std::to_string(k) + "] (float), found " +
         (s.a.defined() ? s.a.str() : std::string("an undefined tensor")));
  const int64_t rank = s.a.size(0);
  if (!s.b.defined() || s.b.dim() != 2 || s.b.size(0) != s.rows || s.b.size(1) != rank ||
      s.b.dtype() != s.a.dtype())
    fail("expected B [" + std::to_string(s.rows) + ", " + std::to_string(rank) +
         "] of A's dtype, found " +
         (s.b.defined() ? s.b.str() : std::string("an undefined tensor")));
  if (s.a.device() != s.weight.device() || s.b.device() != s.weight.device())
    fail("A " + s.a.str() + " and B " + s.b.str() + " must be on the weight's device (" +
         s.weight.str() + ")");
  if (!std::isfinite(s.scale)) fail("the scale is not finite");
  if (!(s.dropout >= 0.0 && s.dropout < 1.0))
    fail("dropout must be in [0, 1), found " + std::to_string(s.dropout));
}

}  // namespace

AttachedLowRankAdapter& AttachedLowRankAdapter::operator=(AttachedLowRankAdapter&& other) noexcept {
  if (this != &other) {
    reset();
    id_ = other.id_;
    other.id_ = -1;
  }
  return *this;
}

void AttachedLowRankAdapter::reset() {
  if (id_ < 0) return;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const auto it = std::find_if(r.entries.begin(), r.entries.end(),
                               [&](const std::shared_ptr<Entry>& e) { return e->id == id_; });
  if (it != r.entries.end()) {
    r.entries.erase(it);
    r.count.fetch_sub(1, std::memory_order_relaxed);
  }
  id_ = -1;
}

int64_t AttachedLowRankAdapter::uses() const {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const std::shared_ptr<Entry>& e : r.entries)
    if (e->id == id_) return e->uses.load(std::memory_order_relaxed);
  return 0;
}

AttachedLowRankAdapter attach_low_rank_adapter(LowRankAdapter adapter) {
  check_adapter(adapter);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const std::shared_ptr<Entry>& e : r.entries) {
    if (e->spec.weight.impl()->storage != adapter.weight.impl()->storage) continue;
    const LowRankAdapter& o = e->spec;
    if (o.weight.storage_offset() != adapter.weight.storage_offset() ||
        o.weight.shape() != adapter.weight.shape())
      throw Error(ErrorKind::kInvalidArgument,
                  "attach_low_rank_adapter '" + adapter.label + "': its weight " +
                      adapter.weight.str() + " shares storage with '" + o.label +
                      "''s weight but is another view of it; attach both to the same tensor");
    if (adapter.row_begin < o.row_begin + o.rows && o.row_begin < adapter.row_begin + adapter.rows)
      throw Error(ErrorKind::kInvalidArgument, "attach_low_rank_adapter '" + adapter.label +
                                                   "': its rows overlap those of '" + o.label +
                                                   "' on the same weight");
  }
  auto entry = std::make_shared<Entry>();
  entry->id = r.next_id++;
  entry->generator = Generator(stream_seed(0, 0, adapter.dropout_key));
  entry->spec = std::move(adapter);
  r.entries.push_back(entry);
  r.count.fetch_add(1, std::memory_order_relaxed);
  return AttachedLowRankAdapter(entry->id);
}

void set_low_rank_adapter_dropout_state(uint64_t seed, uint64_t stream) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const std::shared_ptr<Entry>& e : r.entries)
    e->generator = Generator(stream_seed(seed, stream, e->spec.dropout_key));
}

int64_t low_rank_adapters_attached() { return registry().count.load(std::memory_order_relaxed); }

namespace detail {

bool low_rank_adapters_present() { return registry().count.load(std::memory_order_relaxed) > 0; }

bool carries_low_rank_adapter(const Tensor& x) {
  return low_rank_adapters_present() && !entries_on(x).empty();
}

void refuse_adapted_operand(const Tensor& x, const char* use) {
  if (!low_rank_adapters_present()) return;
  const std::vector<std::shared_ptr<Entry>> on = entries_on(x);
  if (!on.empty()) refuse(on, use, x);
}

std::optional<Tensor> adapted_parameter_of(const Tensor& x) {
  if (!low_rank_adapters_present()) return std::nullopt;
  const std::vector<std::shared_ptr<Entry>> on = entries_on(x);
  if (on.empty()) return std::nullopt;
  return on[0]->spec.weight;
}

std::optional<Tensor> adapted_matmul(const Tensor& a, const Tensor& b, bool transpose_a,
                                     bool transpose_b) {
  if (const std::vector<std::shared_ptr<Entry>> on_a = entries_on(a); !on_a.empty())
    refuse(on_a, std::string("matmul's left operand") + (transpose_a ? " (transposed)" : ""), a);
  const std::vector<std::shared_ptr<Entry>> on_b = entries_on(b);
  if (on_b.empty()) return std::nullopt;
  // op(b) must be W[v0, v0 + n)ᵀ: rows of W read with W's own row stride.
  const Tensor& w = on_b[0]->spec.weight;
  const int64_t k = w.size(1), rel = b.storage_offset() - w.storage_offset();
  bool rows_form = b.dim() == 2 && rel >= 0 && rel % k == 0;
  if (rows_form && transpose_b)
    rows_form = b.size(1) == k && b.strides()[1] == 1 && (b.strides()[0] == k || b.size(0) <= 1);
  else if (rows_form)
    rows_form = b.size(0) == k && b.strides()[0] == 1 && (b.strides()[1] == k || b.size(1) <= 1);
  if (!rows_form)
    refuse(on_b,
           std::string("matmul's right operand") + (transpose_b ? " (transposed)" : "") +
               (b.dim() != 2 ? " in a batched product" : ""),
           b);
  const int64_t v0 = rel / k, n = transpose_b ? b.size(0) : b.size(1);
  Tensor y = matmul_plain(a, b, transpose_a, transpose_b);
  std::vector<std::shared_ptr<Entry>> hits;
  for (const std::shared_ptr<Entry>& e : on_b)
    if (e->spec.row_begin < v0 + n && v0 < e->spec.row_begin + e->spec.rows) hits.push_back(e);
  if (hits.empty()) return y;  // rows of W outside every adapter (a fused qkv's k rows)
  const Tensor x = transpose_a ? transpose(a, -1, -2) : a;  // [..., M, K]
  std::vector<Tensor> adapter_inputs{a};
  for (const std::shared_ptr<Entry>& e : hits) {
    adapter_inputs.push_back(e->spec.a);
    adapter_inputs.push_back(e->spec.b);
  }
  const bool training = any_requires_grad(adapter_inputs);  // grad mode on and recording
  std::vector<Tensor> us, bs;
  for (const std::shared_ptr<Entry>& e : hits) {
    const LowRankAdapter& s = e->spec;
    const Tensor input = training && s.dropout > 0 ? adapter_dropout(*e, x) : x;
    us.push_back(mul_scalar(matmul(input, s.a, false, true), s.scale));  // [..., M, r]
    // B's rows inside the view, at their columns of y; zeros around them.
    const int64_t lo = std::max(v0, s.row_begin), hi = std::min(v0 + n, s.row_begin + s.rows);
    Tensor rows = narrow(s.b, 0, lo - s.row_begin, hi - lo);  // [hi - lo, r]
    if (lo > v0 || hi < v0 + n) {
      std::vector<Tensor> pieces;
      const int64_t rank = s.b.size(1);
      if (lo > v0) pieces.push_back(zeros({lo - v0, rank}, s.b.dtype(), s.b.device()));
      pieces.push_back(rows);
      if (hi < v0 + n) pieces.push_back(zeros({v0 + n - hi, rank}, s.b.dtype(), s.b.device()));
      rows = concat(pieces, 0);
    }
    bs.push_back(rows);  // [n, r]
    e->uses.fetch_add(1, std::memory_order_relaxed);
  }
  const Tensor u = us.size() == 1 ? us[0] : concat(us, -1);       // [..., M, Σr]
  const Tensor b_block = bs.size() == 1 ? bs[0] : concat(bs, 1);  // [n, Σr]
  Tensor delta = matmul(u, b_block, false, true);                 // [..., M, n]
  if (delta.dtype() != y.dtype()) delta = to_dtype(delta, y.dtype());
  return add(y, delta);
}

}  // namespace detail
}  // namespace patchbay::engine
