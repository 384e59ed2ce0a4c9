// The weight compiler's vocabulary that every unit of the circuit is written in
// (qgpu/weights: fields and bits, terms, affine maps, the MLP builder, word slicing),
// named once for the whole of qgpu::simt::circuit.
#pragma once

#include "qgpu/weights/circuit.h"
#include "qgpu/weights/primitives.h"

namespace qgpu::simt::circuit {

using weights::Affine;
using weights::Bit;
using weights::Circuit;
using weights::concat;
using weights::MlpBuilder;
using weights::slice;
using weights::Term;
using weights::Word;

}  // namespace qgpu::simt::circuit
