// The merged model's forward: runs of text and record ids through the circuit layers
// (dense on the backend, or sparse through the reference model), the base's layers and
// both heads, and the choice guard on the record logits (MergedForward).
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "merged_model_internal.h"
#include "qgpu/core/merged_model.h"

namespace qgpu::core {

using detail::view_of;

void MergedModel::step_reference(std::span<float> rows, std::int64_t T) {
  const std::int64_t H = shapes_.hidden_size;
  for (std::int64_t t = 0; t < T; ++t) {  // in the circuit's channel order, and back
    const std::span<float> row = rows.subspan(static_cast<std::size_t>(t * H), static_cast<std::size_t>(H));
    const std::vector<float> y = map_.merged_order(reference_->step(map_.circuit_order(row)));
    std::copy(y.begin(), y.end(), row.begin());
  }
}

sdk::Expected<sdk::Handle<sdk::Tensor>> MergedModel::run_circuit(const sdk::Tensor& input) {
  auto& be = *backend_;
  const double eps = shapes_.rms_norm_eps;
  const sdk::DeltaNetShape shape{shapes_.linear_num_key_heads, shapes_.linear_num_value_heads,
                                 shapes_.linear_key_head_dim,  shapes_.linear_value_head_dim,
                                 shapes_.linear_conv_kernel,   eps};
  sdk::Handle<sdk::Tensor> h;
  if (reference_) {  // sparse: row by row through the reference model
    const std::int64_t T = input.dim(0), H = shapes_.hidden_size;
    std::vector<float> rows(static_cast<std::size_t>(T * H));
    const std::int64_t shape[2] = {T, H};
    QGPU_RETURN_IF_ERROR(be.download(input, view_of(rows.data(), sdk::DType::kF32, shape)));
    step_reference(rows, T);
    return be.upload(view_of(rows.data(), sdk::DType::kF32, shape));
  }
  QGPU_ASSIGN_OR_RETURN(h, be.rows(input, 0, input.dim(0)));
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = layers_[i];
    // The circuit is exact under the token-by-token recurrence (backend.Circuits.*), so every run uses it.
    auto mixer = [&](const sdk::Tensor& normed) {
      return be.gated_delta_net(normed, l.gdn, shape, *active_->circuit_[i], sdk::DeltaRule::kRecurrent);
    };
    QGPU_ASSIGN_OR_RETURN(h, sdk::decoder_layer(be, *h, *l.input_norm, *l.post_norm, l.mlp, eps, mixer));
  }
  return h;
}

sdk::Expected<MergedForward> MergedModel::forward(std::span<const std::int64_t> ids, const ForwardOptions& options) {
  if (ids.empty()) return sdk::invalid_argument("merged forward needs at least one token");
  if (drafts_.count > 0 && !drafts_.verified)
    return sdk::internal_error("merged forward with " + std::to_string(drafts_.count) + " drafted ids not verified");
  drafts_ = {};
  for (std::int64_t id : ids)
    if (id < 0 || id >= vocab_rows())
      return sdk::invalid_argument("token id " + std::to_string(id) + " is outside the merged model's " +
                                   std::to_string(vocab_rows()) + " rows (" + std::to_string(base_rows_) + " base + " +
                                   std::to_string(records_) + " records)");
  auto& be = *backend_;
  const std::int64_t H = shapes_.hidden_size, T = static_cast<std::int64_t>(ids.size());
  MergedForward out;
  out.columns = logit_columns();
  out.rows = options.all_logits ? T : 1;
  out.logits.assign(static_cast<std::size_t>(out.rows * out.columns), 0.0f);
  if (options.circuit_residual) out.circuit_residual.assign(static_cast<std::size_t>(T * H), 0.0f);
  // Runs of text ids and of record ids, each through every layer in one call.
  std::int64_t begin = 0;
  while (begin < T) {
    const bool text = ids[static_cast<std::size_t>(begin)] < base_rows_;
    std::int64_t end = begin + 1;
    while (end < T && (ids[static_cast<std::size_t>(end)] < base_rows_) == text) ++end;
    const std::int64_t n = end - begin;
    sdk::Handle<sdk::Tensor> h;
    const auto run = ids.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(n));
    if (text) {
      QGPU_ASSIGN_OR_RETURN(h, base_->embed(run));
      QGPU_ASSIGN_OR_RETURN(h, run_circuit(*h));
    } else if (reference_) {  // sparse: each record's embedding row asked for as it arrives
      std::vector<float> rows(static_cast<std::size_t>(n * H));
      for (std::int64_t i = 0; i < n; ++i) {
        std::vector<float> row;
        QGPU_ASSIGN_OR_RETURN(row, record_row(run[static_cast<std::size_t>(i)] - base_rows_));
        std::copy(row.begin(), row.end(), rows.begin() + i * H);
      }
      step_reference(rows, n);
      const std::int64_t shape[2] = {n, H};
      QGPU_ASSIGN_OR_RETURN(h, be.upload(view_of(rows.data(), sdk::DType::kF32, shape)));
    } else {
      std::vector<std::int64_t> local(run.begin(), run.end());
      for (std::int64_t& id : local) id -= base_rows_;
      QGPU_ASSIGN_OR_RETURN(h, be.embed(*record_table_, local));
      QGPU_ASSIGN_OR_RETURN(h, run_circuit(*h));
    }
    if (options.circuit_residual) {
      const std::int64_t shape[2] = {n, H};
      QGPU_RETURN_IF_ERROR(be.download(*h, view_of(out.circuit_residual.data() + begin * H, sdk::DType::kF32, shape)));
    }
    const bool with_logits = options.all_logits || end == T;
    // The rows that get logits, after the circuit: the choice guard reads them.
    std::vector<float> circ;
    if (with_logits && unembedding_rows_ > 0) {
      sdk::Handle<sdk::Tensor> sel;
      const sdk::Tensor* src = h.get();
      if (!options.all_logits) {
        QGPU_ASSIGN_OR_RETURN(sel, be.rows(*h, n - 1, n));
        src = sel.get();
      }
      const std::int64_t shape[2] = {src->dim(0), H};
      circ.resize(static_cast<std::size_t>(shape[0] * H));
      QGPU_RETURN_IF_ERROR(be.download(*src, view_of(circ.data(), sdk::DType::kF32, shape)));
    }
    QGPU_RETURN_IF_ERROR(run_base(std::move(h), circ, n, options.all_logits ? begin : 0, with_logits, options, out));
    begin = end;
  }
  return out;
}

