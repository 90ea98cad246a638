"""How strong an exercise's tests are: mutate its model answer and see whether the grade notices.

A grade can only be trusted if a wrong answer loses points. The planted wrong answers under
``solutions/NN/wrong/`` are a handful of mistakes someone thought of; this module makes hundreds
mechanically, the way mutation testing measures a test suite: each *mutant* is the model answer
with one small change (an operator flipped, a part of a key dropped, a field read from the wrong
attribute, a rule of a table removed, a role added, a list element deleted...). For each mutant:

1. its **behaviour** is computed by the exercise's judge module (``behaviour(folder)`` in
   :mod:`sim.course.judges.<module>`): what the answer does on a matrix of scenarios, seeds, faults
   and direct probes, broader than the tests, described by what the seed's rules care about (the
   decisions intake made, the states reached, the publications, which intents share a key; not
   the bytes of a key or a digest). A mutant whose behaviour equals the model answer's is
   **equivalent**: no rule can tell it apart, so no test should fail it;
2. every other mutant is graded with every test, hidden ones included, as a student's submission
   would be. It is **killed** when it scores below full marks; a **survivor** behaves differently
   and still gets full marks: a wrong answer the grade would not notice.

The figure is killed / (mutants - equivalent), per exercise (``protolab kit verify --mutants``;
target 95%). An instructor can note why an equivalent mutant is harmless in
``solutions/NN/mutants.toml`` (``[[note]] mutant = "ID" why = "..."``).

Python files are mutated on their syntax tree (:func:`python_mutants`); TOML and JSON files on
their parsed value (:func:`data_mutants`).
"""

from __future__ import annotations

import ast
import copy
import json
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

__all__ = ["Mutant", "MutantResult", "MutationReport", "mutants_of", "python_mutants", "data_mutants",
           "behaviour_of", "mutation_run", "first_difference", "TARGET"]

#: The share of non-equivalent mutants that must lose points on every exercise.
TARGET = 0.95


@dataclass(frozen=True)
class Mutant:
    id: str  # stable while the model answer does not change: file, place, operator, change
    file: str  # the file of the submission it changes
    what: str  # the change, in words
    text: str  # the mutated file's whole content


# ------------------------------------------------------------------------------------------ Python

_SWAP_CMP = {ast.Eq: [ast.NotEq], ast.NotEq: [ast.Eq], ast.Lt: [ast.LtE, ast.Gt], ast.LtE: [ast.Lt, ast.GtE],
             ast.Gt: [ast.GtE, ast.Lt], ast.GtE: [ast.Gt, ast.LtE], ast.In: [ast.NotIn], ast.NotIn: [ast.In],
             ast.Is: [ast.IsNot], ast.IsNot: [ast.Is]}
_SWAP_BIN = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.FloorDiv: ast.Mult, ast.Div: ast.Mult,
             ast.Mod: ast.FloorDiv, ast.BitOr: ast.BitAnd, ast.BitAnd: ast.BitOr}
_UNWRAP = {"list", "tuple", "dict", "str", "sorted", "set", "frozenset", "int", "float", "repr", "len", "bool"}
_MAX_SWAPS = 8  # alternatives tried per place for a string, an attribute or a key


class _Facts(ast.NodeVisitor):
    """What the file uses, for swaps: attributes read per base name, string keys, short strings."""

    def __init__(self):
        self.attrs: dict[str, list[str]] = {}
        self.keys: list[str] = []
        self.strings: list[str] = []

    def visit_Attribute(self, node):
        if isinstance(node.value, ast.Name):
            names = self.attrs.setdefault(node.value.id, [])
            if node.attr not in names:
                names.append(node.attr)
        self.generic_visit(node)

    def visit_Subscript(self, node):
        if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str) and node.slice.value not in self.keys:
            self.keys.append(node.slice.value)
        self.generic_visit(node)

    def visit_Constant(self, node):
        if isinstance(node.value, str) and len(node.value) <= 40 and node.value not in self.strings:
            self.strings.append(node.value)


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            out.add(id(body[0]))
            out.add(id(body[0].value))
    return out


