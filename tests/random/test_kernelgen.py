#!/usr/bin/env python3
"""The generator's reference semantics on hand-worked cases (values worked out by hand from CUDA's
definitions, not by the evaluator), its determinism, and that its programs stay well-formed."""
import sys
import pathlib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import kernelgen as k  # noqa: E402

failures = []


def expect(what, got, want):
    if got != want:
        failures.append(f"{what}: got {got}, expected {want}")


class T:  # a thread context for expressions
    def __init__(self, tid=0, bid=0, bdim=4):
        self.special = {"tid": tid, "bid": bid, "bdim": bdim, "gtid": bid * bdim + tid}
        self.inputs = list(range(100, 100 + k.NIN))


def ev(e, env=None, t=None):
    return k.eval_expr(e, env or {}, t or T())


C = k.Const
expect("wrapping add", ev(k.Binary("+", C(0xFFFFFFFF), C(2))), 1)
expect("wrapping sub", ev(k.Binary("-", C(1), C(2))), 0xFFFFFFFF)
expect("wrapping mul", ev(k.Binary("*", C(0x10000), C(0x10000))), 0)
expect("shift takes & 31", ev(k.Binary("<<", C(1), C(33))), 2)
expect("logical >>", ev(k.Binary(">>", C(0x80000000), C(31))), 1)
expect("arithmetic >>", ev(k.Binary("sar", C(0x80000000), C(31))), 0xFFFFFFFF)
expect("division by (b | 1)", ev(k.Binary("/", C(7), C(0))), 7)
expect("remainder by (b | 1)", ev(k.Binary("%", C(7), C(2))), 1)  # 7 % 3
expect("signed division truncates toward zero", ev(k.Binary("sdiv", C(k.u32(-7)), C(2))), k.u32(-2))  # -7 / 3
expect("signed remainder takes the dividend's sign", ev(k.Binary("srem", C(k.u32(-7)), C(2))), k.u32(-1))
expect("signed division by a divisor with the top bit cleared", ev(k.Binary("sdiv", C(7), C(k.MASK))), 0)  # 7 / 0x7fffffff
expect("unsigned <", ev(k.Binary("<", C(0xFFFFFFFF), C(1))), 0)
expect("signed <", ev(k.Binary("slt", C(0xFFFFFFFF), C(1))), 1)
expect("__umulhi", ev(k.Binary("mulhi", C(0x80000000), C(4))), 2)
expect("__clz(0)", ev(k.Unary("clz", C(0))), 32)
expect("__clz(1)", ev(k.Unary("clz", C(1))), 31)
expect("__popc", ev(k.Unary("popc", C(0xF0F0))), 8)
expect("__brev(1)", ev(k.Unary("brev", C(1))), 0x80000000)
expect("negate", ev(k.Unary("-", C(1))), 0xFFFFFFFF)
expect("load wraps its index", ev(k.Load(C(k.NIN + 3))), 103)
expect("byte load: byte 5 is byte 1 of word 1", ev(k.Load(C(5), 8)), 101 >> 8)
expect("byte load of 0x12345678", k.eval_expr(k.Load(C(2), 8), {}, type("T", (), {"inputs": [0x12345678] * k.NIN, "special": {}})()), 0x34)
expect("half-word load of 0x12345678", k.eval_expr(k.Load(C(1), 16), {}, type("T", (), {"inputs": [0x12345678] * k.NIN, "special": {}})()), 0x1234)
expect("select", ev(k.Select(C(0), C(5), C(6))), 6)
expect("gtid", ev(k.Special("gtid"), t=T(tid=3, bid=2, bdim=8)), 19)

# A 32-thread block: in[i] = i + 100; a = in[g & 63]; shuffles and votes by CUDA's lane rules.
def block_of(body, block=32, grid=1, acc=None):
    p = k.Program(7, grid, block, body, list(range(100, 100 + k.NIN)), 5, acc or [0, 0, 0, 0])
    return k.evaluate(p)

