"""The architecture, checked on the source: the import graph has no cycle, the apps depend on
each other in one direction only (storageops <- collectors <- campaigns <- alerts <- devsite),
the rooms of the campaigns app too, and migrations run no live project code
(docs/architecture.md).

Every module of the project packages is parsed with `ast` (nothing is imported), and every
import of a project module is collected: at module level, inside functions and under
`if TYPE_CHECKING:` alike, because a lazy import that hides a cycle is still a cycle.

- `import a.b.c` and `from a.b.c import name` depend on `a.b.c`; `from a.b import c` depends
  on `a.b.c` when `c` is a submodule, on `a.b` otherwise.
- A package is its `__init__` module: `import campaigns.runs` depends on campaigns/runs/__init__.py.
  The parent packages Python initialises on the way (`a`, `a.b`) are not counted as edges,
  or every package whose `__init__` re-exports its submodules would be a cycle.
- tests/, benchmarks/ and migrations are not part of the graph: they may import anything.

Known exceptions are named below, one entry each, with the reason; an entry that no
longer matches anything fails its test, so that it is deleted rather than left to hide
the next violation.
"""

from __future__ import annotations

import ast
import itertools
import sys
from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("storageops", "campaigns", "collectors", "alerts", "devsite")
NOT_PARSED = {"migrations", "tests", "benchmarks", "__pycache__"}
# The apps from the bottom floor up: an app imports its own modules and those of the apps below
# it, never one above. A lower app hears from a higher one through a registry or a signal it
# owns (storageops.changelog, .metrics, .retention, .api.routes; collectors.references;
# campaigns.web.campaign_extras), filled in the higher app's AppConfig.ready().
APP_ORDER = ("storageops", "collectors", "campaigns", "alerts", "devsite")

# --- Known exceptions ----------------------------------------------------------------------
# (importer, imported) pairs allowed to break a direction rule.
ALLOWED_IMPORTS: dict[tuple[str, str], str] = {}
# Project modules a migration may import, because makemigrations wrote a field's validator or
# default by its dotted path (`import campaigns.models.definitions`, then
# `validators=[campaigns.models.definitions.validate_file_mix]`): the migration names the
# callable for the field's state and never runs project code itself. Anything else a migration
# needs (a data migration's logic) is copied into it and works on historical models.
MIGRATION_FIELD_REFERENCES: dict[str, str] = {
    "storageops.validators": "URL and path validators of fields in campaigns, collectors and alerts migrations",
    "storageops.sealed": "SealedTextField/SealedCharField, the class of the sealed secrets' fields (campaigns 0027, "
    "alerts 0006)",
    "campaigns.models.definitions": "validators and defaults of Campaign and Backend fields (0001, its squash)",
    "campaigns.models.schedules": "validators of CampaignSchedule fields (0001, its squash)",
    "campaigns.models.sweep_rules": "the validator of Campaign.sweep (0010)",
    "campaigns.models.engine_registry": "the choices of Campaign.engine: the registered engines (0015)",
    "campaigns.models.token_issuers": "the validator of TokenIssuer.token_endpoint (0028)",
    "collectors.models": "validators of Host fields (0001, its squash)",
    "alerts.models": "the default and validator of Subscription.kinds (0001)",
}


# --- The import graph ----------------------------------------------------------------------
@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int
    statement: str

    def __str__(self) -> str:
        path = _modules()[self.importer].relative_to(ROOT)
        return f"{path}:{self.line}: {self.statement}  ({self.importer} -> {self.imported})"


def _within(module: str, *packages: str) -> bool:
    return any(module == package or module.startswith(package + ".") for package in packages)


