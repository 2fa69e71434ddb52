// Naive double-precision references (see reference.hpp). Written for obviousness, not speed.
#include "engine/reference/reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace patchbay::engine::reference {
namespace {

Shape strides_of(const Shape& shape) {
  Shape s(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

// Multi-index of flat row-major index `flat` in `shape`.
Shape unravel(int64_t flat, const Shape& shape) {
  Shape idx(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    idx[i] = shape[i] ? flat % shape[i] : 0;
    flat = shape[i] ? flat / shape[i] : 0;
  }
  return idx;
}

// Flat index into `shape` of an output multi-index (right-aligned), size-1 dims broadcast.
int64_t broadcast_index(const Shape& out_idx, const Shape& shape) {
  Shape st = strides_of(shape);
  size_t lead = out_idx.size() - shape.size();
  int64_t flat = 0;
  for (size_t i = 0; i < shape.size(); ++i) flat += (shape[i] == 1 ? 0 : out_idx[lead + i]) * st[i];
  return flat;
}

Shape broadcast_shape(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      throw std::invalid_argument("reference: shapes do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace

int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Array broadcast_binary(const Array& a, const Array& b,
                       const std::function<double(double, double)>& f) {
  Array out{broadcast_shape(a.shape, b.shape), {}};
  out.values.resize(static_cast<size_t>(numel(out.shape)));
  for (int64_t i = 0; i < numel(out.shape); ++i) {
    Shape idx = unravel(i, out.shape);
    out.values[static_cast<size_t>(i)] =
        f(a.values[static_cast<size_t>(broadcast_index(idx, a.shape))],
          b.values[static_cast<size_t>(broadcast_index(idx, b.shape))]);
  }
  return out;
}

Array unary(const Array& x, const std::function<double(double)>& f) {
  Array out = x;
  for (double& v : out.values) v = f(v);
  return out;
}

Array reduce(const Array& x, std::vector<int64_t> dims, bool keepdim, const char* op) {
  const auto nd = static_cast<int64_t>(x.shape.size());
  std::vector<bool> reduced(x.shape.size(), dims.empty());
  for (int64_t d : dims) reduced[static_cast<size_t>(d < 0 ? d + nd : d)] = true;
  Shape keep_shape;
  for (size_t i = 0; i < x.shape.size(); ++i) keep_shape.push_back(reduced[i] ? 1 : x.shape[i]);
  const std::string kind = op;
  Values acc(static_cast<size_t>(numel(keep_shape)),
             kind == "max" ? -std::numeric_limits<double>::infinity() : 0.0);
  Values count(acc.size(), 0.0);
  for (int64_t i = 0; i < numel(x.shape); ++i) {
    Shape idx = unravel(i, x.shape);
    auto o = static_cast<size_t>(broadcast_index(idx, keep_shape));
    double v = x.values[static_cast<size_t>(i)];
    if (kind == "max")
      acc[o] = std::max(acc[o], v);
    else
      acc[o] += v;
    count[o] += 1.0;
  }
  if (kind == "mean")
    for (size_t i = 0; i < acc.size(); ++i) acc[i] /= count[i];
  Shape out_shape;
  for (size_t i = 0; i < x.shape.size(); ++i)
    if (!reduced[i] || keepdim) out_shape.push_back(keep_shape[i]);
  return Array{out_shape, acc};
}

Array matmul(const Array& a, const Array& b, bool ta, bool tb) {
  const size_t ra = a.shape.size(), rb = b.shape.size();
  int64_t m = ta ? a.shape[ra - 1] : a.shape[ra - 2];
  int64_t k = ta ? a.shape[ra - 2] : a.shape[ra - 1];
  int64_t n = tb ? b.shape[rb - 2] : b.shape[rb - 1];
  Shape batch_a(a.shape.begin(), a.shape.end() - 2), batch_b(b.shape.begin(), b.shape.end() - 2);
  Shape batch = broadcast_shape(batch_a, batch_b);
  Shape out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  Array out{out_shape, Values(static_cast<size_t>(numel(out_shape)), 0.0)};
  const int64_t a_mat = a.shape[ra - 2] * a.shape[ra - 1],
                b_mat = b.shape[rb - 2] * b.shape[rb - 1];
  for (int64_t bi = 0; bi < numel(batch); ++bi) {
    Shape idx = unravel(bi, batch);
    int64_t oa = broadcast_index(idx, batch_a) * a_mat, ob = broadcast_index(idx, batch_b) * b_mat;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0.0;
        for (int64_t p = 0; p < k; ++p) {
          double av = a.values[static_cast<size_t>(oa + (ta ? p * m + i : i * k + p))];
          double bv = b.values[static_cast<size_t>(ob + (tb ? j * k + p : p * n + j))];
          s += av * bv;
        }
        out.values[static_cast<size_t>((bi * m + i) * n + j)] = s;
      }
  }
  return out;
}

Array softmax_last(const Array& x, bool log) {
  Array out = x;
  int64_t c = x.shape.empty() ? 1 : x.shape.back();
  for (int64_t r = 0; c > 0 && r < numel(x.shape) / c; ++r) {
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < c; ++j) mx = std::max(mx, x.values[static_cast<size_t>(r * c + j)]);
    double s = 0.0;
    for (int64_t j = 0; j < c; ++j) s += std::exp(x.values[static_cast<size_t>(r * c + j)] - mx);
    for (int64_t j = 0; j < c; ++j) {
      double v = x.values[static_cast<size_t>(r * c + j)] - mx;
      out.values[static_cast<size_t>(r * c + j)] = log ? v - std::log(s) : std::exp(v) / s;
    }
  }
  return out;
}

Array layer_norm_last(const Array& x, const Values& gain, const Values& bias, double eps) {
  Array out = x;
  int64_t c = x.shape.back();
  for (int64_t r = 0; r < numel(x.shape) / c; ++r) {
    double mu = 0.0, var = 0.0;
    for (int64_t j = 0; j < c; ++j) mu += x.values[static_cast<size_t>(r * c + j)];
    mu /= static_cast<double>(c);
    for (int64_t j = 0; j < c; ++j) {
      double d = x.values[static_cast<size_t>(r * c + j)] - mu;
      var += d * d;
    }
    var /= static_cast<double>(c);
    for (int64_t j = 0; j < c; ++j) {
      auto uj = static_cast<size_t>(j);
      double y = (x.values[static_cast<size_t>(r * c + j)] - mu) / std::sqrt(var + eps);
      out.values[static_cast<size_t>(r * c + j)] = y * gain[uj] + (bias.empty() ? 0.0 : bias[uj]);
    }
  }
  return out;
}

Array rms_norm_last(const Array& x, const Values& gain, double eps) {
  Array out = x;
  int64_t c = x.shape.back();
  for (int64_t r = 0; r < numel(x.shape) / c; ++r) {
    double ms = 0.0;
    for (int64_t j = 0; j < c; ++j)
      ms += x.values[static_cast<size_t>(r * c + j)] * x.values[static_cast<size_t>(r * c + j)];
    ms /= static_cast<double>(c);
    for (int64_t j = 0; j < c; ++j)
      out.values[static_cast<size_t>(r * c + j)] = x.values[static_cast<size_t>(r * c + j)] /
                                                   std::sqrt(ms + eps) *
                                                   gain[static_cast<size_t>(j)];
  }
  return out;
}

Array permute(const Array& x, const Shape& dims) {
  Shape out_shape;
  for (int64_t d : dims) out_shape.push_back(x.shape[static_cast<size_t>(d)]);
  Array out{out_shape, Values(x.values.size())};
  Shape in_strides = strides_of(x.shape);
  for (int64_t i = 0; i < numel(out_shape); ++i) {
    Shape idx = unravel(i, out_shape);
    int64_t src = 0;
    for (size_t j = 0; j < dims.size(); ++j)
      src += idx[j] * in_strides[static_cast<size_t>(dims[j])];
    out.values[static_cast<size_t>(i)] = x.values[static_cast<size_t>(src)];
  }
  return out;
}

Array concat(const std::vector<Array>& xs, int64_t dim) {
  Shape out_shape = xs.front().shape;
  auto d = static_cast<size_t>(dim < 0 ? dim + static_cast<int64_t>(out_shape.size()) : dim);
  out_shape[d] = 0;
  for (const Array& x : xs) out_shape[d] += x.shape[d];
  Array out{out_shape, Values(static_cast<size_t>(numel(out_shape)))};
  for (int64_t i = 0; i < numel(out_shape); ++i) {
    Shape idx = unravel(i, out_shape);
    int64_t pos = idx[d];
    for (const Array& x : xs) {
      if (pos < x.shape[d]) {
        idx[d] = pos;
        Shape st = strides_of(x.shape);
        int64_t src = 0;
        for (size_t j = 0; j < idx.size(); ++j) src += idx[j] * st[j];
        out.values[static_cast<size_t>(i)] = x.values[static_cast<size_t>(src)];
        break;
      }
      pos -= x.shape[d];
    }
  }
  return out;
}

Array attention(const Array& q, const Array& k, const Array& v, bool causal, double scale) {
  const int64_t B = q.shape[0], H = q.shape[1], Tq = q.shape[2], D = q.shape[3], Tk = k.shape[2];
  Array out{q.shape, Values(q.values.size(), 0.0)};
  std::vector<double> s(static_cast<size_t>(Tk));
  for (int64_t bh = 0; bh < B * H; ++bh)
    for (int64_t i = 0; i < Tq; ++i) {
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < Tk; ++j) {
        bool visible = !causal || j <= i + (Tk - Tq);
        double dot = 0.0;
        for (int64_t d = 0; d < D; ++d)
          dot += q.values[static_cast<size_t>((bh * Tq + i) * D + d)] *
                 k.values[static_cast<size_t>((bh * Tk + j) * D + d)];
        s[static_cast<size_t>(j)] =
            visible ? dot * scale : -std::numeric_limits<double>::infinity();
        mx = std::max(mx, s[static_cast<size_t>(j)]);
      }
      if (mx == -std::numeric_limits<double>::infinity()) continue;  // no visible key: zeros
      double total = 0.0;
      for (int64_t j = 0; j < Tk; ++j) total += std::exp(s[static_cast<size_t>(j)] - mx);
      for (int64_t j = 0; j < Tk; ++j) {
        double p = std::exp(s[static_cast<size_t>(j)] - mx) / total;
        for (int64_t d = 0; d < D; ++d)
          out.values[static_cast<size_t>((bh * Tq + i) * D + d)] +=
              p * v.values[static_cast<size_t>((bh * Tk + j) * D + d)];
      }
    }
  return out;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
double gelu_erf(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double silu(double x) { return x * sigmoid(x); }

}  // namespace patchbay::engine::reference
