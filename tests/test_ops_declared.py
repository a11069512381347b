"""Each op declared once, in its bundle (ops/attention/<op>.json, with its cases and its faults;
ops/attention.json holds the axis rules and the shared faults; verify/ops.py; adding one:
docs/adding-an-op.md): every bundle holds one op (and its gradient check, gradcheck_<op>) and only
that op's cases and faults; every
catalogue op has its declaration and every declaration its cases; every declaration holds every
field (summary, uses, axes, tolerances), or says why it has none; what an op builds on names
declared ops, without a cycle; both engines' benchmarks list the same workloads, each timing a
declared op, and every op is benchmarked or says why not (its "workloads": {"none": why}); every
fault of the catalogue targets a declared op (or "shared"), and every op is targeted by one or says
why none does (its "faults": {"none": why}); the scheduler's costs and
the runner's gradcheck bounds are the declared ones; every tensor of every committed golden has
its axis names."""

import copy
import importlib.util
import json
import subprocess

import pytest
from jsonschema import Draft202012Validator

from verify import expectations, ops, schedule
from verify.catalogue import load
from verify.documents import Schemas
from verify.ops import FIELDS, GUIDE, Declarations
from verify.tools.faults import SHARED

from toolkit import BUNDLES, bundle, catalogue_cases

SUITE = "ops/attention.json"  # the axis rules for every op and the shared faults


def bundle_path(name):
    """How a message names the bundle `name`: ops/attention/<name>.json."""
    return f"ops/attention/{name}.json"


@pytest.fixture(scope="module")
def bundles():
    """{name: the parsed bundle ops/attention/<name>.json}, in name order."""
    return {path.stem: bundle(path.stem) for path in sorted(BUNDLES.glob("*.json"))}


@pytest.fixture(scope="module")
def suite(repo_root):
    return json.loads((repo_root / SUITE).read_text())


@pytest.fixture(scope="module")
def doc(bundles, suite):
    """The declarations of every op, assembled from the bundles, with the suite's axis rules:
    {"rules", "ops"}, as Declarations reads them."""
    return {"rules": suite["rules"], "ops": {op: entry for b in bundles.values() for op, entry in b["ops"].items()}}


@pytest.fixture(scope="module")
def declared(repo_root, bundles, suite, doc):
    schema = json.loads((repo_root / "golden" / "schemas" / "ops.schema.json").read_text())
    checks = [(bundle_path(name), Draft202012Validator(schema), b) for name, b in bundles.items()]
    # ops/attention.json follows the schema's $defs/suite (its $refs resolve in the same schema)
    checks.append((SUITE, Draft202012Validator({**schema, **schema["$defs"]["suite"]}), suite))
    for where, validator, instance in checks:
        errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
        assert not errors, f"{where} breaks ops.schema.json at {list(errors[0].absolute_path)}: {errors[0].message}"
    declared = Declarations(doc)
    assert declared.ops == ops.declarations().ops and declared.rules == ops.declarations().rules, (
        "verify/ops.py's declarations are not the bundles' ops with ops/attention.json's rules")
    return declared


@pytest.fixture(scope="module")
def catalogue_ops(repo_root):
    return {c.op for c in load(repo_root / "ops" / "attention", Schemas(repo_root / "golden" / "schemas"))}


@pytest.fixture(scope="module")
def targets():
    """{op: the ids of the faults (of the bundles, and ops/attention.json's shared ones) that target it}."""
    return ops.faults()


@pytest.fixture(scope="module")
def fault_files(repo_root):
    """{fault id: the file that holds it, relative to the checkout}."""
    return {fault["id"]: path.relative_to(repo_root).as_posix() for fault, path in ops.fault_entries()}