@cache
def _modules() -> dict[str, Path]:
    """Every project module by dotted name, packages by their __init__.py."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if NOT_PARSED.intersection(parts):
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def _closest_module(name: str) -> str | None:
    """The project module a dotted name lives in (its longest prefix that is a module)."""
    parts = name.split(".")
    while parts:
        if ".".join(parts) in _modules():
            return ".".join(parts)
        parts.pop()
    return None


def _absolute(module: str, node: ast.ImportFrom) -> str:
    """The absolute module name of a `from ... import` written in `module`."""
    if not node.level:
        return node.module or ""
    package = module if _modules()[module].name == "__init__.py" else module.rpartition(".")[0]
    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _imports_of(module: str) -> tuple[list[Import], list[Import]]:
    """The project imports written in a module, and those naming a module that does not exist."""
    tree = ast.parse(_modules()[module].read_text(), filename=str(_modules()[module]))
    found, missing = [], []

    def add(name: str, wanted: str, node: ast.stmt) -> None:
        if name.split(".")[0] not in PACKAGES:
            return
        statement = ast.unparse(node)
        target = _closest_module(name)
        if target is None or (wanted and wanted not in _modules()):
            missing.append(Import(module, wanted or name, node.lineno, statement))
        if target is not None:
            found.append(Import(module, target, node.lineno, statement))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, alias.name, node)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, node)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in _modules():
                    add(submodule, submodule, node)
                else:
                    add(base, base, node)
    # One edge per statement and target, however many names the statement imports.
    return list(dict.fromkeys(found)), list(dict.fromkeys(missing))


@cache
def _graph() -> tuple[tuple[Import, ...], tuple[Import, ...]]:
    found, missing = [], []
    for module in _modules():
        module_found, module_missing = _imports_of(module)
        found += module_found
        missing += module_missing
    return tuple(found), tuple(missing)


def _edges() -> dict[str, dict[str, Import]]:
    """importer -> imported -> the first statement that makes the edge."""
    edges: dict[str, dict[str, Import]] = defaultdict(dict)
    for imp in _graph()[0]:
        edges[imp.importer].setdefault(imp.imported, imp)
    return edges


def _strongly_connected(edges: dict[str, dict[str, Import]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative: the groups of modules that import each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups = []
    for start in sorted(set(edges).union(*edges.values())):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, {}))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, {})))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1 or node in edges.get(node, {}):
                    groups.append(sorted(group))
    return groups


def _shortest_cycle(group: list[str], edges: dict[str, dict[str, Import]]) -> list[str]:
    """A shortest cycle through the first module of a group: [a, b, c, a]."""
    start, members = group[0], set(group)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(edges.get(node, {})):
                if child not in members:
                    continue
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no cycle through {start} in {group}")


def _direction_violations(importers: tuple[str, ...], is_forbidden) -> list[Import]:
    """`is_forbidden(importer, imported)` says whether an import breaks the rule."""
    return [
        imp
        for imp in _graph()[0]
        if _within(imp.importer, *importers)
        and is_forbidden(imp.importer, imp.imported)
        and imp.importer != imp.imported
    ]


def _check_direction(rule: str, importers: tuple[str, ...], is_forbidden) -> None:
    violations = _direction_violations(importers, is_forbidden)
    allowed = {key for key in ALLOWED_IMPORTS if any((v.importer, v.imported) == key for v in violations)}
    unexpected = [v for v in violations if (v.importer, v.imported) not in ALLOWED_IMPORTS]
    if unexpected:
        pytest.fail(f"{rule}; these imports break it:\n" + "\n".join(f"  {v}" for v in unexpected), pytrace=False)
    stale = {
        key for key in ALLOWED_IMPORTS if _within(key[0], *importers) and is_forbidden(*key) and key not in allowed
    }
    if stale:
        pytest.fail(
            f"{rule}; these ALLOWED_IMPORTS entries no longer happen, delete them: {sorted(stale)}", pytrace=False
        )


# --- The tests -----------------------------------------------------------------------------
def test_the_parser_sees_the_project():
    # Guards the other tests against passing on an empty or half-read graph.
    modules = _modules()
    assert {"campaigns.runs.lifecycle", "campaigns.models", "campaigns.tasks", "storageops.settings"} <= set(modules)
    assert not any("migrations" in name for name in modules)
    assert any(imp.importer == "campaigns.tasks" and imp.imported == "campaigns.runs" for imp in _graph()[0])


def test_the_cycle_finder_spells_out_a_cycle():
    # Guards the cycle test against passing because it cannot see one.
    edges = {"a": {"b": None}, "b": {"c": None, "d": None}, "c": {"a": None}, "d": {}, "e": {"e": None}}
    assert _strongly_connected(edges) == [["a", "b", "c"], ["e"]]
    assert _shortest_cycle(["a", "b", "c"], edges) == ["a", "b", "c", "a"]
    assert _shortest_cycle(["e"], edges) == ["e", "e"]


def test_every_project_import_names_a_module_that_exists():
    # A lazy import of a moved module (storageops.xrootd_server -> devsite.xrootd_server)
    # fails only when its function runs; here it fails at once.
    missing = _graph()[1]
    if missing:
        pytest.fail(
            "imports of project modules that do not exist:\n" + "\n".join(f"  {m}" for m in missing), pytrace=False
        )


def test_the_import_graph_has_no_cycle():
    edges = _edges()
    report = []
    for group in _strongly_connected(edges):
        cycle = _shortest_cycle(group, edges)
        report.append(" -> ".join(cycle))
        report += [f"    {edges[a][b]}" for a, b in itertools.pairwise(cycle)]
        if len(group) > len(cycle) - 1:
            report.append(f"    (the cycle is part of a knot of {len(group)} modules: {', '.join(group)})")
    if report:
        pytest.fail("import cycles (a lazy import inside a function counts too):\n" + "\n".join(report), pytrace=False)


def test_production_code_never_imports_devsite():
    # A production deployment leaves devsite out (STORAGEOPS_DEVSITE=false, and it need not
    # be shipped); tests and benchmarks may use it.
    _check_direction(
        "storageops/, campaigns/ and collectors/ must not import devsite (development tooling only)",
        ("storageops", "campaigns", "collectors"),
        lambda _, imported: _within(imported, "devsite"),
    )


def test_results_never_import_runs_web_api_or_tasks():
    _check_direction(
        "campaigns/results/ reads what runs recorded; it must not import campaigns.runs, .web, .api or .tasks",
        ("campaigns.results",),
        lambda _, imported: _within(imported, "campaigns.runs", "campaigns.web", "campaigns.api", "campaigns.tasks"),
    )


def test_runs_never_import_web_api_or_tasks():
    _check_direction(
        "campaigns/runs/ is called by the pages, the API and the tasks; it must not import campaigns.web, .api, .tasks",
        ("campaigns.runs",),
        lambda _, imported: _within(imported, "campaigns.web", "campaigns.api", "campaigns.tasks"),
    )


# A storage library is imported by its own package alone; everything else reaches it through
# campaigns.runs.storage (the Storage interface) or the engine registry.
LIBRARY_PACKAGES = {"gfal2": "campaigns.runs.engines.gfal2", "XRootD": "campaigns.runs.engines.xrootd"}


def test_storage_libraries_are_imported_by_their_own_package_only():
    _check_direction(
        "only campaigns/runs/engines/<name>/ imports its own package: others go through campaigns.runs.storage "
        "or the engine registry (campaigns.apps names the modules to load)",
        PACKAGES,
        lambda importer, imported: any(
            _within(imported, package) and not _within(importer, package) for package in LIBRARY_PACKAGES.values()
        ),
    )
    outside = [
        f"{_modules()[module].relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}"
        for module, node in _third_party_imports()
        for library, package in LIBRARY_PACKAGES.items()
        if _imported_names(node) & {library} and not _within(module, package)
    ]
    assert not outside, "a storage library imported outside its engine's package:\n" + "\n".join(outside)


def _third_party_imports() -> list[tuple[str, ast.stmt]]:
    found = []
    for module, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import | ast.ImportFrom) and not getattr(node, "level", 0):
                found.append((module, node))
    return found


def _imported_names(node: ast.stmt) -> set[str]:
    """The top-level names an import statement loads (`import a.b` and `from a.b import c`: a)."""
    if isinstance(node, ast.ImportFrom):
        return {(node.module or "").split(".")[0]}
    return {alias.name.split(".")[0] for alias in node.names}


def test_models_import_only_models_and_choices_of_campaigns():
    _check_direction(
        "campaigns/models/ is the bottom room; of campaigns it may import only campaigns.models and campaigns.choices",
        ("campaigns.models",),
        lambda _, imported: (
            _within(imported, "campaigns") and not _within(imported, "campaigns.models", "campaigns.choices")
        ),
    )


def _app(module: str) -> str:
    return module.split(".")[0]


def test_apps_import_only_their_own_floor_and_those_below():
    # Every import counts, inside functions and under TYPE_CHECKING too: storageops, the
    # framework floor, imports no app at all.
    _check_direction(
        "the apps depend one way, " + " <- ".join(APP_ORDER) + "; a lower app hears from a higher one through a"
        " registry or signal it owns, filled in the higher app's AppConfig.ready()",
        PACKAGES,
        _points_up,
    )


@cache
def _task_names() -> dict[str, str]:
    """Every Celery task the project declares, by name, with the app that declares it."""
    names = {}
    for module, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "shared_task":
                for keyword in node.keywords:
                    if keyword.arg == "name" and isinstance(keyword.value, ast.Constant):
                        names[keyword.value.value] = module.split(".")[0]
    return names


# Modules that compose the project and so name every app: the URLconf includes each app's URLs,
# the settings route each task to its queue.
COMPOSITION = ("storageops.settings", "storageops.urls")


def _upward_task_names(modules: dict[str, Path], tasks: dict[str, str]) -> list[str]:
    """String constants of a lower app's code that name a higher app's Celery task ("alerts.x"):
    an upward dependency no import shows (the task sent by name)."""
    found = []
    for name, path in modules.items():
        floor = APP_ORDER.index(name.split(".")[0])
        for node in ast.walk(ast.parse(path.read_text())):
            named = isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in tasks
            if named and APP_ORDER.index(tasks[node.value]) > floor:
                found.append(f"{name}: {node.value!r}")
    return found


def test_lower_apps_name_no_task_of_a_higher_app():
    """A lower app that sends a higher app's task by name depends on it as surely as an import:
    it tells a moment (storageops.alerting) or a registry (storageops.schedules, storageops.beat)
    that the higher app fills in its ready()."""
    modules = {n: p for n, p in _modules().items() if n.split(".")[0] != "devsite" and n not in COMPOSITION}
    assert len(_task_names()) >= 10
    assert _upward_task_names(modules, _task_names()) == []


def test_the_task_name_rule_sees_one(tmp_path):
    sneaky = tmp_path / "loop.py"
    sneaky.write_text('send("alerts.run_stalled", 1)\n')
    found = _upward_task_names({"campaigns.runs.loop": sneaky}, {"alerts.run_stalled": "alerts"})
    assert found == ["campaigns.runs.loop: 'alerts.run_stalled'"]


def test_the_app_rule_sees_an_upward_import():
    # Guards the app test against passing because it cannot see a violation.
    assert _points_up("storageops.metrics", "campaigns.models")
    assert _points_up("collectors.forms", "campaigns.models")
    assert _points_up("campaigns.web.views", "alerts.models")
    assert not _points_up("campaigns.metrics", "storageops.metrics")
    assert not _points_up("devsite.site", "alerts.models")


def _points_up(importer: str, imported: str) -> bool:
    return APP_ORDER.index(_app(imported)) > APP_ORDER.index(_app(importer))


# --- Migrations ----------------------------------------------------------------------------
def _migration_files() -> list[Path]:
    # Every app's migrations, an app nested in another's package too (the FTS engine's app).
    return sorted(path for package in PACKAGES for path in (ROOT / package).rglob("migrations/[0-9]*.py"))


def _migration_problems(path: Path, root: Path = ROOT) -> list[str]:
    """What in a migration imports or runs live project code."""
    tree = ast.parse(path.read_text(), filename=str(path))
    where = path.relative_to(root)
    problems = []
    stdlib = sys.stdlib_module_names | {"__future__"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [("." * node.level) + (node.module or "")]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top == "django" or top in stdlib:
                continue
            statement = ast.unparse(node)
            if isinstance(node, ast.Import) and name in MIGRATION_FIELD_REFERENCES and node in tree.body:
                continue
            problems.append(f"  {where}:{node.lineno}: {statement}")
    # A field reference module may be named in the operations, never called by a function.
    for function in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Lambda))):
        for name in ast.walk(function):
            if isinstance(name, ast.Name) and name.id in PACKAGES:
                problems.append(f"  {where}:{name.lineno}: a function uses {name.id} (live project code)")
    return problems


def test_migrations_import_no_live_project_code():
    # A migration is applied once and must do the same forever: code it imports from the
    # project changes under it (campaigns 0013 once called campaigns.models.buckets).
    files = _migration_files()
    assert len(files) > 20, files  # guards against a glob that finds nothing
    problems = [problem for path in files for problem in _migration_problems(path)]
    if problems:
        pytest.fail("migrations importing live project code:\n" + "\n".join(problems), pytrace=False)


def test_the_migration_check_sees_live_code(tmp_path):
    # Guards the migration test against passing because it cannot see a violation.
    sample = tmp_path / "0001_sample.py"
    sample.write_text(
        "import re\nfrom django.db import migrations\nimport storageops.validators\n"
        "def run(apps, schema_editor):\n    from campaigns.models import buckets\n    campaigns.x()\n"
    )
    problems = _migration_problems(sample, tmp_path)
    assert len(problems) == 2, problems
