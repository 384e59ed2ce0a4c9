// Evaluation of a GPU expression: each operation is planned as one launch of a kernels/ kernel
// (plan_*), checked against the machine's limits, run through the Launcher, and read back from the
// launch's arrays. The host only moves values: it never computes a result.
#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>

#include "qgpu/core/gpu_evaluator.h"
#include "qgpu/core/launch_args.h"
#include "qgpu/core/text.h"

namespace qgpu::core {
namespace {

using Shape = GpuValue::Shape;

constexpr std::uint32_t kWarpThreads = 4;  // the library's reductions use one 4-thread block

// One planned launch of a library kernel.
struct KernelCall {
  std::string operation;  // for messages: "sum", "@ (dot)", "+"
  std::string file, kernel;
  sdk::LaunchShape shape;
  std::vector<ArgSpec> args;  // by CUDA parameter name
  std::string result;         // the array holding the result
  bool overflow = false;      // the kernel writes an `overflow` flag array
  GpuValue result_shape;      // the result's shape (its data is replaced by the kernel's)
};

ArgSpec array_arg(std::string name, std::vector<std::int32_t> values) {
  ArgSpec a;
  a.name = std::move(name);
  a.value.is_array = true;
  a.value.array = std::move(values);
  a.text = *a.name;
  return a;
}
ArgSpec zeros_arg(std::string name, std::int64_t n) {
  return array_arg(std::move(name), std::vector<std::int32_t>(static_cast<std::size_t>(n), 0));
}
ArgSpec scalar_arg(std::string name, std::int64_t v) {
  ArgSpec a;
  a.name = std::move(name);
  a.value.scalar = static_cast<std::int32_t>(v);
  a.text = *a.name;
  return a;
}

std::uint32_t blocks_for(std::int64_t threads) {
  return static_cast<std::uint32_t>((threads + kWarpThreads - 1) / kWarpThreads);
}

GpuValue shaped_like(const GpuValue& shape) {
  GpuValue v = shape;
  v.data.assign(shape.data.size(), 0);
  return v;
}

class Evaluator {
 public:
  Evaluator(Launcher& launcher, const GpuEvalOptions& options, MachineLimits limits)
      : launcher_(launcher), options_(options), limits_(limits) {}

  sdk::Expected<GpuValue> eval(const GpuExpression& e) {
    if (e.kind == GpuExpression::Kind::kLiteral) return e.literal;
    std::vector<GpuValue> operands;
    for (const auto& operand : e.operands) {
      QGPU_ASSIGN_OR_RETURN(GpuValue v, eval(operand));
      operands.push_back(std::move(v));
    }
    QGPU_ASSIGN_OR_RETURN(KernelCall call,
                          e.kind == GpuExpression::Kind::kCall ? plan_call(e, operands) : plan_binary(e, operands));
    return run(e, std::move(call));
  }

  std::vector<GpuLaunchReport> take_launches() { return std::move(launches_); }

 private:
  sdk::Status fail(const GpuExpression& at, sdk::ErrorCode code, const std::string& message) const {
    return sdk::error_at(location_of(at), code, message);
  }

