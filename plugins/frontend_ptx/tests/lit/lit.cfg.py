# lit configuration for the frontend's FileCheck tests (run through ctest as frontend.lit).
import os

import lit.formats

config.name = "qgpu-frontend"
config.test_format = lit.formats.ShTest(True)
config.suffixes = [".ptx", ".cu", ".test"]
config.excludes = ["lit.cfg.py", "lit.site.cfg.py.in"]
# FileCheck and not come from LLVM 16's bin directory.
llvm_bin = os.path.dirname(config.filecheck)
config.environment["PATH"] = os.pathsep.join([llvm_bin, config.qgpu_bin_dir, config.environment.get("PATH", os.environ.get("PATH", ""))])
config.substitutions.append(("%qgpu-ptx", config.qgpu_ptx))
config.substitutions.append(("%inputs", config.inputs_dir))
if config.clang_cuda:
    config.available_features.add("clang")