sdk::Status MergedModel::run_base(sdk::Handle<sdk::Tensor> h, std::span<const float> circ, std::int64_t n,
                                  std::int64_t row0, bool with_logits, const ForwardOptions& options,
                                  MergedForward& out) {
  auto& be = *backend_;
  const std::int64_t H = shapes_.hidden_size;
  sdk::Handle<sdk::Tensor> x, logits;
  QGPU_ASSIGN_OR_RETURN(h, active_->base_ ? base_->run_layers(*active_->base_, *h) : base_->run_layers(*h));
  if (with_logits) {
    if (!options.all_logits) {
      QGPU_ASSIGN_OR_RETURN(h, be.rows(*h, n - 1, n));
    }
    const std::int64_t r = h->dim(0);
    QGPU_ASSIGN_OR_RETURN(x, base_->final_norm(*h));
    QGPU_ASSIGN_OR_RETURN(logits, base_->lm_head(*x));
    // Base columns, then the record columns, into the [rows, columns] output.
    std::vector<float> part(static_cast<std::size_t>(r * base_rows_));
    const std::int64_t base_shape[2] = {r, base_rows_};
    QGPU_RETURN_IF_ERROR(be.download(*logits, view_of(part.data(), sdk::DType::kF32, base_shape)));
    for (std::int64_t i = 0; i < r; ++i)
      std::copy_n(part.begin() + i * base_rows_, base_rows_, out.logits.begin() + (row0 + i) * out.columns);
    if (unembedding_rows_ > 0) {  // the record rows' logits (and the choice guard's, when profiled)
      const std::int64_t x_shape[2] = {r, H};
      std::vector<float> xs(static_cast<std::size_t>(r * H)), hs(static_cast<std::size_t>(r * H));
      QGPU_RETURN_IF_ERROR(be.download(*h, view_of(hs.data(), sdk::DType::kF32, x_shape)));
      if (reference_) {
        QGPU_RETURN_IF_ERROR(be.download(*x, view_of(xs.data(), sdk::DType::kF32, x_shape)));
      } else {
        QGPU_ASSIGN_OR_RETURN(logits, be.linear(*x, *record_head_));
        part.assign(static_cast<std::size_t>(r * unembedding_rows_), 0.0f);
        const std::int64_t rec_shape[2] = {r, unembedding_rows_};
        QGPU_RETURN_IF_ERROR(be.download(*logits, view_of(part.data(), sdk::DType::kF32, rec_shape)));
      }
      if (profiled_) out.circuit_margin.resize(static_cast<std::size_t>(out.rows), 0.0);
      out.deviation.resize(static_cast<std::size_t>(out.rows), 0.0);
      out.circuit_choice.resize(static_cast<std::size_t>(out.rows), -1);
      out.model_choice.resize(static_cast<std::size_t>(out.rows), -1);
      const double eps = shapes_.rms_norm_eps;
      for (std::int64_t i = 0; i < r; ++i) {
        const float* xi = xs.data() + i * H;
        const float* ci = circ.data() + i * H;
        double sq = 0;
        for (std::int64_t c = 0; c < H; ++c)
          sq +=
              static_cast<double>(hs[static_cast<std::size_t>(i * H + c)]) * hs[static_cast<std::size_t>(i * H + c)];
        const double scale = 1 / std::sqrt(sq / static_cast<double>(H) + eps);  // the final norm's, in double
        float* out_row = out.logits.data() + (row0 + i) * out.columns + base_rows_;
        double best = -std::numeric_limits<double>::infinity(), second = best, deviation = 0;
        double model_best = best;
        std::int64_t choice = -1, model_choice = -1;
        for (std::int64_t k = 0; k < unembedding_rows_; ++k) {
          double model = 0, own = 0;
          for (std::int64_t p = sparse_head_.row_ptr[k]; p < sparse_head_.row_ptr[k + 1]; ++p) {
            const std::int32_t c = sparse_head_.col[p];
            if (reference_) model += static_cast<double>(sparse_head_.scaled[p]) * xi[c];
            own += static_cast<double>(sparse_head_.val[p]) * ci[c];
          }
          // Sparse: x·rowᵀ on the host for each record row, in double, rounded once.
          if (reference_) out_row[k] = static_cast<float>(model);
          own *= scale;
          if (own > best) {
            second = best, best = own, choice = k;
          } else if (own > second) {
            second = own;
          }
          const double logit = reference_ ? out_row[k] : part[static_cast<std::size_t>(i * unembedding_rows_ + k)];
          deviation = std::max(deviation, std::abs(logit - own));
          if (logit > model_best) model_best = logit, model_choice = k;
        }
        if (!reference_) std::copy_n(part.begin() + i * unembedding_rows_, unembedding_rows_, out_row);
        if (!profiled_) continue;  // uncompensated logits: no guard
        const auto at = static_cast<std::size_t>(row0 + i);
        out.circuit_margin[at] = best - second;
        out.deviation[at] = deviation;
        out.circuit_choice[at] = choice;
        out.model_choice[at] = model_choice;
      }
    }
  }
  active_->tokens_ += n;
  return sdk::Status::ok();
}