  // sum, max, min, cumsum, sort (a vector), and the elementwise functions.
  sdk::Expected<KernelCall> plan_call(const GpuExpression& e, const std::vector<GpuValue>& args) {
    const std::string& f = e.name;
    KernelCall c;
    c.operation = f;
    c.shape = {1, kWarpThreads};
    c.result = "out";
    if (f == "sum" || f == "max" || f == "min" || f == "cumsum" || f == "sort") {
      const GpuValue& v = args[0];
      if (v.shape != Shape::kVector)
        return fail(e, sdk::ErrorCode::kInvalidArgument, f + " expects a vector, got " + describe_shape(v));
      c.args = {array_arg("x", v.data), scalar_arg("n", v.size())};
      if (f == "sum" || f == "max" || f == "min") {
        c.file = f == "sum" ? "sum.cu" : "extrema.cu";
        c.kernel = f == "sum" ? "sum" : f == "max" ? "maximum" : "minimum";
        c.result_shape = GpuValue::scalar(0);
      } else {
        c.file = f + ".cu";
        c.kernel = f;
        c.result_shape = shaped_like(v);
        if (f == "cumsum") c.shape = {1, 1};  // one thread walks the prefixes
      }
      c.args.push_back(zeros_arg("out", c.result_shape.size()));
      c.overflow = f == "sum" || f == "cumsum";
      if (c.overflow) c.args.push_back(zeros_arg("overflow", 1));
      return c;
    }
    // Elementwise functions: scalars broadcast over the other arguments' common shape.
    QGPU_ASSIGN_OR_RETURN(GpuValue shape, common_shape(e, args));
    std::vector<std::vector<std::int32_t>> flat;
    for (const auto& a : args) flat.push_back(broadcast(a, shape));
    const std::int64_t n = shape.size();
    c.file = f + ".cu";
    c.kernel = f;
    c.result_shape = shaped_like(shape);
    if (f == "gcd") {
      c.args = {array_arg("a", flat[0]), array_arg("b", flat[1])};
      c.overflow = true;
    } else if (f == "pow_mod") {
      for (std::int64_t i = 0; i < n; ++i) {
        if (flat[1][i] < 0)
          return fail(e, sdk::ErrorCode::kInvalidArgument,
                      "pow_mod: the exponent must be at least 0, got " + std::to_string(flat[1][i]));
        if (flat[2][i] < 1)
          return fail(e, sdk::ErrorCode::kInvalidArgument,
                      "pow_mod: the modulus must be at least 1, got " + std::to_string(flat[2][i]));
      }
      c.args = {array_arg("b", flat[0]), array_arg("e", flat[1]), array_arg("m", flat[2])};
      c.shape = {blocks_for(n), kWarpThreads};  // one thread per element
    } else {
      if (f == "fib") {
        for (std::int32_t v : flat[0])
          if (v < 0)
            return fail(e, sdk::ErrorCode::kInvalidArgument, "fib: n must be at least 0, got " + std::to_string(v));
      }
      c.args = {array_arg("x", flat[0])};
      c.overflow = f == "fib";
    }
    c.args.push_back(scalar_arg("n", n));
    c.args.push_back(zeros_arg("out", n));
    if (c.overflow) c.args.push_back(zeros_arg("overflow", 1));
    return c;
  }

  // + - * elementwise; @ as dot, matrix @ vector, matrix @ matrix (a vector on the left is one row).
  sdk::Expected<KernelCall> plan_binary(const GpuExpression& e, const std::vector<GpuValue>& args) {
    const GpuValue &a = args[0], &b = args[1];
    KernelCall c;
    c.overflow = true;
    if (e.name != "@") {
      QGPU_ASSIGN_OR_RETURN(GpuValue shape, common_shape(e, args));
      c.operation = e.name;
      c.file = "elementwise.cu";
      c.kernel = e.name == "+" ? "add" : e.name == "-" ? "sub" : "mul";
      c.shape = {1, kWarpThreads};
      c.args = {array_arg("a", broadcast(a, shape)), array_arg("b", broadcast(b, shape)), scalar_arg("n", shape.size()),
                zeros_arg("out", shape.size()), zeros_arg("overflow", 1)};
      c.result = "out";
      c.result_shape = shaped_like(shape);
      return c;
    }
    if (a.shape == Shape::kScalar || b.shape == Shape::kScalar)
      return fail(e, sdk::ErrorCode::kInvalidArgument,
                  "'@' multiplies vectors and matrices, got " + describe_shape(a) + " @ " + describe_shape(b) +
                      " (use '*' for a scalar)");
    if (a.shape == Shape::kVector && b.shape == Shape::kVector) {
      if (a.size() != b.size())
        return fail(
            e, sdk::ErrorCode::kInvalidArgument,
            "'@' (dot product) needs vectors of the same length, got " + describe_shape(a) + " @ " + describe_shape(b));
      c.operation = "@ (dot)";
      c.file = "dot.cu";
      c.kernel = "dot";
      c.shape = {1, kWarpThreads};
      c.args = {array_arg("a", a.data), array_arg("b", b.data), scalar_arg("n", a.size()), zeros_arg("out", 1),
                zeros_arg("overflow", 1)};
      c.result = "out";
      c.result_shape = GpuValue::scalar(0);
      return c;
    }
    // The inner dimensions must agree: a is m x k (a vector is 1 x k), b is k x p (a vector is k x 1).
    const std::int64_t k = a.cols;
    const std::int64_t b_rows = b.shape == Shape::kVector ? b.size() : b.rows;
    if (k != b_rows)
      return fail(e, sdk::ErrorCode::kInvalidArgument,
                  "'@' needs the left operand's columns to equal the right operand's rows, got " + describe_shape(a) +
                      " @ " + describe_shape(b));
    if (b.shape == Shape::kVector) {
      c.operation = "@ (matrix-vector)";
      c.file = "matvec.cu";
      c.kernel = "matvec";
      c.shape = {blocks_for(a.rows), kWarpThreads};  // one thread per row
      c.args = {array_arg("A", a.data), array_arg("x", b.data), scalar_arg("rows", a.rows),
                scalar_arg("cols", k),  zeros_arg("y", a.rows), zeros_arg("overflow", 1)};
      c.result = "y";
      c.result_shape = GpuValue::vector(std::vector<std::int32_t>(static_cast<std::size_t>(a.rows), 0));
      return c;
    }
    c.operation = "@ (matrix-matrix)";
    c.file = "matmul.cu";
    c.kernel = "matmul";
    c.shape = {static_cast<std::uint32_t>(a.rows),
               static_cast<std::uint32_t>(b.cols)};  // a block per row, a thread per column
    c.args = {array_arg("A", a.data),  array_arg("B", b.data),          scalar_arg("m", a.rows), scalar_arg("k", k),
              scalar_arg("p", b.cols), zeros_arg("C", a.rows * b.cols), zeros_arg("overflow", 1)};
    c.result = "C";
    c.result_shape = a.shape == Shape::kVector
                         ? GpuValue::vector(std::vector<std::int32_t>(static_cast<std::size_t>(b.cols), 0))
                         : GpuValue::matrix(a.rows, b.cols, std::vector<std::int32_t>(a.rows * b.cols, 0));
    return c;
  }

