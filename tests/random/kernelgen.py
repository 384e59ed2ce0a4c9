"""Random CUDA kernels with a reference semantics of their own (issue 23, item 1).

A program is a small tree (statements over expressions) that prints as one CUDA kernel and that this
module evaluates independently of qgpu: 32-bit unsigned arithmetic that wraps, thread by thread, block
by block. Every program is well defined and its result does not depend on the schedule:

- values are `unsigned` (wrapping); shifts take `& 31`; divisions divide by `(x | 1)`; the signed
  forms (`(int)a < (int)b`, arithmetic `>>`) are defined for every operand;
- loops run a bounded number of times (a constant, or an expression `& 3`);
- `in[...]` is read with an index `& (N - 1)`; a thread writes only its own words of `out`, once, at
  the end; `acc` is only updated by atomics of one kind per program (they commute) whose return
  value is not used;
- shared memory: a thread writes `s[t]` (t its linear index in the block), the block meets at
  `__syncthreads()`, reads any `s[... & (threads - 1)]`, and meets again before the next write;
- warp collectives (`__shfl*_sync`, `__ballot_sync`, `__any_sync`, `__all_sync`) with the full mask,
  only in 32-thread blocks and only at the kernel's top level (every thread reaches them).
Barriers and collectives stand only at the top level, so the evaluator runs the top-level statements
in phases: per thread between them, for the whole block at them.

Deterministic from a seed: generate(seed) gives the same program on every machine.
"""

from __future__ import annotations

import copy
import dataclasses
import random
from typing import Callable

MASK = 0xFFFFFFFF
FULL = "0xffffffffu"


def u32(x: int) -> int:
    return x & MASK


def s32(x: int) -> int:
    x &= MASK
    return x - (1 << 32) if x & 0x80000000 else x


# --- expressions ------------------------------------------------------------------------------

@dataclasses.dataclass
class Const:
    value: int

    def cuda(self) -> str:
        return f"{self.value}u"


@dataclasses.dataclass
class Var:
    name: str

    def cuda(self) -> str:
        return self.name


@dataclasses.dataclass
class Special:
    name: str  # tid, bid, bdim, gtid (linear, x fastest as CUDA numbers warps); tx, ty (2-D blocks)

    def cuda(self) -> str:
        return {"tid": "t", "bid": "bl", "bdim": "bd", "gtid": "g", "tx": "threadIdx.x", "ty": "threadIdx.y"}[self.name]


@dataclasses.dataclass
class Load:  # in[index & (N - 1)], or a byte / half-word of `in` (little-endian, as a GPU reads it)
    index: object
    width: int = 32
    fault: str = ""  # with_fault(): "out-of-bounds" (index & 511) or "misaligned" (a byte offset & 255)

    def cuda(self) -> str:
        if self.fault == "out-of-bounds":
            return f"in[({self.index.cuda()}) & 511u]"
        if self.fault == "misaligned":
            return f"*(const unsigned*)((const char*)in + (({self.index.cuda()}) & 255u))"
        if self.width == 8:
            return f"(unsigned)((const unsigned char*)in)[({self.index.cuda()}) & {4 * NIN - 1}u]"
        if self.width == 16:
            return f"(unsigned)((const unsigned short*)in)[({self.index.cuda()}) & {2 * NIN - 1}u]"
        return f"in[({self.index.cuda()}) & {NIN - 1}u]"


@dataclasses.dataclass
class Unary:
    op: str  # ~ - popc clz brev
    a: object

    def cuda(self) -> str:
        a = self.a.cuda()
        return {"~": f"(~{a})", "-": f"(0u - {a})", "popc": f"(unsigned)__popc({a})",
                "clz": f"(unsigned)__clz((int)({a}))", "brev": f"__brev({a})"}[self.op]


