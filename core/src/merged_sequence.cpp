// The merged model's sequences: the base's sequence and the circuit layers' states
// (MergedModel::create_sequence, copy_sequence, use, reset, circuit_state).
#include <utility>

#include "merged_model_internal.h"
#include "qgpu/core/merged_model.h"

namespace qgpu::core {

using detail::view_of;

void MergedModel::SequenceDeleter::operator()(Sequence* s) const {
  delete s;
}

sdk::Expected<MergedModel::SequenceHandle> MergedModel::create_sequence() {
  SequenceHandle s(new Sequence);
  s->owner_ = this;
  QGPU_ASSIGN_OR_RETURN(s->base_, base_->create_sequence());
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    sdk::Handle<sdk::LayerState> st;
    QGPU_ASSIGN_OR_RETURN(st, backend_->create_state());
    s->circuit_.push_back(std::move(st));
  }
  return s;
}

sdk::Status MergedModel::copy_sequence(const Sequence& from, Sequence& to) {
  if (from.owner_ != this || to.owner_ != this)
    return sdk::invalid_argument("copy_sequence: a sequence of another merged model");
  if (&from == &to) return sdk::Status::ok();
  if (!from.base_ || !to.base_)
    return sdk::invalid_argument("copy_sequence: the merged model's own sequence is not copied (create sequences)");
  QGPU_RETURN_IF_ERROR(base_->copy_sequence(*from.base_, *to.base_));
  for (std::size_t i = 0; i < layers_.size(); ++i)
    QGPU_RETURN_IF_ERROR(backend_->copy_state(*from.circuit_[i], *to.circuit_[i]));
  if (reference_) {
    weights::ReferenceModel::State state = &from == active_ ? reference_->state() : from.reference_;
    if (&to == active_)
      reference_->swap_state(state);  // non-empty: the model takes the copy
    else
      to.reference_ = std::move(state);
  }
  to.tokens_ = from.tokens_;
  return sdk::Status::ok();
}

sdk::Status MergedModel::use(Sequence* s) {
  Sequence* next = s != nullptr ? s : own_.get();
  if (next->owner_ != this) return sdk::invalid_argument("use: a sequence of another merged model");
  if (next == active_) return sdk::Status::ok();
  if (drafts_.count > 0 && !drafts_.verified)
    return sdk::internal_error("use: the sequence in use has drafted ids not verified");
  drafts_ = {};
  if (reference_) {                               // the sparse path's state lives in the reference model while in use
    reference_->swap_state(active_->reference_);  // the old one out (the model starts fresh)
    if (!next->reference_.empty()) reference_->swap_state(next->reference_);
    next->reference_.clear();
  }
  active_ = next;
  return sdk::Status::ok();
}

std::int64_t MergedModel::tokens() const {
  return active_->tokens_;
}

sdk::Status MergedModel::reset() {
  if (active_->base_)
    QGPU_RETURN_IF_ERROR(base_->truncate_sequence(*active_->base_, 0));
  else
    base_->reset();
  for (auto& st : active_->circuit_) st->reset();
  if (reference_) reference_->reset();
  drafts_ = {};
  active_->tokens_ = 0;
  return sdk::Status::ok();
}

sdk::Expected<weights::StateView> MergedModel::circuit_state() {
  if (reference_) return reference_->state_view();
  const std::int64_t nv = shapes_.linear_num_value_heads, dk = shapes_.linear_key_head_dim,
                     dv = shapes_.linear_value_head_dim;
  weights::StateView view;
  view.dtype = dtype_;
  states_.resize(layers_.size());
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    weights::LayerStateView lv;
    lv.value_heads = nv;
    lv.key_dim = dk;
    lv.value_dim = dv;
    const sdk::LayerState& state = *active_->circuit_[i];
    if (state.tokens() > 0) {  // a layer no token ran through has no state (read_ram says so)
      states_[i].assign(static_cast<std::size_t>(nv * dk * dv), 0.0f);
      const std::int64_t shape[3] = {nv, dk, dv};
      QGPU_RETURN_IF_ERROR(backend_->download_state(state, view_of(states_[i].data(), sdk::DType::kF32, shape))
                               .with_context("circuit layer " + std::to_string(i)));
      lv.data = states_[i].data();
    }
    view.layers.push_back(lv);
  }
  return view;
}

}  // namespace qgpu::core