@pytest.fixture(scope="module")
def bench(repo_root):
    """bench/workloads.py, the benchmarks' one list of workloads (OPS: the op each one times)."""
    spec = importlib.util.spec_from_file_location("bench_workloads", repo_root / "bench" / "workloads.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---- the checks, on any declarations document (the tests below also feed them broken ones) ----

def missing_fields(doc):
    """One line per op that lacks a field, naming them."""
    d = Declarations(doc)
    return [f"{op}: no {', '.join(d.missing(op))}" for op in doc["ops"] if d.missing(op)]


def bundle_problems(bundles, suite):
    """One bundle per op: each ops/attention/<name>.json declares the op <name> (and may declare
    gradcheck_<name> beside it), each op in one bundle only; each of its cases runs an op it declares
    and each of its faults targets one; the faults of no one op ("shared") are ops/attention.json's."""
    problems, seen = [], {}
    owner = {}  # {op: the bundle that declares it (the first, if several do)}
    for name, b in bundles.items():
        for op in b["ops"]:
            owner.setdefault(op, name)

    def home(op):
        return bundle_path(owner.get(op, op))

    for name, b in bundles.items():
        where, own = bundle_path(name), set(b["ops"])
        if name not in own or own - {name, f"gradcheck_{name}"}:
            problems.append(f"{where} declares {sorted(own)}: a bundle declares the op it is named after, and "
                            f"may declare gradcheck_{name} beside it; move each other op to its own bundle")
        for op in sorted(own):
            if op in seen:
                problems.append(f"{where}: op {op!r} is declared again (also in {bundle_path(seen[op])}); "
                                "declare each op once, in its own bundle")
            seen.setdefault(op, name)
        problems += [f"{where}: case {c['id']!r} runs op {c['op']!r}, which this bundle does not declare; move it "
                     f"to {home(c['op'])}" for c in b["cases"] if c["op"] not in own]
        problems += [f"{where}: fault {f['id']!r} targets op {f['op']!r}, not an op of this bundle; move it to "
                     + (f"{SUITE}'s faults" if f["op"] == SHARED else home(f["op"]))
                     for f in b.get("faults", []) if f["op"] not in own]
    problems += [f"{SUITE}: fault {f['id']!r} targets op {f['op']!r}; only the faults of the numeric core "
                 f"({SHARED!r}) are no one op's, move it to {home(f['op'])}"
                 for f in suite.get("faults", []) if f["op"] != SHARED]
    return problems


def fault_problems(doc, targets, fault_files):
    """Each fault's op declared (or SHARED); each op targeted by a fault or saying why none is, not both."""
    problems = [f"{', '.join(sorted({fault_files[i] for i in ids}))}: {', '.join(ids)} target(s) op {op!r}, which "
                f"is not declared; set 'op' to the declared op each targets, or {SHARED!r}"
                for op, ids in targets.items() if op != SHARED and op not in doc["ops"]]
    for op, entry in doc["ops"].items():
        if op not in targets and "faults" not in entry:
            problems.append(f"{op}: no fault targets it; add one to its bundle's \"faults\" with 'op' {op!r}, or "
                            'say why none does: "faults": {"none": why}')
        if op in targets and "faults" in entry:
            problems.append(f"{op}: says why no fault targets it, but {', '.join(targets[op])} do(es); remove "
                            'its "faults"')
    return problems


def workload_problems(doc, workload_ops):
    """Each workload's op declared; each op benchmarked or saying why not, not both."""
    problems = [f"bench/workloads.py: workload {name!r} times op {op!r}, which is not declared; make OPS name the "
                f"declared op it times" for name, op in workload_ops.items() if op not in doc["ops"]]
    for op, entry in doc["ops"].items():
        names = [name for name, of in workload_ops.items() if of == op]
        if not names and "workloads" not in entry:
            problems.append(f"{op}: no workload of bench/workloads.py times it; add one (an op with forward cases "
                            "and a COMPUTE entry in both engines has a derived one), or say why none does: "
                            '"workloads": {"none": why}')
        if names and "workloads" in entry:
            problems.append(f"{op}: says why no workload times it, but {', '.join(names)} do(es); remove its "
                            '"workloads"')
    return problems


def report(problems, what):
    return f"{len(problems)} problem(s) with {what} in ops/attention/ ({GUIDE}):\n  " + "\n  ".join(problems)


# ---- the declarations as they are ---------------------------------------------------------

def test_each_bundle_holds_one_op_with_its_own_cases_and_faults(bundles, suite):
    problems = bundle_problems(bundles, suite)
    assert not problems, report(problems, "the bundles")


def test_every_op_of_the_catalogue_is_declared_and_every_declaration_has_cases(declared, catalogue_ops):
    undeclared = sorted(catalogue_ops - set(declared.ops))
    assert not undeclared, f"ops without a declaration in their bundle, ops/attention/<op>.json: {undeclared} ({GUIDE})"
    unused = sorted(set(declared.ops) - catalogue_ops)
    assert not unused, f"declarations of ops that no case of the catalogue runs: {unused}"


def test_every_op_declares_every_field(doc, declared):
    problems = missing_fields(doc)
    assert not problems, report(problems, f"the fields every op declares ({', '.join(FIELDS)}; "
                                          '{"none": why} where it has no tolerances)')


def test_every_fault_targets_a_declared_op_and_every_op_is_targeted_or_says_why_not(doc, declared, targets,
                                                                                     fault_files):
    problems = fault_problems(doc, targets, fault_files)
    assert not problems, report(problems, "the faults")


def test_both_engines_benchmark_the_same_workloads(repo_root, node, bench):
    done = subprocess.run([str(node), "bench/workloads.mts", "list"], cwd=repo_root, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    port = json.loads(done.stdout)
    python = {"primitives": list(bench.PRIMITIVES), "cases": [name for name, _ in bench.CASES]}
    assert port == python, f"bench/workloads.mts lists {port}, bench/workloads.py {python}: make them the same"


def test_every_workload_times_a_declared_op_and_every_op_is_benchmarked_or_says_why_not(doc, declared, bench):
    assert set(bench.OPS) == set(bench.PRIMITIVES) | {name for name, _ in bench.CASES} | {w.name for w in bench.DERIVED}
    problems = workload_problems(doc, bench.OPS)
    assert not problems, report(problems, "the workloads")


def test_what_an_op_builds_on_is_declared_and_acyclic(declared):
    for op, entry in declared.ops.items():
        unknown = [u for u in entry["uses"] if u not in declared.ops]
        assert not unknown, f"{op} uses undeclared ops {unknown}"
        assert op not in declared.uses(op), f"{op} builds on itself through {sorted(declared.uses(op))}"


def test_primitives_come_before_what_builds_on_them(declared):
    assert declared.depth("layer_norm") == 0
    assert declared.depth("layer_norm") < declared.depth("encoder_block") < declared.depth("transformer")
    assert declared.depth("transformer") < declared.depth("greedy_decode") < declared.depth("train_reversal")
    assert "layer_norm" in declared.uses("train_reversal") and "train_reversal" not in declared.uses("layer_norm")


def test_the_runner_reads_the_declarations(declared):
    for op in ("gradcheck_transformer", "gradcheck_vit", "gradcheck_alignment"):
        assert expectations.gradcheck_bound(op) == (declared.ops[op]["tolerances"]["gradcheck"]["value"], None)


@pytest.mark.parametrize("engine", ["reference", "port"])
def test_every_tensor_of_every_golden_has_axis_names(declared, repo_root, engine):
    missing = []
    for path in sorted((repo_root / "golden" / "attention" / engine).glob("*.json")):
        doc = json.loads(path.read_text())
        for part in ("inputs", "outputs"):
            for name, tensor in doc[part].items():
                ndim = len(tensor["shape"])
                if ndim and declared.axes(doc["case"]["op"], name, ndim) is None:
                    missing.append(f"{doc['case']['op']}: {part}.{name} ({ndim} axes)")
    assert not missing, (f"{len(missing)} tensors have no axis names; declare them in the op's bundle, "
                         f"ops/attention/<op>.json (its axes), or as a rule of {SUITE}, first: {sorted(set(missing))[:10]}")


# ---- the checks fail on what they are for --------------------------------------------------

def test_an_op_declared_with_summary_uses_and_axes_only_is_named_with_what_it_lacks(doc):
    broken = copy.deepcopy(doc)
    broken["ops"]["new_op"] = {"summary": "a new op", "uses": [], "axes": {}}
    assert missing_fields(broken) == ["new_op: no tolerances"]
    message = report(missing_fields(broken), "the fields")
    assert GUIDE in message and "new_op" in message


def test_a_case_or_fault_outside_its_ops_bundle_an_op_declared_twice_and_a_misnamed_bundle_are_named(bundles, suite):
    """The one-bundle-per-op guarantee fails on what breaks it, naming the bundle and where to move."""
    broken, shared = copy.deepcopy(bundles), copy.deepcopy(suite)
    case = broken["layer_norm"]["cases"].pop(0)
    broken["gelu"]["cases"].append(case)  # a layer_norm case in gelu's bundle
    check = next(c for c in broken["rope"]["cases"] if c["op"] == "gradcheck_rope")
    broken["layer_norm"]["cases"].append(check)  # rope's gradient check in layer_norm's bundle
    fault = broken["gelu"]["faults"].pop(0)
    broken["ffn"]["faults"] = [fault]  # a gelu fault in ffn's bundle
    broken["ffn"]["faults"].append(shared["faults"].pop(0))  # a shared fault in a bundle
    shared["faults"].append(broken["linear"]["faults"][0])  # an op's fault among the shared ones
    broken["rope"]["ops"]["dropout"] = broken["dropout"]["ops"]["dropout"]  # dropout declared twice
    broken["erf"] = broken.pop("erf_bits")  # a bundle named after no op it declares
    problems = bundle_problems(broken, shared)
    assert any(p.startswith("ops/attention/gelu.json: case") and repr(case["id"]) in p
               and "runs op 'layer_norm'" in p and p.endswith("move it to ops/attention/layer_norm.json")
               for p in problems), problems
    assert any(p.startswith("ops/attention/layer_norm.json: case") and repr(check["id"]) in p
               and p.endswith("move it to ops/attention/rope.json") for p in problems), problems
    assert any(p.startswith("ops/attention/ffn.json: fault") and repr(fault["id"]) in p and "targets op 'gelu'" in p
               and p.endswith("move it to ops/attention/gelu.json") for p in problems), problems
    assert any(p.startswith("ops/attention/ffn.json: fault") and "targets op 'shared'" in p
               and p.endswith("move it to ops/attention.json's faults") for p in problems), problems
    assert any(p.startswith("ops/attention.json: fault") and "targets op 'linear'" in p
               and p.endswith("move it to ops/attention/linear.json") for p in problems), problems
    assert any(p.startswith("ops/attention/rope.json declares ['dropout', 'gradcheck_rope', 'rope']")
               for p in problems), problems
    assert any(p.startswith("ops/attention/rope.json: op 'dropout' is declared again (also in "
                            "ops/attention/dropout.json)") for p in problems), problems
    assert any(p.startswith("ops/attention/erf.json declares ['erf_bits']") for p in problems), problems
    assert len(problems) == 8, problems
    assert not bundle_problems(bundles, suite)  # the bundles as they are
    message = report(problems, "the bundles")
    assert GUIDE in message and "8 problem(s)" in message


def test_an_undeclared_target_an_op_without_one_or_a_reason_and_a_stale_reason_are_named(doc, targets, bench,
                                                                                         fault_files):
    """For faults and workloads alike: the target of one that aims at no declared op, an op that
    none targets and that says no why, and a reason kept though one now targets the op."""
    broken, moved = copy.deepcopy(doc), dict(targets)
    moved["no_such_op"] = moved.pop("layer_norm")  # layer norm's faults now aim elsewhere
    broken["ops"]["gelu"]["faults"] = {"none": "a stale reason"}  # though gelu's faults target it
    problems = fault_problems(broken, moved, fault_files)
    assert any(p.startswith("ops/attention/layer_norm.json: ") and "target(s) op 'no_such_op', which is not declared" in p
               for p in problems), problems
    assert any(p.startswith("layer_norm: no fault") and '{"none": why}' in p for p in problems), problems
    assert any(p.startswith("gelu: says why") and "port.gelu.tanh_approximation" in p for p in problems), problems
    # gelu's workloads (its primitive's and its derived one) now time no declared op
    broken, ops_of = copy.deepcopy(doc), {name: "gelus" if op == "gelu" else op for name, op in bench.OPS.items()}
    broken["ops"]["ffn"]["workloads"] = {"none": "a stale reason"}  # though the ffn workload times it
    problems += workload_problems(broken, ops_of)
    assert any("workload 'gelu' times op 'gelus', which is not declared" in p for p in problems), problems
    assert any("workload 'gelu.compute[gelu.grid]' times op 'gelus'" in p for p in problems), problems
    assert any(p.startswith("gelu: no workload") and '{"none": why}' in p for p in problems), problems
    assert any(p.startswith("ffn: says why") and "but ffn, ffn.compute[ffn.wide] do(es)" in p for p in problems), problems
    assert len(problems) == 7, problems


def test_a_tolerance_a_test_reads_but_no_op_declares_fails_naming_what_to_declare(node, repo_root):
    from toolkit import run_port, tolerance

    assert tolerance("gelu", "erf_ulps") == 2 and tolerance("gelu", "erf_ulps").rule == "ulp"
    with pytest.raises(AssertionError, match=r"op 'gelu' declares no tolerance 'nope' .*it declares \['engines_backward', "
                                             r".*docs/adding-an-op\.md"):
        tolerance("gelu", "nope")
    with pytest.raises(AssertionError, match=r"op 'new_op' is not declared"):
        tolerance("new_op", "torch")
    script = """
import { tolerance } from "./port_ts/test/toolkit.ts";
const out = { ulps: tolerance("gelu", "erf_ulps").value };
try { tolerance("gelu", "nope"); } catch (e) { out.message = e.message; }
console.log(JSON.stringify(out));
"""
    port = run_port(node, repo_root, script)
    assert port["ulps"] == 2
    assert "op 'gelu' declares no tolerance 'nope'" in port["message"] and GUIDE in port["message"], port


def test_axis_names_from_the_shared_rules_follow_their_glob_patterns():
    """Declarations.axes matches a tensor name against the shared rules' patterns as fnmatchcase does
    (compiled once as one regular expression per rule), the first matching rule of the right rank
    winning, and remembers what it found without handing out its own list."""
    import fnmatch
    rules = [{"names": ["*.weights", "attn?"], "axes": ["query", "key"]},
             {"names": [], "axes": ["never"]},
             {"names": ["[ab]*", "x.*.y"], "axes": {"1": ["i"], "2": ["i", "j"]}},
             {"names": ["*"], "axes": ["all"]}]
    # the op's own keys: exact names (never compiled to a pattern) and each of fnmatch's special
    # characters ('*', '?', a set), each a pattern
    own_axes = {"own": ["o"], "own.*": ["p", "q"], "w?": ["r"], "[xy].k": ["s"], "plain.name": ["t", "u"],
                "own.z": ["z"]}
    d = Declarations({"rules": rules, "ops": {"op": {"axes": own_axes}}})
    names = ["lab.weights", "weights", "attn1", "attn12", "a", "b.c", "c", "x.1.y", "x..y", "x.y", "own", "own.z",
             "full.lab.weights", "", "A", "[ab]", "w1", "w", "x.k", "y.k", "z.k", "plain.name", "plain.names",
             "full.w2"]
    for name in names:
        for ndim in (1, 2, 3):
            bare = name[len("full."):] if name.startswith("full.") else name
            own = d.ops["op"]["axes"]
            expected = [own[bare]] if bare in own else []
            expected += [v for k, v in own.items() if k != bare and fnmatch.fnmatchcase(bare, k)]
            expected += [r["axes"] for r in rules if any(fnmatch.fnmatchcase(bare, n) for n in r["names"])]
            expected = [e.get(str(ndim)) if isinstance(e, dict) else e for e in expected]
            expected = next((list(e) for e in expected if e is not None and len(e) == ndim), None)
            assert d.axes("op", name, ndim) == expected, (name, ndim)
    found = d.axes("op", "lab.weights", 2)
    found.append("changed")
    assert d.axes("op", "lab.weights", 2) == ["query", "key"]


def test_every_declared_tolerance_is_read_somewhere(repo_root, declared):
    """A tolerance whose name is quoted nowhere a check could read it (the tests of both engines, the
    benchmarks, the runner, the catalogue's expectations: the bundles' cases, not their declarations,
    which name every tolerance) bounds nothing: its declaration goes."""
    import re
    sources = "".join(p.read_text(encoding="utf-8") for pattern in (
        "tests/*.py", "bench/*.py", "bench/*.mts", "port_ts/test/**/*.ts", "verify/**/*.py")
        for p in repo_root.glob(pattern)) + json.dumps(catalogue_cases())
    unread = [f"{op}.{name}" for op, entry in declared.ops.items() for name in entry.get("tolerances", {})
              if name != "none" and not re.search(rf"[\"']{re.escape(name)}[\"']", sources)]
    assert not unread, f"declared in ops/attention/*.json but read by no check: {unread}"