@dataclasses.dataclass
class Binary:
    op: str
    a: object
    b: object

    def cuda(self) -> str:
        a, b = self.a.cuda(), self.b.cuda()
        if self.op in ("+", "-", "*", "^", "&", "|"):
            return f"({a} {self.op} {b})"
        return {
            "<<": f"({a} << ({b} & 31u))",
            ">>": f"({a} >> ({b} & 31u))",
            "sar": f"(unsigned)((int)({a}) >> ({b} & 31u))",
            "/": f"({a} / ({b} | 1u))",
            "sdiv": f"(unsigned)((int)({a}) / (int)(({b} | 1u) & 0x7fffffffu))",
            "srem": f"(unsigned)((int)({a}) % (int)(({b} | 1u) & 0x7fffffffu))",
            "%": f"({a} % ({b} | 1u))",
            "<": f"(unsigned)({a} < {b})",
            "slt": f"(unsigned)((int)({a}) < (int)({b}))",
            "==": f"(unsigned)({a} == {b})",
            "!=": f"(unsigned)({a} != {b})",
            "min": f"min({a}, {b})",
            "max": f"max({a}, {b})",
            "mulhi": f"__umulhi({a}, {b})",
        }[self.op]


@dataclasses.dataclass
class Select:
    c: object
    a: object
    b: object

    def cuda(self) -> str:
        return f"({self.c.cuda()} ? {self.a.cuda()} : {self.b.cuda()})"


