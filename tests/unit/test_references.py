"""The map stays true: every file path and dotted name cited in the packages' comments and
docstrings (their Lua's comments too), in ``pyproject.toml``'s comments and in the README and
``docs/`` resolves: the file exists, the module imports, the attribute is there.

A module that moves leaves its old name behind in prose that no import checks; this test reads
the prose. A citation that no longer resolves fails with its file and line.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import importlib.util
import inspect
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("kue_core", "kue_http", "kue_rules", "kue_cli", "kue_example")
# What a path may start with: the repository's folders, and kue_core's parts, which the code
# names without the ``kue_core/`` in front (``store/transport.py``, ``scripts/lib/keys.lua``).
FOLDERS = (
    *PACKAGES,
    *(p.name for p in (ROOT / "kue_core").iterdir() if p.is_dir() and p.name[0] != "_"),
    *("lib", ".ci", "docs", "tests", "bench", "deploy", "static", "templates"),
)
STARTS = "|".join(re.escape(f) for f in sorted(set(FOLDERS)))
PATH = re.compile(rf"(?<![\w./~-])((?:{STARTS})/[\w./*-]*)")
# In the code's prose, any relative path to a file (the docs name the reader's files too).
ANY_PATH = re.compile(r"(?<![\w./~:-])(\w[\w.-]*/[\w./-]*\.\w+)(?![\w/])")
# A bare file name of the project's own kinds (``complete.lua``, ``lua_source.py``).
BARE = re.compile(
    r"(?<![\w./~-])([A-Za-z_][\w-]*\.(?:py|lua|js|css|html|json|md|toml|txt))(?![\w/])"
)
DOTTED = re.compile(rf"(?<![\w./:-])((?:{'|'.join(PACKAGES)})(?:\.[A-Za-z_]\w*)+)(?![\w/])")
ROLE = re.compile(r":(?:mod|class|func|meth|attr|data|exc|obj):`~?([\w.]+)`")
# A path names a file (``.py``), a folder (``store/calls/``) or several (``*.lua``); not
# ``jobs/s``. What the docs' build writes is not in the repository.
FILE = re.compile(r"(\.\w+|/|\*)$")
BUILT = ("docs/_build",)
# Names that the changelog cites as gone on purpose: (page, name).
FORMER = {
    # Loggers renamed after their modules.
    ("docs/changelog.md", "kue_core.signals"),
    ("docs/changelog.md", "kue_core.control"),
    ("docs/changelog.md", "kue_core.events"),
}
# Where a path without its package in front may live.
BASES = (ROOT, ROOT / "kue_core", ROOT / "kue_core" / "scripts")


def sources() -> Iterator[tuple[Path, str]]:
    """Every file read, with the module it is (``""`` for those that are not Python)."""
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*")):
            if path.suffix == ".py" and "migrations" not in path.parts:
                parts = path.relative_to(ROOT).with_suffix("").parts
                yield path, ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            elif path.suffix == ".lua":
                yield path, ""
    yield ROOT / "pyproject.toml", ""
    yield ROOT / "README.md", ""
    for path in sorted((ROOT / "docs").glob("*.md")):
        yield path, ""


def prose(path: Path) -> Iterator[tuple[int, str]]:
    """The lines of a file that a reader takes as prose, each with its number: a Python file's
    comments and docstrings, a Lua file's comments, a TOML file's comments, all of a page."""
    text = path.read_text("utf-8")
    if path.suffix == ".md":
        yield from enumerate(text.splitlines(), 1)
    elif path.suffix == ".lua":
        for n, line in enumerate(text.splitlines(), 1):
            if "--" in line:
                yield n, line[line.index("--") :]
    elif path.suffix == ".toml":
        for n, line in enumerate(text.splitlines(), 1):
            if line.lstrip().startswith("#") or "  # " in line:
                yield n, line[line.index("#") :]
    else:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                yield token.start[0], token.string
        for node in ast.walk(ast.parse(text)):
            if isinstance(
                node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
            ) and (doc := ast.get_docstring(node, clean=False)):
                first = node.body[0].lineno
                for i, line in enumerate(doc.splitlines()):
                    yield first + i, line


def citations() -> Iterator[tuple[str, str, str, str]]:
    """(where, kind, what, module) for every citation: kind is ``path`` or ``name``."""
    for path, module in sources():
        where = path.relative_to(ROOT)
        for n, line in prose(path):
            found = {m.group(1).rstrip(".,;:") for m in PATH.finditer(line)}
            if path.suffix != ".md":
                found |= {m.group(1).rstrip(".,;:") for m in ANY_PATH.finditer(line)}
            for cited in found:
                if FILE.search(cited) and not cited.startswith(BUILT):
                    yield f"{where}:{n}", "path", cited, str(where)
            for m in BARE.finditer(line if path.suffix != ".md" else ""):
                # (A page's bare names are the reader's files: ``tasks.py``.)
                yield f"{where}:{n}", "path", m.group(1), str(where)
            roles = {m.group(1) for m in ROLE.finditer(line)}
            for name in roles:
                yield f"{where}:{n}", "name", name, module
            for m in DOTTED.finditer(line):
                if m.group(1) not in roles:
                    yield f"{where}:{n}", "name", m.group(1), module


def files() -> set[str]:
    return {
        str(p.relative_to(ROOT))
        for p in ROOT.rglob("*")
        if not ({".git", ".venv", "node_modules", "__pycache__"} & set(p.parts))
    }


def path_exists(cited: str, citing: str, known: set[str]) -> bool:
    if "/" not in cited:
        # A bare name: some file of the repository's has it.
        return any(k == cited or k.endswith("/" + cited) for k in known)
    cited = cited.rstrip("/")
    bases = [*BASES, (ROOT / citing).parent, ROOT / Path(citing).parts[0]]
    for base in bases:
        if "*" in cited:
            if any(base.glob(cited)):
                return True
        elif (base / cited).exists():
            return True
    return False


def attribute(owner: object, name: str) -> object:
    """``getattr``, also finding what instances of a class have: an annotated field, or a
    ``self.name =`` in its source."""
    try:
        return getattr(owner, name)
    except AttributeError:
        if not isinstance(owner, type):
            raise
    for cls in owner.__mro__:
        if name in getattr(cls, "__annotations__", {}) or name in getattr(cls, "__slots__", ()):
            return name
        if name in _assigned(cls):
            return name
    raise AttributeError(name)


@functools.cache
def _assigned(cls: type) -> frozenset[str]:
    """The names a class's source assigns as ``self.name = ...`` (read once a class: reading
    a class's source parses its whole module)."""
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return frozenset()
    return frozenset(re.findall(r"\bself\.(\w+)\b\s*(?::[^=\n]*)?=", source))


