// tidu/vm/scalar_eval.hpp - the all-scalar float64 fast path's evaluators: eval_scalar (one point,
// threaded dispatch over ScalarInstr runs) and eval_scalar_block (kScalarBlock points at once, for
// eval_batch).  What each opcode computes is TIDU_SCALAR_OPS (scalar.hpp).
#pragma once

#include <cstdint>

#include "tidu/kernels/fastmath.hpp"
#include "tidu/vm/opcodes.hpp"
#include "tidu/vm/program.hpp"
#include "tidu/vm/scalar.hpp"

namespace tidu {
namespace detail {


// The scalar fast path's values from the inputs' elements, and back into the outputs'.
inline void scalar_inputs(const Program& p, double* v, const void* const* inputs) {
  const std::uint32_t* off = p.scalar_in_off.data();
  const std::uint32_t* ids = p.scalar_in_ids.data();
  for (std::size_t i = 0; i < p.inputs.size(); ++i) {
    const double* x = static_cast<const double*>(inputs[i]);
    for (std::uint32_t k = off[i]; k < off[i + 1]; ++k) v[ids[k]] = x[k - off[i]];
  }
}
inline void scalar_outputs(const Program& p, const double* v, void* const* outputs) {
  const std::uint32_t* off = p.scalar_out_off.data();
  const std::uint32_t* ids = p.scalar_out_ids.data();
  for (std::size_t i = 0; i < p.outputs.size(); ++i) {
    double* y = static_cast<double*>(outputs[i]);
    for (std::uint32_t k = off[i]; k < off[i + 1]; ++k) y[k - off[i]] = v[ids[k]];
  }
}

// What the scalar path computes for opcode OP: its TIDU_SCALAR_OPS expression, or x for the
// opcodes that are copies there.  eval_scalar's handlers are generated from TIDU_OPCODES with it.
template <Op OP>
struct ScalarExpr {
  static inline double eval(double x, double, double) { return x; }
};
#define TIDU_SCALAR_EXPR(name, expr)                             \
  template <>                                                    \
  struct ScalarExpr<Op::name> {                                  \
    static inline double eval(double x, double y, double imm) {  \
      (void)x, (void)y, (void)imm;                               \
      return (expr);                                             \
    }                                                            \
  };
TIDU_SCALAR_OPS(TIDU_SCALAR_EXPR)
#undef TIDU_SCALAR_EXPR

// The all-scalar float64 fast path: a flat loop over 24-byte instructions (scheduled into runs of
// one opcode, Program::schedule_scalar) and an array of doubles.
// What each opcode computes: TIDU_SCALAR_OPS (scalar.hpp), shared with the JIT's helpers.

#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"  // labels as values, in a consumer built with -pedantic
#endif
inline void eval_scalar(const Program& p, double* v, const void* const* inputs, void* const* outputs) {
  scalar_inputs(p, v, inputs);
  const ScalarInstr* c = p.scalar_code.data();
  const ScalarInstr* const end = c + p.scalar_code.size();
#if defined(__GNUC__) || defined(__clang__)
  // Threaded dispatch (labels as values): every handler ends in its own indirect jump, so the
  // branch predictor learns which opcode tends to follow which, where a switch has one jump.
  static const void* const handler[] = {
#define TIDU_SCALAR_LABEL(name, kind, sig) &&op_##name,
      TIDU_OPCODES(TIDU_SCALAR_LABEL)
#undef TIDU_SCALAR_LABEL
  };
  // A handler runs its whole run (ScalarInstr::run) before the next dispatch.
#define TIDU_SCALAR_NEXT(expr)                              \
  {                                                         \
    const ScalarInstr* const stop = c + c->run;             \
    do {                                                    \
      const double x = v[c->a], y = v[c->b], imm = c->imm;  \
      (void)x, (void)y, (void)imm;                          \
      v[c->out] = (expr);                                   \
    } while (++c != stop);                                  \
    if (c == end) goto done;                                \
    goto *handler[static_cast<unsigned>(c->op)];            \
  }
  if (c == end) goto done;
  goto *handler[static_cast<unsigned>(c->op)];
  // One handler per opcode, generated from the opcode table: TIDU_SCALAR_OPS' expression, or
  // r = x for the others (build_scalar_code admits only copies among them).
#define TIDU_SCALAR_CASE(name, kind, sig) \
  op_##name:                              \
  TIDU_SCALAR_NEXT((ScalarExpr<Op::name>::eval(x, y, imm)))
  TIDU_OPCODES(TIDU_SCALAR_CASE)
#undef TIDU_SCALAR_CASE
#undef TIDU_SCALAR_NEXT
done:
#else
  for (; c != end; ++c) {
    const double x = v[c->a], y = v[c->b], imm = c->imm;
    double r;
    switch (c->op) {
#define TIDU_SCALAR_CASE(name, expr) \
  case Op::name:                     \
    r = (expr);                      \
    break;
      TIDU_SCALAR_OPS(TIDU_SCALAR_CASE)
#undef TIDU_SCALAR_CASE
      default: r = x; break;
    }
    v[c->out] = r;
  }
#endif
  scalar_outputs(p, v, outputs);
}
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic pop
#endif


// kScalarBlock points of an all-scalar program at once: slot s of point j lives at V[s * K + j],
// and each instruction runs over the block's points before the next one, so its calls are
// independent of each other (throughput, not one chain's latency, bounds them) and its operands
// come from contiguous memory.  exact: the expressions are TIDU_SCALAR_OPS, the single-point
// path's own, so every point's values are bit-identical to a single evaluation; otherwise the
// transcendental functions take the SIMD array kernels (fastmath.hpp, within 3 ulp of the C
// library, as in array programs), several times faster.
constexpr std::int64_t kScalarBlock = 32;

inline void eval_scalar_block(const Program& p, double* V, std::int64_t n_points,
                              const void* const* inputs, void* const* outputs, std::int64_t first,
                              bool exact, const std::uint8_t* shared = nullptr) {
  constexpr std::int64_t K = kScalarBlock;
  // Element e of input i at point j (of n_i elements per point) is value ids[off[i] + e]; a
  // shared input (shared[i] != 0) has no batch axis: every point reads its one copy.
  for (std::size_t i = 0; i < p.inputs.size(); ++i) {
    const std::uint32_t lo = p.scalar_in_off[i], n_i = p.scalar_in_off[i + 1] - lo;
    const bool one = shared != nullptr && shared[i] != 0;
    for (std::uint32_t e = 0; e < n_i; ++e) {
      double* dst = V + std::int64_t{p.scalar_in_ids[lo + e]} * K;
      if (one) {
        const double x = static_cast<const double*>(inputs[i])[e];
        for (std::int64_t j = 0; j < K; ++j) dst[j] = x;
        continue;
      }
      const double* src = static_cast<const double*>(inputs[i]) + first * n_i + e;
      for (std::int64_t j = 0; j < K; ++j) dst[j] = src[(j < n_points ? j : n_points - 1) * n_i];
    }
  }
  for (const ScalarInstr& c : p.scalar_code) {
    double* r = V + std::int64_t{c.out} * K;
    const double* xs = V + std::int64_t{c.a} * K;
    const double* ys = V + std::int64_t{c.b} * K;
    const double imm = c.imm;
    if (!exact) switch (c.op) {
      case Op::Exp: fm::map<fm::Fn::Exp>(xs, r, K); continue;
      case Op::Log: fm::map<fm::Fn::Log>(xs, r, K); continue;
      case Op::Sin: fm::map<fm::Fn::Sin>(xs, r, K); continue;
      case Op::Cos: fm::map<fm::Fn::Cos>(xs, r, K); continue;
      case Op::Tanh: fm::map<fm::Fn::Tanh>(xs, r, K); continue;
      case Op::Expm1: fm::map<fm::Fn::Expm1>(xs, r, K); continue;
      case Op::Log1p: fm::map<fm::Fn::Log1p>(xs, r, K); continue;
      default: break;
    }
    switch (c.op) {
#define TIDU_SCALAR_BLOCK(name, expr)              \
  case Op::name:                                   \
    for (std::int64_t j = 0; j < K; ++j) {         \
      const double x = xs[j], y = ys[j];           \
      (void)x, (void)y, (void)imm;                 \
      r[j] = (expr);                               \
    }                                              \
    break;
      TIDU_SCALAR_OPS(TIDU_SCALAR_BLOCK)
#undef TIDU_SCALAR_BLOCK
      default:  // the copies
        for (std::int64_t j = 0; j < K; ++j) r[j] = xs[j];
        break;
    }
  }
  for (std::size_t i = 0; i < p.outputs.size(); ++i) {
    const std::uint32_t lo = p.scalar_out_off[i], n_i = p.scalar_out_off[i + 1] - lo;
    for (std::uint32_t e = 0; e < n_i; ++e) {
      const double* src = V + std::int64_t{p.scalar_out_ids[lo + e]} * K;
      double* dst = static_cast<double*>(outputs[i]) + first * n_i + e;
      for (std::int64_t j = 0; j < n_points; ++j) dst[j * n_i] = src[j];
    }
  }
}

}  // namespace detail

}  // namespace tidu