def eval_expr(e, env: dict, ctx: "Thread") -> int:
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Var):
        return env[e.name]
    if isinstance(e, Special):
        return ctx.special[e.name]
    if isinstance(e, Load):
        i = eval_expr(e.index, env, ctx)
        if e.width == 32:
            return ctx.inputs[i & (NIN - 1)]
        per_word = 32 // e.width
        i &= per_word * NIN - 1
        return (ctx.inputs[i // per_word] >> (e.width * (i % per_word))) & ((1 << e.width) - 1)
    if isinstance(e, Unary):
        a = eval_expr(e.a, env, ctx)
        if e.op == "~":
            return u32(~a)
        if e.op == "-":
            return u32(-a)
        if e.op == "popc":
            return bin(a).count("1")
        if e.op == "clz":
            return 32 - a.bit_length()
        if e.op == "brev":
            return int(f"{a:032b}"[::-1], 2)
    if isinstance(e, Binary):
        a, b = eval_expr(e.a, env, ctx), eval_expr(e.b, env, ctx)
        op = e.op
        if op == "+": return u32(a + b)
        if op == "-": return u32(a - b)
        if op == "*": return u32(a * b)
        if op == "^": return a ^ b
        if op == "&": return a & b
        if op == "|": return a | b
        if op == "<<": return u32(a << (b & 31))
        if op == ">>": return a >> (b & 31)
        if op == "sar": return u32(s32(a) >> (b & 31))
        if op == "/": return a // (b | 1)
        if op == "%": return a % (b | 1)
        if op in ("sdiv", "srem"):  # C truncates toward zero; the divisor is positive and odd
            x, y = s32(a), (b | 1) & 0x7FFFFFFF
            q = abs(x) // y * (1 if x >= 0 else -1)
            return u32(q if op == "sdiv" else x - q * y)
        if op == "<": return int(a < b)
        if op == "slt": return int(s32(a) < s32(b))
        if op == "==": return int(a == b)
        if op == "!=": return int(a != b)
        if op == "min": return min(a, b)
        if op == "max": return max(a, b)
        if op == "mulhi": return (a * b) >> 32
    if isinstance(e, Select):
        return eval_expr(e.a, env, ctx) if eval_expr(e.c, env, ctx) else eval_expr(e.b, env, ctx)
    raise TypeError(e)


# --- statements -------------------------------------------------------------------------------

@dataclasses.dataclass
class Assign:
    var: str
    e: object


@dataclasses.dataclass
class If:
    c: object
    then: list
    other: list


@dataclasses.dataclass
class For:
    var: str     # the counter, readable in the body
    bound: object  # Const (1..4) or an expression taken & 3
    body: list


@dataclasses.dataclass
class Atomic:
    op: str  # Add Or Xor Max Min And
    index: object
    e: object
    shared: bool = False  # on the block's __shared__ accumulator, folded into acc at the end


# Top level only (the block meets there):
@dataclasses.dataclass
class Exchange:  # s[tid] = e; __syncthreads(); var = s[index & (B-1)]; __syncthreads();
    var: str
    e: object
    index: object
    warp: bool = False  # __syncwarp() instead of __syncthreads() (32-thread blocks: one warp)


@dataclasses.dataclass
class Shuffle:  # var = __shfl{,_xor,_up,_down}_sync(FULL, e, arg)
    var: str
    kind: str  # idx xor up down
    e: object
    arg: object  # idx: an expression (lane = arg & 31); others: Const


@dataclasses.dataclass
class Vote:  # var = __ballot_sync / __any_sync / __all_sync (FULL, c)
    var: str
    kind: str  # ballot any all
    c: object


COLLECTIVES = (Exchange, Shuffle, Vote)
NIN = 64      # words of `in`
NACC = 4      # words of `acc`
VARS = ("a", "b", "c", "d")
OUTS = 2      # words of `out` per thread: a and b


@dataclasses.dataclass
class Program:
    seed: int
    grid: int
    block: int
    body: list
    inputs: list
    param: int
    acc: list
    block_y: int = 1  # 2-D launches: block = (block / block_y) x block_y threads, grid likewise
    grid_y: int = 1

    def grid_text(self) -> str:
        return f"{self.grid // self.grid_y},{self.grid_y}" if self.grid_y > 1 else str(self.grid)

    def block_text(self) -> str:
        return f"{self.block // self.block_y},{self.block_y}" if self.block_y > 1 else str(self.block)

    def cuda(self) -> str:
        lines = [f"// qgpu random kernel, seed {self.seed}: grid {self.grid_text()}, block {self.block_text()} "
                 "(tests/random/kernelgen.py)",
                 "extern \"C\" __global__ void k(const unsigned* in, unsigned* out, unsigned* acc, unsigned p) {"]
        if uses(self.body, Exchange):
            lines.append(f"  __shared__ unsigned s[{self.block}];")
        if self.block_y > 1 or self.grid_y > 1:
            lines.append("  const unsigned t = threadIdx.y * blockDim.x + threadIdx.x, bl = blockIdx.y * gridDim.x + "
                         "blockIdx.x, bd = blockDim.x * blockDim.y;")
        else:
            lines.append("  const unsigned t = threadIdx.x, bl = blockIdx.x, bd = blockDim.x;")
        op = shared_atomic_op(self.body)
        if op:
            lines.append(f"  __shared__ unsigned sacc[{NACC}];")
            lines.append(f"  if (t < {NACC}u) sacc[t] = {IDENTITY[op]}u;")
            lines.append("  __syncthreads();")
        lines.append("  const unsigned g = bl * bd + t;")
        lines.append(f"  unsigned a = in[g & {NIN - 1}u], b = g, c = p, d = {self.seed % 1000}u;")
        emit(self.body, lines, 1)
        if op:
            lines.append("  __syncthreads();")
            lines.append(f"  if (t < {NACC}u) atomic{op}(&acc[t], sacc[t]);")
        lines.append(f"  out[g * {OUTS}u] = a;")
        lines.append(f"  out[g * {OUTS}u + 1u] = b ^ c ^ d;")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def args(self) -> list[str]:
        threads = self.grid * self.block
        return [f"in=[{','.join(str(s32(v)) for v in self.inputs)}]",
                f"out=zeros({threads * OUTS})",
                f"acc=[{','.join(str(s32(v)) for v in self.acc)}]",
                f"p={s32(self.param)}"]

    def expected(self) -> dict:
        return evaluate(self)


IDENTITY = {"Add": 0, "Or": 0, "Xor": 0, "Max": 0, "And": MASK, "Min": MASK}


def apply_atomic(op: str, x: int, v: int) -> int:
    return {"Add": lambda: u32(x + v), "Or": lambda: x | v, "Xor": lambda: x ^ v, "And": lambda: x & v,
            "Max": lambda: max(x, v), "Min": lambda: min(x, v)}[op]()


def shared_atomic_op(body: list):
    """The operation of the program's atomics on the shared accumulator, or None."""
    for s in body:
        if isinstance(s, Atomic) and s.shared:
            return s.op
        for sub in (getattr(s, "then", []), getattr(s, "other", []), getattr(s, "body", [])):
            op = shared_atomic_op(sub)
            if op:
                return op
    return None


def uses(body: list, kind) -> bool:
    for s in body:
        if isinstance(s, kind):
            return True
        if isinstance(s, If) and (uses(s.then, kind) or uses(s.other, kind)):
            return True
        if isinstance(s, For) and uses(s.body, kind):
            return True
    return False


def emit(body: list, lines: list, depth: int) -> None:
    pad = "  " * depth
    for s in body:
        if isinstance(s, Assign):
            lines.append(f"{pad}{s.var} = {s.e.cuda()};")
        elif isinstance(s, If):
            lines.append(f"{pad}if ({s.c.cuda()}) {{")
            emit(s.then, lines, depth + 1)
            if s.other:
                lines.append(f"{pad}}} else {{")
                emit(s.other, lines, depth + 1)
            lines.append(f"{pad}}}")
        elif isinstance(s, For):
            if isinstance(s.bound, Const):
                lines.append(f"{pad}for (unsigned {s.var} = 0; {s.var} < {s.bound.cuda()}; ++{s.var}) {{")
            else:  # the trip count is taken once, before the body may change what it reads
                lines.append(f"{pad}for (unsigned {s.var} = 0, n{s.var} = ({s.bound.cuda()}) & 3u; "
                             f"{s.var} < n{s.var}; ++{s.var}) {{")
            emit(s.body, lines, depth + 1)
            lines.append(f"{pad}}}")
        elif isinstance(s, Atomic):
            target = "sacc" if s.shared else "acc"
            lines.append(f"{pad}atomic{s.op}(&{target}[({s.index.cuda()}) & {NACC - 1}u], {s.e.cuda()});")
        elif isinstance(s, Exchange):
            sync = "__syncwarp();" if s.warp else "__syncthreads();"
            lines.append(f"{pad}s[t] = {s.e.cuda()};")
            lines.append(f"{pad}{sync}")
            lines.append(f"{pad}{s.var} = s[({s.index.cuda()}) & (bd - 1u)];")
            lines.append(f"{pad}{sync}")
        elif isinstance(s, Shuffle):
            fn = {"idx": "__shfl_sync", "xor": "__shfl_xor_sync", "up": "__shfl_up_sync",
                  "down": "__shfl_down_sync"}[s.kind]
            arg = f"(int)(({s.arg.cuda()}) & 31u)" if s.kind == "idx" else str(s.arg.value)
            lines.append(f"{pad}{s.var} = {fn}({FULL}, {s.e.cuda()}, {arg});")
        elif isinstance(s, Vote):
            if s.kind == "ballot":
                lines.append(f"{pad}{s.var} = __ballot_sync({FULL}, {s.c.cuda()} != 0u);")
            else:
                lines.append(f"{pad}{s.var} = (unsigned)__{s.kind}_sync({FULL}, {s.c.cuda()} != 0u);")
        else:
            raise TypeError(s)


# --- the reference semantics ------------------------------------------------------------------

class Thread:
    def __init__(self, prog: Program, bid: int, tid: int):
        self.inputs = prog.inputs
        g = bid * prog.block + tid
        bx = prog.block // prog.block_y
        self.special = {"tid": tid, "bid": bid, "bdim": prog.block, "gtid": g, "tx": tid % bx, "ty": tid // bx}
        self.env = {"a": prog.inputs[g & (NIN - 1)], "b": g, "c": prog.param, "d": prog.seed % 1000}


def run_body(body: list, t: Thread, acc: list, sacc: list) -> None:
    for s in body:
        if isinstance(s, Assign):
            t.env[s.var] = eval_expr(s.e, t.env, t)
        elif isinstance(s, If):
            run_body(s.then if eval_expr(s.c, t.env, t) else s.other, t, acc, sacc)
        elif isinstance(s, For):
            n = s.bound.value if isinstance(s.bound, Const) else eval_expr(s.bound, t.env, t) & 3
            for i in range(n):
                t.env[s.var] = i
                run_body(s.body, t, acc, sacc)
            t.env.pop(s.var, None)
        elif isinstance(s, Atomic):
            i = eval_expr(s.index, t.env, t) & (NACC - 1)
            target = sacc if s.shared else acc
            target[i] = apply_atomic(s.op, target[i], eval_expr(s.e, t.env, t))
        else:
            raise TypeError(f"{type(s).__name__} below the top level")


def collective(s, threads: list, block: int) -> None:
    if isinstance(s, Exchange):
        shared = [eval_expr(s.e, t.env, t) for t in threads]
        picks = [shared[eval_expr(s.index, t.env, t) & (block - 1)] for t in threads]
    elif isinstance(s, Shuffle):
        vals = [eval_expr(s.e, t.env, t) for t in threads]
        picks = []
        for lane, t in enumerate(threads):
            if s.kind == "idx":
                src = eval_expr(s.arg, t.env, t) & 31
            elif s.kind == "xor":
                src = lane ^ s.arg.value
            elif s.kind == "up":
                src = lane - s.arg.value if lane >= s.arg.value else lane
            else:
                src = lane + s.arg.value if lane + s.arg.value < 32 else lane
            picks.append(vals[src])
    else:
        bits = [1 if eval_expr(s.c, t.env, t) else 0 for t in threads]
        ballot = sum(b << lane for lane, b in enumerate(bits))
        value = {"ballot": ballot, "any": int(ballot != 0), "all": int(all(bits))}[s.kind]
        picks = [value] * len(threads)
    for t, v in zip(threads, picks):
        t.env[s.var] = v


def evaluate(prog: Program) -> dict:
    acc = list(prog.acc)
    out = [0] * (prog.grid * prog.block * OUTS)
    for bid in range(prog.grid):
        threads = [Thread(prog, bid, tid) for tid in range(prog.block)]
        op = shared_atomic_op(prog.body)
        sacc = [IDENTITY[op] if op else 0] * NACC
        for s in prog.body:
            if isinstance(s, COLLECTIVES):
                collective(s, threads, prog.block)
            else:
                for t in threads:
                    run_body([s], t, acc, sacc)
        if op:
            for i in range(NACC):
                acc[i] = apply_atomic(op, acc[i], sacc[i])
        for t in threads:
            g = t.special["gtid"]
            out[g * OUTS] = t.env["a"]
            out[g * OUTS + 1] = t.env["b"] ^ t.env["c"] ^ t.env["d"]
    return {"out": out, "acc": acc}


# --- the generator ----------------------------------------------------------------------------

class Generator:
    def __init__(self, seed: int):
        self.r = random.Random(seed)
        self.seed = seed
        self.loop_vars: list[str] = []
        self.budget = 0  # expression nodes left for this program (keeps it inside the machine's ROM)

    def const(self) -> Const:
        r = self.r.random()
        if r < 0.5:
            return Const(self.r.randrange(0, 16))
        if r < 0.8:
            return Const(self.r.randrange(0, 1 << 16))
        return Const(self.r.randrange(0, 1 << 32))

    def leaf(self):
        r = self.r.random()
        if self.loop_vars and r < 0.15:
            return Var(self.r.choice(self.loop_vars))
        if r < 0.6:
            return Var(self.r.choice(VARS))
        if r < 0.75:
            return Special(self.r.choice(("tid", "bid", "gtid", "bdim") + (("tx", "ty") if self.two_d else ())))
        return self.const()

    def expr(self, depth: int = 0):
        self.budget -= 1
        if depth >= 2 or self.budget <= 0 or self.r.random() < 0.35:
            return self.leaf()
        r = self.r.random()
        if r < 0.08:
            return Load(self.expr(depth + 1), self.r.choice((32, 32, 8, 16)))
        if r < 0.16:
            return Unary(self.r.choice(("~", "-", "popc", "clz", "brev")), self.expr(depth + 1))
        if r < 0.24:
            return Select(self.cond(depth + 1), self.expr(depth + 1), self.expr(depth + 1))
        ops = ["+", "-", "*", "^", "&", "|", "<<", ">>", "sar", "<", "slt", "==", "!=", "min", "max", "mulhi"]
        if self.r.random() < 0.05:
            ops = ["/", "%", "sdiv", "srem"]
        return Binary(self.r.choice(ops), self.expr(depth + 1), self.expr(depth + 1))

    def cond(self, depth: int = 0):
        op = self.r.choice(("<", "slt", "==", "!=", "&1"))
        if op == "&1":
            return Binary("&", self.expr(depth + 1), Const(1))
        return Binary(op, self.expr(depth + 1), self.expr(depth + 1))

    def stmt(self, depth: int, top: bool):
        r = self.r.random()
        if top and self.block == 32 and r < 0.15:
            kind = self.r.choice(("idx", "xor", "up", "down", "ballot", "any", "all"))
            var = self.r.choice(VARS)
            if kind in ("ballot", "any", "all"):
                return Vote(var, kind, self.cond())
            arg = self.expr(1) if kind == "idx" else Const(self.r.choice((1, 2, 4, 8, 16, 3, 5)))
            return Shuffle(var, kind, self.expr(), arg)
        if top and r < 0.25:
            return Exchange(self.r.choice(VARS), self.expr(), self.expr(1), self.block == 32 and self.r.random() < 0.5)
        if depth < 2 and r < 0.4:
            then = self.block_of(depth + 1, self.r.randrange(1, 3))
            other = self.block_of(depth + 1, self.r.randrange(0, 2))
            return If(self.cond(), then, other)
        if depth < 2 and r < 0.5:
            var = f"i{depth}"
            bound = Const(self.r.randrange(1, 5)) if self.r.random() < 0.5 else self.expr(1)
            if isinstance(bound, Const):  # a constant trip count is at most 4
                bound = Const(bound.value & 3)
            self.loop_vars.append(var)
            body = self.block_of(depth + 1, self.r.randrange(1, 3))
            self.loop_vars.pop()
            return For(var, bound, body)
        if r < 0.58:
            return Atomic(self.atomic_op, self.expr(1), self.expr(), self.r.random() < 0.3)
        return Assign(self.r.choice(VARS), self.expr())

    def block_of(self, depth: int, n: int) -> list:
        return [self.stmt(depth, False) for _ in range(n)]

    def program(self) -> Program:
        r = self.r
        self.block = r.choice((4, 8, 16, 32, 32))
        # 2-D launches (drawn from a stream of their own, so that a seed's program is the same either way)
        shape = random.Random(self.seed * 7919 + 1)
        self.block_y = shape.choice((1, 1, 1, 2, 4)) if self.block >= 8 else 1
        self.two_d = self.block_y > 1
        # One atomic operation per program: updates of one kind commute (an And and an Add to the same
        # word would depend on the schedule).
        self.atomic_op = r.choice(("Add", "Or", "Xor", "Max", "Min", "And"))
        grid = r.choice((1, 1, 2, 3))
        self.budget = r.randrange(12, 30)
        body = []
        for _ in range(r.randrange(2, 6)):
            if self.budget <= 0:
                break
            body.append(self.stmt(0, True))
        inputs = [r.randrange(0, 1 << 32) if r.random() < 0.3 else r.randrange(0, 100) for _ in range(NIN)]
        acc = [r.choice((0, 0, MASK, r.randrange(0, 1 << 32))) for _ in range(NACC)]
        grid_y = grid if grid > 1 and shape.random() < 0.3 else 1
        return Program(self.seed, grid, self.block, body, inputs, r.randrange(0, 1 << 32), acc, self.block_y, grid_y)


def generate(seed: int) -> Program:
    return Generator(seed).program()


def with_fault(prog: Program) -> Program:
    """The program with one more statement, at a place chosen from the seed (the top level, or inside a
    branch or a loop): `v ^= <load of in>` whose address may fault: the index of a variable masked to
    511 instead of 63 (past every array for most values: out-of-bounds), or a byte offset masked to 255
    (misaligned unless a multiple of 4). Whether, where and in which thread it faults is the
    interpreter's to say: the evaluator above does not model faults."""
    prog = copy.deepcopy(prog)
    bodies = []

    def walk(x):
        if isinstance(x, list):
            bodies.append(x)
            for y in x:
                walk(y)
        elif isinstance(x, (If, For)):
            for f in dataclasses.fields(x):
                if isinstance(getattr(x, f.name), list):
                    walk(getattr(x, f.name))

    walk(prog.body)
    r = random.Random(prog.seed * 104729 + 7)
    body = r.choice(bodies)
    var, index = r.choice(VARS), r.choice(VARS)
    load = Load(Var(index), 32, r.choice(("out-of-bounds", "misaligned")))
    body.insert(r.randrange(0, len(body) + 1), Assign(var, Binary("^", Var(var), load)))
    return prog


# --- reduction (delta debugging on the tree) --------------------------------------------------

def _smaller_bodies(body: list):
    """Bodies one step simpler than `body`: a statement dropped, an if replaced by a branch, a loop by its
    body once, a compound statement's body simplified, an expression replaced by a leaf."""
    for i in range(len(body)):
        yield body[:i] + body[i + 1:]
    for i, s in enumerate(body):
        if isinstance(s, If):
            yield body[:i] + s.then + body[i + 1:]
            yield body[:i] + s.other + body[i + 1:]
            for t in _smaller_bodies(s.then):
                yield body[:i] + [If(s.c, t, s.other)] + body[i + 1:]
            for o in _smaller_bodies(s.other):
                yield body[:i] + [If(s.c, s.then, o)] + body[i + 1:]
            for c in _smaller_exprs(s.c):
                yield body[:i] + [If(c, s.then, s.other)] + body[i + 1:]
        elif isinstance(s, For):
            for b in _smaller_bodies(s.body):
                yield body[:i] + [For(s.var, s.bound, b)] + body[i + 1:]
            if not isinstance(s.bound, Const) or s.bound.value > 1:
                yield body[:i] + [For(s.var, Const(1), s.body)] + body[i + 1:]
        else:
            for field in ("e", "index", "c", "arg"):
                if hasattr(s, field) and not isinstance(getattr(s, field), Const) and \
                        not (isinstance(s, Shuffle) and s.kind != "idx" and field == "arg"):
                    for e in _smaller_exprs(getattr(s, field)):
                        yield body[:i] + [dataclasses.replace(s, **{field: e})] + body[i + 1:]


def _smaller_exprs(e):
    if isinstance(e, (Const, Var, Special)):
        if not (isinstance(e, Const) and e.value == 0):
            yield Const(0)
        return
    yield Const(0)
    yield Const(1)
    for child in ("a", "b", "c", "index"):
        if hasattr(e, child):
            yield getattr(e, child)
    for child in ("a", "b", "c", "index"):
        if hasattr(e, child):
            for smaller in _smaller_exprs(getattr(e, child)):
                yield dataclasses.replace(e, **{child: smaller})


def reduce(prog: Program, still_fails: Callable[[Program], bool], limit: int = 400) -> Program:
    """The smallest program reachable by one-step simplifications that still fails (greedy, at most `limit` tries)."""
    tries = 0
    improved = True
    while improved and tries < limit:
        improved = False
        for body in _smaller_bodies(prog.body):
            if tries >= limit:
                break
            tries += 1
            candidate = dataclasses.replace(prog, body=body)
            if still_fails(candidate):
                prog = candidate
                improved = True
                break
        if not improved and prog.grid > 1:
            candidate = dataclasses.replace(prog, grid=1, grid_y=1)
            tries += 1
            if still_fails(candidate):
                prog, improved = candidate, True
    return prog