def _short(node: ast.AST, limit: int = 60) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # noqa: BLE001 - a description only
        text = type(node).__name__
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _options(node: ast.AST, facts: _Facts, skip: set[int], in_function: bool) -> list[tuple[ast.AST | None, str]]:
    """Replacements for ``node``: ``(new node, what)``; a new node of None deletes a statement."""
    out: list[tuple[ast.AST | None, str]] = []
    if id(node) in skip:
        return out
    if isinstance(node, ast.Constant):
        v = node.value
        if isinstance(v, bool):
            out.append((ast.Constant(not v), f"{v!r} -> {not v!r}"))
        elif isinstance(v, int):
            for w in dict.fromkeys((v + 1, v - 1, 0)):
                if w != v:
                    out.append((ast.Constant(w), f"{v!r} -> {w!r}"))
        elif isinstance(v, str):
            if v:
                out.append((ast.Constant(""), f"{v!r} -> ''"))
            others = [s for s in facts.strings if s != v and s][:_MAX_SWAPS]
            for w in others:
                out.append((ast.Constant(w), f"{v!r} -> {w!r}"))
    elif isinstance(node, ast.JoinedStr) and len(node.values) > 1:
        for i, part in enumerate(node.values):
            new = copy.deepcopy(node)
            del new.values[i]
            out.append((new, f"f-string without its part {_short(part, 30)}"))
    elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Name):
        for other in [a for a in facts.attrs.get(node.value.id, []) if a != node.attr][:_MAX_SWAPS]:
            new = copy.deepcopy(node)
            new.attr = other
            out.append((new, f"{_short(node)} -> {node.value.id}.{other}"))
    elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        for other in [k for k in facts.keys if k != node.slice.value][:_MAX_SWAPS]:
            new = copy.deepcopy(node)
            new.slice = ast.Constant(other)
            out.append((new, f"{_short(node)} -> [{other!r}]"))
    elif isinstance(node, ast.Compare) and len(node.ops) == 1:
        for op in _SWAP_CMP.get(type(node.ops[0]), []):
            new = copy.deepcopy(node)
            new.ops = [op()]
            out.append((new, f"{_short(node)}: {type(node.ops[0]).__name__} -> {op.__name__}"))
        out.append((ast.Constant(True), f"{_short(node)} -> True"))
        out.append((ast.Constant(False), f"{_short(node)} -> False"))
    elif isinstance(node, ast.BoolOp):
        other = ast.Or if isinstance(node.op, ast.And) else ast.And
        new = copy.deepcopy(node)
        new.op = other()
        out.append((new, f"{_short(node)}: {type(node.op).__name__.lower()} -> {other.__name__.lower()}"))
        for i, v in enumerate(node.values):
            if len(node.values) == 2:
                out.append((copy.deepcopy(node.values[1 - i]), f"{_short(node)} -> {_short(node.values[1 - i])}"))
            else:
                new = copy.deepcopy(node)
                del new.values[i]
                out.append((new, f"{_short(node)} without {_short(v)}"))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        out.append((copy.deepcopy(node.operand), f"{_short(node)} -> {_short(node.operand)}"))
    elif isinstance(node, ast.IfExp):
        out.append((copy.deepcopy(node.body), f"{_short(node)} -> always {_short(node.body)}"))
        out.append((copy.deepcopy(node.orelse), f"{_short(node)} -> always {_short(node.orelse)}"))
    elif isinstance(node, ast.BinOp):
        swap = _SWAP_BIN.get(type(node.op))
        if swap is not None:
            new = copy.deepcopy(node)
            new.op = swap()
            out.append((new, f"{_short(node)}: {type(node.op).__name__} -> {swap.__name__}"))
        out.append((copy.deepcopy(node.left), f"{_short(node)} -> {_short(node.left)}"))
        out.append((copy.deepcopy(node.right), f"{_short(node)} -> {_short(node.right)}"))
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _UNWRAP \
            and len(node.args) == 1 and not node.keywords:
        out.append((copy.deepcopy(node.args[0]), f"{_short(node)} -> {_short(node.args[0])}"))
    elif isinstance(node, (ast.List, ast.Tuple, ast.Set)) and node.elts:
        for i, e in enumerate(node.elts):
            new = copy.deepcopy(node)
            del new.elts[i]
            out.append((new, f"{_short(node)} without {_short(e)}"))
    elif isinstance(node, ast.Dict) and node.keys:
        for i, k in enumerate(node.keys):
            new = copy.deepcopy(node)
            del new.keys[i]
            del new.values[i]
            out.append((new, f"{_short(node)} without the entry {_short(k) if k is not None else '**'}"))
    elif isinstance(node, ast.comprehension) and node.ifs:
        for i, cond in enumerate(node.ifs):
            new = copy.deepcopy(node)
            del new.ifs[i]
            out.append((new, f"comprehension without its condition {_short(cond)}"))
    if in_function and isinstance(node, ast.stmt):
        if isinstance(node, ast.If):
            for value in (True, False):
                new = copy.deepcopy(node)
                new.test = ast.Constant(value)
                out.append((new, f"if {_short(node.test)} -> if {value}"))
        if isinstance(node, ast.Return) and node.value is not None and \
                not (isinstance(node.value, ast.Constant) and node.value.value is None):
            out.append((ast.Return(ast.Constant(None)), f"{_short(node)} -> return None"))
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Return)):
            out.append((None, f"statement deleted: {_short(node)}"))
    return out