  // The shape elementwise operands share: every non-scalar operand's, which must agree.
  sdk::Expected<GpuValue> common_shape(const GpuExpression& e, const std::vector<GpuValue>& args) const {
    const GpuValue* shape = nullptr;
    for (const auto& a : args) {
      if (a.shape == Shape::kScalar) continue;
      if (shape != nullptr && (shape->shape != a.shape || shape->rows != a.rows || shape->cols != a.cols)) {
        std::vector<std::string> shapes;
        for (const auto& x : args) shapes.push_back(describe_shape(x));
        const std::string what = e.kind == GpuExpression::Kind::kBinary ? "'" + e.name + "'" : e.name;
        return fail(e, sdk::ErrorCode::kInvalidArgument,
                    what + " works elementwise on operands of one shape (a scalar goes with any), got " +
                        join(shapes, e.kind == GpuExpression::Kind::kBinary ? " " + e.name + " " : ", "));
      }
      shape = &a;
    }
    return shape != nullptr ? *shape : args.front();
  }

  // The operand's elements over `shape`: a scalar repeated (input preparation, not a result).
  static std::vector<std::int32_t> broadcast(const GpuValue& v, const GpuValue& shape) {
    if (v.shape == Shape::kScalar) return std::vector<std::int32_t>(shape.data.size(), v.data.at(0));
    return v.data;
  }

  sdk::Status check_limits(const GpuExpression& e, const KernelCall& c) const {
    std::int64_t words = 0;
    std::vector<std::string> parts;
    for (const auto& a : c.args) {
      if (!a.value.is_array) continue;
      words += static_cast<std::int64_t>(a.value.array.size());
      parts.push_back(*a.name + " " + std::to_string(a.value.array.size()));
    }
    auto over = [&](const std::string& need, std::int64_t have, std::int64_t value, const std::string& limit) {
      return fail(e, sdk::ErrorCode::kLimitExceeded,
                  c.operation + ": " + need + ", the machine has " + std::to_string(have) + " (" + limit +
                      ", over by " + std::to_string(value - have) + ")");
    };
    if (limits_.global_words >= 0 && words > limits_.global_words)
      return over("the launch needs " + std::to_string(words) + " words of global memory (" + join(parts) + ")",
                  limits_.global_words, words, "global_words");
    const std::int64_t threads = static_cast<std::int64_t>(c.shape.grid) * c.shape.block;
    if (limits_.max_block_threads >= 0 && c.shape.block > limits_.max_block_threads)
      return over("the launch needs " + std::to_string(c.shape.block) + " threads per block", limits_.max_block_threads,
                  c.shape.block, "max_block_threads");
    if (limits_.max_threads >= 0 && threads > limits_.max_threads)
      return over("the launch needs " + std::to_string(threads) + " threads", limits_.max_threads, threads,
                  "max_threads");
    return sdk::Status::ok();
  }

  sdk::Expected<const sdk::KernelModule*> compiled(const std::string& file) {
    auto it = modules_.find(file);
    if (it == modules_.end()) {
      QGPU_ASSIGN_OR_RETURN(sdk::KernelModule m, launcher_.compile((options_.kernel_dir / file).string()));
      it = modules_.emplace(file, std::move(m)).first;
    }
    return &it->second;
  }