r = block_of([k.Shuffle("a", "down", k.Var("a"), C(16))])
expect("shfl_down: lane 0 reads lane 16", r["out"][0], 116)
expect("shfl_down: lane 20 keeps its own", r["out"][2 * 20], 120)
r = block_of([k.Shuffle("a", "up", k.Var("a"), C(4))])
expect("shfl_up: lane 3 keeps its own", r["out"][2 * 3], 103)
expect("shfl_up: lane 9 reads lane 5", r["out"][2 * 9], 105)
r = block_of([k.Shuffle("a", "xor", k.Var("a"), C(5))])
expect("shfl_xor: lane 2 reads lane 7", r["out"][2 * 2], 107)
r = block_of([k.Shuffle("a", "idx", k.Var("a"), k.Binary("+", k.Special("tid"), C(33)))])
expect("shfl idx: lane 31 reads lane (31 + 33) & 31 = 0", r["out"][2 * 31], 100)
r = block_of([k.Vote("a", "ballot", k.Binary("<", k.Special("tid"), C(3)))])
expect("ballot of lanes 0..2", r["out"][0], 7)
r = block_of([k.Vote("a", "all", k.Binary("<", k.Special("tid"), C(31)))])
expect("all: lane 31 votes no", r["out"][0], 0)
r = block_of([k.Vote("a", "any", k.Binary("==", k.Special("tid"), C(31)))])
expect("any: lane 31 votes yes", r["out"][0], 1)
# Exchange: s[tid] = a; a = s[(tid + 1) & (B - 1)] in a block of 4, two blocks.
r = block_of([k.Exchange("a", k.Var("a"), k.Binary("+", k.Special("tid"), C(1)))], block=4, grid=2)
expect("exchange: thread 3 of block 1 reads thread 0 of block 1", r["out"][2 * 7], 104)
# Atomics: every thread of 2 blocks of 4 adds its g to acc[g & 3]; max of g into acc[1].
r = block_of([k.Atomic("Add", k.Special("gtid"), k.Special("gtid"))], block=4, grid=2)
expect("atomicAdd", r["acc"], [0 + 4, 1 + 5, 2 + 6, 3 + 7])
r = block_of([k.Atomic("Max", C(1), k.Special("gtid"))], block=4, grid=2, acc=[0, 3, 0, 0])
expect("atomicMax", r["acc"], [0, 7, 0, 0])
# The shared accumulator starts at the operation's identity in each block and folds into acc at the end.
r = block_of([k.Atomic("Min", C(2), k.Special("gtid"), shared=True)], block=4, grid=2, acc=[9, 9, 9, 9])
expect("atomicMin through __shared__", r["acc"], [9, 9, 0, 9])
r = block_of([k.Atomic("And", k.Special("tid"), C(6), shared=True)], block=4, grid=1, acc=[7, 7, 7, 7])
expect("atomicAnd through __shared__", r["acc"], [6, 6, 6, 6])
# A 2-D block of 4 x 2: thread 5 is (x 1, y 1); its linear index is its lane.
p2 = k.Program(7, 2, 8, [k.Assign("a", k.Binary("+", k.Binary("*", k.Special("ty"), C(10)), k.Special("tx")))],
               list(range(100, 100 + k.NIN)), 5, [0, 0, 0, 0], block_y=2, grid_y=2)
r = k.evaluate(p2)
expect("2-D block: thread 5 of block 1 is (1, 1)", r["out"][2 * (8 + 5)], 11)
expect("2-D shapes as run takes them", (p2.grid_text(), p2.block_text()), ("1,2", "4,2"))
if "threadIdx.y * blockDim.x + threadIdx.x" not in p2.cuda():
    failures.append("2-D program without the linear thread index")

# Loops: the trip count taken once, the counter visible in the body.
r = block_of([k.For("i0", k.Binary("+", k.Var("b"), C(1)), [k.Assign("b", k.Binary("+", k.Var("b"), k.Var("i0")))])],
             block=4)
# thread 2: b = 2, trip count (2 + 1) & 3 = 3: b = 2 + 0 + 1 + 2 = 5; out[2 * 2 + 1] = b ^ c ^ d = 5 ^ 5 ^ 7
expect("loop trip count taken once", r["out"][2 * 2 + 1], 5 ^ 5 ^ 7)

# Determinism and well-formedness over many seeds.
expect("deterministic", k.generate(12345).cuda(), k.generate(12345).cuda())
for seed in range(300):
    p = k.generate(seed)
    text = p.cuda()
    if text.count("{") != text.count("}"):
        failures.append(f"seed {seed}: unbalanced braces")
    for s in p.body:
        if isinstance(s, k.For) and isinstance(s.bound, k.Const) and s.bound.value > 4:
            failures.append(f"seed {seed}: a loop of {s.bound.value} iterations")
    ops = set()
    def atomics(body):
        for s in body:
            if isinstance(s, k.Atomic): ops.add(s.op)
            for sub in ("then", "other", "body"):
                atomics(getattr(s, sub, []))
    atomics(p.body)
    if len(ops) > 1:
        failures.append(f"seed {seed}: atomics of kinds {sorted(ops)} (they do not commute)")
    collectives = any(isinstance(s, (k.Shuffle, k.Vote)) for s in p.body)
    if collectives and p.block != 32:
        failures.append(f"seed {seed}: a warp collective in a block of {p.block}")
    r = p.expected()
    if len(r["out"]) != p.grid * p.block * k.OUTS or any(not 0 <= v <= k.MASK for v in r["out"] + r["acc"]):
        failures.append(f"seed {seed}: results out of range")

# with_fault: one statement more, `v = (v ^ <faulting load>)`, deterministic, the original untouched.
for seed in range(30):
    p = k.generate(seed)
    before = p.cuda()
    f1, f2 = k.with_fault(p), k.with_fault(p)
    if p.cuda() != before:
        failures.append(f"seed {seed}: with_fault changed the original program")
    if f1.cuda() != f2.cuda():
        failures.append(f"seed {seed}: with_fault is not deterministic")
    # (an insertion into an empty else branch also prints the branch)
    added = [line for line in f1.cuda().splitlines() if line not in before.splitlines() and line.strip() != "} else {"]
    if len(added) != 1 or not ("& 511u]" in added[0] or "(const char*)in + (" in added[0]):
        failures.append(f"seed {seed}: with_fault added {added}")
expect("out-of-bounds load", k.Load(k.Var("a"), 32, "out-of-bounds").cuda(), "in[(a) & 511u]")
expect("misaligned load", k.Load(k.Var("c"), 32, "misaligned").cuda(),
       "*(const unsigned*)((const char*)in + ((c) & 255u))")

for f in failures:
    print("FAIL:", f)
print(f"test_kernelgen: {'ok' if not failures else f'{len(failures)} failures'}")
sys.exit(1 if failures else 0)