def _children(node: ast.AST):
    for name, value in ast.iter_fields(node):
        if isinstance(value, list):
            for i, v in enumerate(value):
                if isinstance(v, ast.AST):
                    yield (name, i), v
        elif isinstance(value, ast.AST):
            yield (name, None), value


def _replace(tree: ast.AST, path: list, new: ast.AST | None) -> None:
    node = tree
    for name, i in path[:-1]:
        node = getattr(node, name) if i is None else getattr(node, name)[i]
    name, i = path[-1]
    if i is None:
        setattr(node, name, new)
    elif new is None:  # a statement deleted: a pass keeps the body valid
        getattr(node, name)[i] = ast.Pass()
    else:
        getattr(node, name)[i] = new


def python_mutants(name: str, source: str) -> list[Mutant]:
    """Every single-change mutant of the Python file ``name`` with ``source``."""
    tree = ast.parse(source)
    facts = _Facts()
    facts.visit(tree)
    skip = _docstrings(tree)
    sites: list[tuple[list, ast.AST, bool]] = []

    def walk(node: ast.AST, path: list, in_function: bool) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return
        for step, child in _children(node):
            inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            sites.append((path + [step], child, inner))
            walk(child, path + [step], inner)

    walk(tree, [], False)
    out: list[Mutant] = []
    seen: set[str] = set()
    for path, node, in_function in sites:
        for new, what in _options(node, facts, skip, in_function):
            mutated = copy.deepcopy(tree)
            _replace(mutated, path, new)
            try:
                text = ast.unparse(ast.fix_missing_locations(mutated)) + "\n"
                compile(text, name, "exec")
            except (SyntaxError, ValueError, TypeError):
                continue
            if text in seen:
                continue
            seen.add(text)
            line = getattr(node, "lineno", 0)
            out.append(Mutant(id=f"{name}:{line}:{len(out) + 1}", file=name, what=f"line {line}: {what}", text=text))
    return out


# ------------------------------------------------------------------------------------------ data


def _leaves(value, path=()):
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, path + (i,))


def _key_of(path: tuple) -> str:
    """The name a value sits under: its dict key, or the key of the list holding it."""
    for step in reversed(path):
        if isinstance(step, str):
            return step
    return ""


def _set(value, path: tuple, new, delete: bool = False):
    value = copy.deepcopy(value)
    node = value
    for step in path[:-1]:
        node = node[step]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = new
    return value


def _show_path(path: tuple) -> str:
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
    return out or "(the whole file)"


def data_mutants(name: str, value, dump) -> list[Mutant]:
    """Every single-change mutant of a TOML or JSON document ``value`` (``dump`` writes one back):
    a key or list element removed, two neighbours swapped, a string replaced by another that the
    document holds under the same name, a number moved by one, a flag flipped."""
    by_key: dict[str, list[str]] = {}
    for path, v in _leaves(value):
        if isinstance(v, str):
            names = by_key.setdefault(_key_of(path), [])
            if v not in names:
                names.append(v)
    changes: list[tuple[object, str]] = []
    for path, v in _leaves(value):
        if not path:
            continue
        where = _show_path(path)
        changes.append((_set(value, path, None, delete=True), f"{where} removed"))
        if isinstance(path[-1], int):
            parent = value
            for step in path[:-1]:
                parent = parent[step]
            i = path[-1]
            if i + 1 < len(parent) and parent[i] != parent[i + 1]:
                swapped = _set(_set(value, path, parent[i + 1]), path[:-1] + (i + 1,), parent[i])
                changes.append((swapped, f"{where} and the element after it swapped"))
        if isinstance(v, bool):
            changes.append((_set(value, path, not v), f"{where}: {v!r} -> {not v!r}"))
        elif isinstance(v, int):
            for w in (v + 1, v - 1):
                changes.append((_set(value, path, w), f"{where}: {v!r} -> {w!r}"))
        elif isinstance(v, str):
            for w in [x for x in by_key.get(_key_of(path), []) if x != v][:_MAX_SWAPS]:
                changes.append((_set(value, path, w), f"{where}: {v!r} -> {w!r}"))
    out: list[Mutant] = []
    seen: set[str] = set()
    for new, what in changes:
        try:
            text = dump(new)
        except (TypeError, ValueError):
            continue
        if text in seen:
            continue
        seen.add(text)
        out.append(Mutant(id=f"{name}:{len(out) + 1}", file=name, what=what, text=text))
    return out