  sdk::Expected<GpuValue> run(const GpuExpression& e, KernelCall c) {
    QGPU_RETURN_IF_ERROR(check_limits(e, c));
    const auto start = std::chrono::steady_clock::now();
    const std::string path = (options_.kernel_dir / c.file).string();
    auto context = [&](const sdk::Status& s) { return s.with_context(c.operation + " (kernels/" + c.file + ")"); };
    auto module = compiled(c.file);
    if (!module) return context(module.error());
    auto kernel = choose_kernel(**module, c.kernel, path);
    if (!kernel) return context(kernel.error());
    auto args = bind_args(**kernel, c.args);
    if (!args) return context(args.error());
    auto program = launcher_.lower(**kernel, c.shape);
    if (!program) return context(program.error());
    auto outcome = launcher_.launch(**program, *args);
    if (!outcome) return context(outcome.error());

    GpuLaunchReport report;
    report.operation = c.operation;
    report.column = e.column;
    report.file = c.file;
    report.kernel = c.kernel;
    report.shape = c.shape;
    report.engine = launch_engine_name(launcher_.options().engine);
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (outcome->interpreted) {
      for (const auto& [key, value] : outcome->interp.stats)
        if (key == "block_executions") report.block_executions = value;
    }
    if (outcome->modelled) {
      report.generated_tokens = outcome->model.generated_tokens;
      report.min_margin = outcome->model.min_margin;
      if (outcome->model.checked) report.check = outcome->model.check;
    }
    launches_.push_back(report);
    if (options_.on_launch) options_.on_launch(report);

    const std::vector<std::int32_t>* result = nullptr;
    const std::vector<std::int32_t>* overflow = nullptr;
    for (const auto& a : outcome->arrays()) {
      if (a.param == c.result) result = &a.array;
      if (a.param == "overflow") overflow = &a.array;
    }
    if (result == nullptr || result->size() != c.result_shape.data.size() || (c.overflow && overflow == nullptr))
      return sdk::internal_error(c.operation + ": kernels/" + c.file + " returned no '" + c.result + "' array of " +
                                 std::to_string(c.result_shape.data.size()) + " words");
    if (c.overflow && overflow->at(0) != 0)
      return fail(
          e, sdk::ErrorCode::kLimitExceeded,
          c.operation + ": int32 overflow: " +
              (c.result_shape.size() == 1 ? std::string("the result is") : std::string("an element of the result is")) +
              " outside [-2147483648, 2147483647] (flagged by kernels/" + c.file + ")");
    GpuValue value = std::move(c.result_shape);
    value.data = *result;
    return value;
  }

  Launcher& launcher_;
  const GpuEvalOptions& options_;
  MachineLimits limits_;
  std::map<std::string, sdk::KernelModule> modules_;
  std::vector<GpuLaunchReport> launches_;
};

}  // namespace

MachineLimits machine_limits(const sdk::Description& d) {
  MachineLimits l;
  for (const auto& [key, value] : d.properties) {
    std::int64_t* slot = key == "global_words"        ? &l.global_words
                         : key == "shared_words"      ? &l.shared_words
                         : key == "max_threads"       ? &l.max_threads
                         : key == "max_block_threads" ? &l.max_block_threads
                         : key == "lanes"             ? &l.lanes
                                                      : nullptr;
    if (slot != nullptr) *slot = std::strtoll(value.c_str(), nullptr, 10);
  }
  return l;
}

sdk::Expected<GpuEvalResult> evaluate_gpu_expression(const GpuExpression& e, Launcher& launcher,
                                                     const GpuEvalOptions& options) {
  QGPU_ASSIGN_OR_RETURN(sdk::Description description, launcher.describe_machine());
  Evaluator evaluator(launcher, options, machine_limits(description));
  GpuEvalResult result;
  QGPU_ASSIGN_OR_RETURN(result.value, evaluator.eval(e));
  result.launches = evaluator.take_launches();
  return result;
}

sdk::Expected<std::filesystem::path> find_kernel_library(const std::filesystem::path& wanted,
                                                         const std::filesystem::path& executable) {
  std::error_code ec;
  auto holds_library = [&](const std::filesystem::path& dir) {
    return std::filesystem::is_regular_file(dir / "dot.cu", ec);
  };
  if (!wanted.empty()) {
    if (holds_library(wanted)) return wanted;
    return sdk::not_found("--kernels '" + wanted.string() + "' holds no kernel library (no dot.cu)");
  }
  std::vector<std::filesystem::path> tried;
  if (const char* env = std::getenv("QGPU_KERNEL_DIR"); env != nullptr && *env != '\0') tried.emplace_back(env);
  tried.push_back(executable.parent_path().parent_path() / "share" / "qgpu" / "kernels");
  std::vector<std::string> names;
  for (const auto& dir : tried) {
    if (holds_library(dir)) return dir;
    names.push_back(dir.string());
  }
  return sdk::not_found("the kernel library (kernels/*.cu) was not found in " + join(names) +
                        "; pass --kernels DIR or set QGPU_KERNEL_DIR");
}

}  // namespace qgpu::core