def lookup(dotted: str) -> object:
    """What a full dotted name stands for: the longest prefix that imports, then attributes."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        name = ".".join(parts[:i])
        try:
            found: object = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name is None or name.startswith(e.name):
                continue  # no such module: a shorter prefix, then attributes
            if e.name.split(".")[0] in PACKAGES or importlib.util.find_spec(name) is None:
                raise  # the module exists but imports something of ours that is missing
            # It needs an optional dependency not installed here (the FastAPI or Django
            # recipes in the minimum versions' run): it is there, and so is a name it defines.
            return _defined(name, parts[i:])
        except Exception:
            # A module that runs only in its place (a Django project's settings): it is there.
            if i == len(parts) and importlib.util.find_spec(name) is not None:
                return name
            raise ImportError(name) from None
        for part in parts[i:]:
            found = attribute(found, part)
        return found
    raise ModuleNotFoundError(dotted)


def _defined(module: str, names: list[str]) -> object:
    """A module that cannot be imported here, read as text: the module itself, or the first
    of ``names`` that its source defines (a function, a class or an assignment)."""
    if not names:
        return module
    spec = importlib.util.find_spec(module)
    origin = spec.origin if spec is not None else None
    source = Path(origin).read_text("utf-8") if origin else ""
    if re.search(rf"^(?:async def|def|class) {names[0]}\b|^{names[0]}\s*[:=]", source, re.M):
        return module + "." + ".".join(names)
    raise AttributeError(names[0])


def resolves(name: str, module: str) -> bool:
    """Whether a cited name stands for something, read as Sphinx does: a full name, a name
    relative to the citing module (``.ops``), or a name the citing module can see (its own
    and imported names, its classes' attributes, its package's modules)."""
    candidates = []
    if name.startswith("."):
        # ``.x`` is a sibling of the citing module (a.b.c cites a.b.x), or, cited from a
        # package's ``__init__``, one of its modules.
        level = len(name) - len(name.lstrip("."))
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.submodule_search_locations is not None:
            level -= 1
        package = module.rsplit(".", level)[0] if level else module
        candidates.append(f"{package}.{name.lstrip('.')}")
    elif name.split(".")[0] in PACKAGES or not module:
        candidates.append(name)
    else:
        parts = module.split(".")
        candidates += [f"{module}.{name}"]
        candidates += [f"{'.'.join(parts[:i])}.{name}" for i in range(len(parts) - 1, 0, -1)]
    for candidate in candidates:
        try:
            lookup(candidate)
            return True
        except (ImportError, AttributeError):
            pass
    if module and not name.startswith("."):
        # An attribute of one of the module's classes (``:meth:`close``` in its docstring), or
        # a name it imported from elsewhere, or a module of the standard library's or a
        # dependency's (``redis.Redis``).
        try:
            mod: ModuleType = importlib.import_module(module)
        except Exception:
            return False
        first, *rest = name.split(".")
        owners: list[object] = [mod, builtins]
        owners += [v for v in vars(mod).values() if isinstance(v, type)]
        for owner in owners:
            try:
                found = attribute(owner, first)
                for part in rest:
                    found = attribute(found, part)
                return True
            except AttributeError:
                pass
        try:
            lookup(name)
            return True
        except (ImportError, AttributeError):
            pass
    return False


@functools.cache
def cited() -> list[tuple[str, str, str, str]]:
    return sorted(set(citations()))


def test_the_reader_finds_citations() -> None:
    """The patterns still match: the test would otherwise pass by reading nothing."""
    kinds = {(kind, what) for _, kind, what, _ in cited()}
    assert ("name", "kue_core.jobs.ops") in kinds
    assert ("path", "base/keys.py") in kinds
    assert len(cited()) > 500
    # And a stale citation does not resolve.
    assert not resolves("kue_core.store.nowhere", "")
    assert not resolves("Queue.nothing", "kue_core.queue")
    assert resolves("Queue.save_many", "kue_core.queue")
    assert not path_exists("kue_core/nowhere.py", "pyproject.toml", files())


def test_every_cited_path_exists() -> None:
    known = files()
    stale = [
        f"{where}: {what}"
        for where, kind, what, citing in cited()
        if kind == "path" and not path_exists(what, citing, known)
    ]
    assert stale == [], "cited files that are not in the repository:\n" + "\n".join(stale)


@pytest.mark.filterwarnings("ignore")
# Imports every module cited: a few seconds alone, longer under coverage on a loaded CI.
@pytest.mark.timeout(300)
def test_every_cited_name_resolves() -> None:
    stale = [
        f"{where}: {what}"
        for where, kind, what, module in cited()
        if kind == "name"
        and (where.split(":")[0], what) not in FORMER
        and not resolves(what, module)
    ]
    assert stale == [], "cited names that do not resolve:\n" + "\n".join(stale)


def test_loggers_are_named_after_their_modules() -> None:
    """Every module logs under its own name (``logging.getLogger(__name__)``), so that a level
    set on a package (``kue_core.worker``, ``kue_rules``: docs/troubleshooting.md) covers its
    modules. Only the CLI, the edge that configures logging, names a logger otherwise: a
    package of ours (or werkzeug), to set its level."""
    named, stray = [], []
    for path, module in sources():
        if path.suffix != ".py":
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if not (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", getattr(node.func, "id", None)) == "getLogger"
                and node.args
            ):
                continue
            arg = node.args[0]
            if isinstance(arg, ast.Name) and arg.id == "__name__":
                named.append(module)
            elif not (
                module.startswith("kue_cli.")
                and isinstance(arg, ast.Constant)
                and (arg.value == "werkzeug" or _is_package(arg.value))
            ):
                stray.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert stray == [], "loggers named otherwise than by __name__:\n" + "\n".join(stray)
    assert "kue_core.worker.serving" in named and "kue_rules.watcher" in named


def _is_package(name: object) -> bool:
    if not isinstance(name, str) or name.split(".")[0] not in PACKAGES:
        return False
    spec = importlib.util.find_spec(name)
    return spec is not None and spec.submodule_search_locations is not None