def mutants_of(name: str, text: str) -> list[Mutant]:
    """The mutants of one file of a model answer, by its kind."""
    if name.endswith(".py"):
        return python_mutants(name, text)
    if name.endswith(".json"):
        return data_mutants(name, json.loads(text), lambda v: json.dumps(v, indent=2, ensure_ascii=False) + "\n")
    if name.endswith(".toml"):
        import tomli_w

        return data_mutants(name, tomllib.loads(text), tomli_w.dumps)
    return []


# ------------------------------------------------------------------------------------------ the run


def behaviour_of(ex):
    """The exercise's ``behaviour(folder)`` function: in the judge module its tests name."""
    import importlib

    for t in ex.tests:
        mod = importlib.import_module(f"sim.course.judges.{t.judge.rpartition('.')[0]}")
        fn = getattr(mod, "behaviour", None)
        if callable(fn):
            return fn
    return None


def _hook(ex, name: str):
    """The function ``name`` of the judge module the exercise's tests name, or None."""
    import importlib

    for t in ex.tests:
        mod = importlib.import_module(f"sim.course.judges.{t.judge.rpartition('.')[0]}")
        fn = getattr(mod, name, None)
        if callable(fn):
            return fn
    return None


def certain_of(ex):
    """The exercise's ``certain_failures(folder, tests)``, if its judge module has one: the tests a
    mutant of the model answer fails for certain, worked out cheaply (exercise 3: its contract cases,
    in process), so that a mutant is not played through every run only to learn what one case says.
    Beside it a module may offer ``behaviour_part(folder)``: ``(key, value)``, the cheapest part of its
    behaviour, compared first (a mutant that differs there is not equivalent; the rest is not worked out)."""
    return _hook(ex, "certain_failures")


def first_difference(a, b, path: str = "") -> str:
    """Where two behaviours first differ, as a path with both values (cut short); "" when equal."""
    if a == b:
        return ""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in a or k not in b:
                return f"{path}.{k}: only in {'the mutant' if k in b else 'the model answer'}"
            d = first_difference(a[k], b[k], f"{path}.{k}")
            if d:
                return d
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, f"{path}[{i}]")
            if d:
                return d
        return f"{path}: {len(a)} items in the model answer, {len(b)} in the mutant"
    sa, sb = json.dumps(a, default=str), json.dumps(b, default=str)
    return f"{path or '.'}: model answer {sa[:80]}, mutant {sb[:80]}"


@dataclass
class MutantResult:
    mutant: Mutant
    equivalent: bool  # behaves as the model answer on every case of the behaviour matrix
    differs: str = ""  # where its behaviour first differs
    score: float | None = None
    max_score: int = 0
    failed: list[str] = field(default_factory=list)  # tests it did not pass
    note: str = ""  # an instructor's note (solutions/NN/mutants.toml)

    @property
    def killed(self) -> bool:
        return not self.equivalent and self.score is not None and self.score < self.max_score

    @property
    def survived(self) -> bool:
        return not self.equivalent and not self.killed

    def to_dict(self) -> dict:
        d = asdict(self)
        d["mutant"] = {"id": self.mutant.id, "file": self.mutant.file, "what": self.mutant.what}
        d.update(killed=self.killed, survived=self.survived)
        return d


@dataclass
class MutationReport:
    exercise: int
    slug: str
    results: list[MutantResult] = field(default_factory=list)
    problem: str = ""  # why the run could not be made (no solutions, no behaviour function)

    @property
    def total(self) -> int:
        return len(self.results)

    @property
    def equivalent(self) -> int:
        return sum(r.equivalent for r in self.results)

    @property
    def killed(self) -> int:
        return sum(r.killed for r in self.results)

    @property
    def survivors(self) -> list[MutantResult]:
        return [r for r in self.results if r.survived]

    @property
    def score(self) -> float | None:
        n = self.total - self.equivalent
        return self.killed / n if n else None

    def to_dict(self) -> dict:
        return {"exercise": self.exercise, "slug": self.slug, "mutants": self.total, "equivalent": self.equivalent,
                "killed": self.killed, "survived": len(self.survivors), "score": self.score, "target": TARGET,
                "problem": self.problem, "results": [r.to_dict() for r in self.results]}


