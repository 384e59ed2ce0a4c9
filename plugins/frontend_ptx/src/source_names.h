// Kernels by the names their CUDA source gives them.
//
// A kernel written without extern "C" reaches PTX under its Itanium-mangled name (`dbl(int*, int)` is
// `.entry _Z3dblPii`). Users launch it, and read about it in errors and --json, by the name they
// wrote: the qualified function name without parameters (`dbl`, `ns::inc`, `tset` for a template).
// Where two kernels of one file would get the same name, each gets the shortest longer form that tells
// them apart: with template arguments (`tset<int>`, `tset<unsigned int>`), then with the parameter
// list (`f(int*)`, `f(unsigned int*)`), and finally the PTX name itself.
#pragma once

#include <string>
#include <vector>

namespace qgpu::ptx {

// `_Z3dblPii` -> `dbl(int*, int)`; a name that is not mangled (or does not demangle) comes back as is.
std::string demangle(const std::string& name);

// The function's name as written: `_ZN2ns3incEPi` -> `ns::inc`, `_Z4tsetIiEvPT_` -> `tset`;
// other names unchanged.
std::string function_name(const std::string& name);

// The identifier a CUDA declaration of the function uses: `_ZN2ns3incEPi` -> `inc`, `tset` for
// `_Z4tsetIiEvPT_`; other names unchanged.
std::string declared_identifier(const std::string& name);

// The names users know the kernels `entries` (PTX names, in file order) by: function_name() where that
// is unique in the file, else the shortest longer form that is (see above). Always pairwise distinct.
std::vector<std::string> kernel_source_names(const std::vector<std::string>& entries);

}  // namespace qgpu::ptx