sdk::Expected<MergedModel::Draft> MergedModel::draft(std::int64_t id) {
  if (!reference_ || !profiled_ || unembedding_rows_ == 0)
    return sdk::invalid_argument(
        "speculation needs the circuit on the host (sparse) and its record rows profiled against the base");
  if (!active_->base_) return sdk::invalid_argument("speculation needs a created sequence in use");
  if (id < base_rows_ || id >= vocab_rows())
    return sdk::invalid_argument("draft: token id " + std::to_string(id) + " is not a record id [" +
                                 std::to_string(base_rows_) + ", " + std::to_string(vocab_rows()) + ")");
  if (drafts_.verified) drafts_ = {};
  QGPU_ASSIGN_OR_RETURN(std::vector<float> row, record_row(id - base_rows_));
  step_reference(row, 1);
  if (!circuit_head_) return sdk::internal_error("draft: the merge built no index of the record rows");
  const weights::Choice best = circuit_head_->best_sum(row.data());
  Draft d;
  d.choice = best.offset;
  d.margin = best.margin;
  drafts_.rows.insert(drafts_.rows.end(), row.begin(), row.end());
  ++drafts_.count;
  return d;
}

sdk::Expected<MergedForward> MergedModel::run_drafts(bool batched) {
  const std::int64_t H = shapes_.hidden_size, n = drafts_.count;
  MergedForward out;
  out.columns = logit_columns();
  out.rows = n;
  out.logits.assign(static_cast<std::size_t>(n * out.columns), 0.0f);
  ForwardOptions all;
  all.all_logits = true;
  for (std::int64_t begin = 0; begin < n;) {
    const std::int64_t rows = batched ? n : 1;
    const std::span<float> circ(drafts_.rows.data() + begin * H, static_cast<std::size_t>(rows * H));
    const std::int64_t shape[2] = {rows, H};
    sdk::Handle<sdk::Tensor> h;
    QGPU_ASSIGN_OR_RETURN(h, backend_->upload(view_of(circ.data(), sdk::DType::kF32, shape)));
    QGPU_RETURN_IF_ERROR(run_base(std::move(h), circ, rows, begin, true, all, out));
    begin += rows;
  }
  return out;
}

sdk::Expected<MergedForward> MergedModel::verify_drafts() {
  if (drafts_.count == 0 || drafts_.verified) return sdk::internal_error("verify_drafts: nothing drafted");
  if (!base_snapshot_) {
    QGPU_ASSIGN_OR_RETURN(base_snapshot_, base_->create_sequence());
  }
  QGPU_RETURN_IF_ERROR(base_->copy_sequence(*active_->base_, *base_snapshot_));
  drafts_.verified = true;
  return run_drafts(true);
}

sdk::Expected<MergedForward> MergedModel::redo_drafts() {
  if (!drafts_.verified) return sdk::internal_error("redo_drafts: no verify_drafts() to redo");
  QGPU_RETURN_IF_ERROR(base_->copy_sequence(*base_snapshot_, *active_->base_));
  active_->tokens_ -= drafts_.count;
  return run_drafts(false);
}

}  // namespace qgpu::core