def _notes(sol: Path) -> dict[str, str]:
    path = sol / "mutants.toml"
    if not path.is_file():
        return {}
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return {n["mutant"]: n.get("why", "") for n in data.get("note", []) if isinstance(n, dict) and "mutant" in n}


def _judge_one(number: int, files: dict[str, str], mutant: Mutant | None, reference) -> dict:
    """In a worker process: the mutant's behaviour and, unless equivalent, its grade."""
    import tempfile

    from .catalog import get_exercise
    from .evaluate import evaluate

    ex = get_exercise(number)
    with tempfile.TemporaryDirectory(prefix="protolab-mutant-") as tmp:
        folder = Path(tmp) / ex.dirname
        folder.mkdir()
        for name, text in files.items():
            (folder / name).write_text(mutant.text if mutant is not None and mutant.file == name else text,
                                       encoding="utf-8")
        fn = behaviour_of(ex)
        differs = ""
        part_of = _hook(ex, "behaviour_part")
        if mutant is not None and part_of is not None and isinstance(reference, dict):
            # the cheapest part of the behaviour first: a mutant that differs there differs
            try:
                name, part = part_of(folder)
                part = json.loads(json.dumps(part, default=str))
                differs = first_difference(reference.get(name), part, name)
            except Exception as e:  # noqa: BLE001
                differs = f"raised {type(e).__name__}"
        if not differs:
            try:
                got = fn(folder)
            except Exception as e:  # noqa: BLE001 - a mutant that cannot even run behaves differently
                got = {"error": f"{type(e).__name__}: {e}"}
            got = json.loads(json.dumps(got, default=str))  # as it crosses processes: tuples as lists
            if mutant is None:
                return {"behaviour": got}
            differs = first_difference(reference, got)
        if not differs:
            return {"equivalent": True}
        certain = certain_of(ex)
        tests = ex.graded_tests(True)
        failed = certain(folder, tests) if certain is not None else []
        if failed:  # killed for certain: each of these tests is all or nothing and already lost
            max_score = float(sum(t.points for t in tests))
            lost = sum(t.points for t in tests if t.name in failed)
            return {"equivalent": False, "differs": differs, "score": max_score - lost, "max_score": max_score,
                    "failed": failed, "certain": True}
        rep = evaluate(ex, folder, hidden=True, isolate=False)
        return {"equivalent": False, "differs": differs, "score": rep.score, "max_score": rep.max_score,
                "failed": [r.name for r in rep.results if not r.passed]}


def mutation_run(ex, *, jobs: int = 2, progress=None, limit: int | None = None) -> MutationReport:
    """Mutate ``ex``'s model answer and judge every mutant (see the module's docstring).
    ``progress(done, total, what)`` is called after each mutant; ``limit`` keeps an even sample."""
    from concurrent.futures import ProcessPoolExecutor, as_completed
    import multiprocessing

    from .catalog import solutions_dir

    report = MutationReport(ex.number, ex.slug)
    sol = solutions_dir(ex)
    if sol is None:
        report.problem = "this install has no solutions/ folder (an instructor's checkout has)"
        return report
    if behaviour_of(ex) is None:
        report.problem = f"the judges of exercise {ex.number} define no behaviour(folder) to compare mutants by"
        return report
    files = {name: (sol / name).read_text(encoding="utf-8") for name in ex.files}
    mutants = [m for name, text in files.items() for m in mutants_of(name, text)]
    if limit is not None and len(mutants) > limit:
        step = len(mutants) / limit
        mutants = [mutants[int(i * step)] for i in range(limit)]
    notes = _notes(sol)
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=ctx) as pool:
        reference = pool.submit(_judge_one, ex.number, files, None, None).result()["behaviour"]
        futures = {pool.submit(_judge_one, ex.number, files, m, reference): m for m in mutants}
        results: dict[str, MutantResult] = {}
        for done, fut in enumerate(as_completed(futures), 1):
            m = futures[fut]
            d = fut.result()
            results[m.id] = MutantResult(m, d["equivalent"], d.get("differs", ""), d.get("score"),
                                         d.get("max_score", 0), d.get("failed", []), notes.get(m.id, ""))
            if progress is not None:
                progress(done, len(mutants), m.id)
    report.results = [results[m.id] for m in mutants]
    return report
