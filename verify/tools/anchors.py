"""Where a named declaration sits in an engine's sources, so that a fault (docs/faults.md) is
anchored to the function that holds its text, not to a file.

A name is a top-level declaration of a module (a function, class, constant, type, interface),
or "Outer.inner": a method of a class, or a function or constant declared inside a top-level
function. Its text runs from its first line (a Python decorator included) to its last, whole
lines. The reference is read with `ast`; the port with a small TypeScript scanner that knows
comments, strings, template literals and regular expressions, so that brackets inside them do
not count: a top-level declaration runs to the next line that starts at column 0 outside every
bracket, an inner one to the next line at its own depth and indentation (or its outer's end).

locate(root, tree, name, find) -> Span of the one declaration of `name` in the tree (a directory
of the root, e.g. "port_ts/src") whose text holds `find` exactly once, whatever the whitespace
between its tokens and the names of its renamed locals (occurrences()), or AnchorError saying
what to update. A name declared in several modules (EPS: layer norm's and Adam's) is told apart
by the text.
"""

import ast
import functools
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

SUFFIXES = (".py", ".ts")


class AnchorError(ValueError):
    """The anchor does not resolve: the message says why and what to update."""


@dataclass(frozen=True)
class Span:
    file: str   # relative to the root, "/"-separated
    name: str
    start: int  # character offsets of the declaration's text in the file
    end: int


@functools.lru_cache(maxsize=256)
def _line_starts(text):
    return [0] + [m.end() for m in re.finditer("\n", text)]


# ---- Python ------------------------------------------------------------------------------------

def _py_names(node):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    names = []
    for t in targets:
        names += [n.id for n in ast.walk(t) if isinstance(n, ast.Name)]
    return names


def _py_extent(node, starts, text):
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    end = starts[node.end_lineno] if node.end_lineno < len(starts) else len(text)
    return starts[first - 1], end


@functools.lru_cache(maxsize=256)
def _py_tree(text):
    return ast.parse(text)


def python_declarations(text, name):
    """[(start, end)] of every declaration of `name` ("top" or "Top.inner") in a module's text."""
    top, _, inner = name.partition(".")
    tree = _py_tree(text)
    starts = _line_starts(text)
    found = []
    for node in tree.body:
        if top not in _py_names(node):
            continue
        if not inner:
            found.append(_py_extent(node, starts, text))
            continue
        for sub in ast.walk(node):
            if sub is not node and isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign,
                                                    ast.AnnAssign)) and inner in _py_names(sub):
                found.append(_py_extent(sub, starts, text))
    return found


# ---- TypeScript --------------------------------------------------------------------------------

_REGEX_AFTER = set("(,=:[!&|?{};+-*%<>~^") | {""}
_REGEX_KEYWORDS = {"return", "typeof", "case", "do", "else", "in", "of", "new", "delete", "void", "throw"}


_CODE_STOP = re.compile(r"""[\n'"`/()\[\]{}]""")
_STOPS = {"'": re.compile(r"[\n'\\]"), '"': re.compile(r'[\n"\\]'), "`": re.compile(r"[\n`\\]|\$\{"),
          "regex": re.compile(r"[\n/\\\[]"), "regex-class": re.compile(r"[\n\]\\]")}
_WORD_BEFORE = re.compile(r"([\w$]+)\s*$")


def _regex_may_start(text, i):
    """Does a "/" at offset i start a regular expression (not a division)? By what precedes it."""
    j = i - 1
    while j >= 0 and text[j] in " \t\r\n":
        j -= 1
    if j < 0 or text[j] in _REGEX_AFTER:
        return True
    word = _WORD_BEFORE.search(text, max(0, j - 20), j + 1)
    return bool(word) and word.group(1) in _REGEX_KEYWORDS


@functools.lru_cache(maxsize=256)
def ts_lines(text):
    """Per line: (depth at its start, True when it starts in code) — code meaning outside every
    comment, string and template literal. Raises AnchorError when the text ends unbalanced.
    (Remembered per text: a catalogue asks about the same modules many times.)"""
    info = [(0, True)]
    stack = []  # "{" "(" "[" or "${" (a template literal's expression)
    mode = "code"  # code, line, block, ', ", `, regex, regex-class
    i, n = 0, len(text)

    def newline():
        info.append((len(stack), mode == "code"))

    while i < n:
        if mode == "line":
            j = text.find("\n", i)
            if j < 0:
                break
            mode, i = "code", j + 1
            newline()
            continue
        if mode == "block":
            j = text.find("*/", i)
            if j < 0:
                info.extend([(len(stack), False)] * text.count("\n", i))
                i = n
                break
            info.extend([(len(stack), False)] * text.count("\n", i, j))
            mode, i = "code", j + 2
            continue
        m = (_CODE_STOP if mode == "code" else _STOPS[mode]).search(text, i)
        if m is None:
            break
        i, c = m.start(), m.group()
        if c == "\n":
            i += 1
            newline()
            continue
        if mode == "code":
            if text.startswith("//", i):
                mode, i = "line", i + 2
            elif text.startswith("/*", i):
                mode, i = "block", i + 2
            elif c in "'\"`":
                mode, i = c, i + 1
            elif c == "/":
                mode, i = ("regex" if _regex_may_start(text, i) else "code"), i + 1
            elif c in "([{":
                stack.append(c)
                i += 1
            else:  # ) ] }
                if not stack:
                    raise AnchorError(f"unbalanced {c!r} at offset {i}")
                if stack.pop() == "${":
                    mode = "`"
                i += 1
        elif c == "\\":
            i += 1 if text.startswith("\n", i + 1) else 2  # a line continuation: the newline counts
        elif mode in ("'", '"', "`") and c == mode:
            mode, i = "code", i + 1
        elif c == "${":
            stack.append("${")
            mode, i = "code", i + 2
        elif mode == "regex":
            mode, i = ("regex-class" if c == "[" else "code"), i + 1
        else:  # the end of a regex's character class
            mode, i = "regex", i + 1
    if stack or mode not in ("code", "line"):
        raise AnchorError(f"the text ends inside {stack[-1] if stack else mode!r}")
    return tuple(info)


def _is_boundary(line, depth, in_code, at_depth, indent):
    """Does this line end a declaration at depth `at_depth` indented `indent`?"""
    stripped = line.lstrip()
    if not in_code or not stripped or stripped.startswith(("//", "/*", "*")):
        return False
    return depth <= at_depth and len(line) - len(stripped) <= indent


_TS_DECL = r"^(?P<indent>\s*)(?:(?:export|default|declare|async|static|private|public|protected|readonly|get|set|" \
           r"abstract|override)\s+)*(?:(?:function\*?|class|interface|type|enum|const|let|var)\s+)?{name}\b\s*[(<:=!?{{]"


def ts_declarations(text, name):
    """[(start, end)] of every declaration of `name` ("top" or "Top.inner") in a module's text."""
    lines = text.split("\n")
    info = ts_lines(text)
    starts = _line_starts(text)

    def extent(k, at_depth):
        indent = len(lines[k]) - len(lines[k].lstrip())
        j = k + 1
        while j < len(lines) and not _is_boundary(lines[j], info[j][0], info[j][1], at_depth, indent):
            j += 1
        while j - 1 > k and (not lines[j - 1].strip() or lines[j - 1].lstrip().startswith(("//", "/*", "*"))):
            j -= 1  # trailing blank lines and comments belong to what follows
        return k, j

    def headers(pattern, at_depth, lo, hi):
        rx = re.compile(pattern)
        return [k for k in range(lo, hi) if info[k][0] == at_depth and info[k][1] and rx.match(lines[k])
                and (at_depth > 0 or not lines[k][:1].isspace())]

    def offsets(k, j):
        return starts[k], (starts[j] if j < len(starts) else len(text))

    top, _, inner = name.partition(".")
    top_rx = _TS_DECL.format(name=re.escape(top)).replace(r"^(?P<indent>\s*)", "^")
    found = []
    for k in headers(top_rx, 0, 0, len(lines)):
        k, j = extent(k, 0)
        if not inner:
            found.append(offsets(k, j))
            continue
        for m in headers(_TS_DECL.format(name=re.escape(inner)), 1, k + 1, j):
            found.append(offsets(*extent(m, 1)))
    return found


# ---- both --------------------------------------------------------------------------------------

def declarations(path, text, name):
    if name.partition(".")[0] not in text:
        return []  # the name does not occur at all: nothing to parse
    if str(path).endswith(".py"):
        return python_declarations(text, name)
    return ts_declarations(text, name)


def sources(root, tree):
    """The engine's source files under root/tree, relative to root, sorted."""
    base = Path(root) / tree
    return sorted(p.relative_to(root).as_posix() for p in base.rglob("*")
                  if p.suffix in SUFFIXES and "__pycache__" not in p.parts and "node_modules" not in p.parts)


def _tokens(find):
    tokens = re.findall(r"\w+|\S", find)
    if not tokens:
        raise AnchorError("its 'find' text is empty; give the expression the fault changes")
    return tokens


def find_pattern(find, renamable=()):
    """`find` as a pattern that any layout of its tokens matches: whitespace and line breaks may
    come and go between tokens (one at least between two words), so a reformatting keeps a fault.
    Each name of `renamable` matches any one name (group v0, v1, ... in their order), the same
    name at each of its occurrences."""
    tokens, groups = _tokens(find), {}
    pattern = r"(?<!\w)" if re.match(r"\w", tokens[0]) else ""
    for n, token in enumerate(tokens):
        if n:
            words = re.match(r"\w", tokens[n - 1][-1]) and re.match(r"\w", token[0])
            pattern += r"\s+" if words else r"\s*"
        if token in renamable and token in groups:
            pattern += f"(?P=v{groups[token]})"
        elif token in renamable:
            groups[token] = len(groups)
            pattern += f"(?P<v{groups[token]}>[A-Za-z_]\\w*)"
        else:
            pattern += re.escape(token)
    return re.compile(pattern + (r"(?!\w)" if re.match(r"\w", tokens[-1]) else ""))


@dataclass(frozen=True)
class Found:
    start: int
    end: int
    renamed: dict  # a name of `find` -> the name the text uses in its place (a renamed local)


_TS_KEYWORDS = {"const", "let", "var", "for", "if", "while", "return", "new", "typeof", "of", "in", "function",
                "await", "async", "true", "false", "null", "undefined", "this", "readonly"}


def bound_names(path, declaration):
    """The names a declaration binds: its parameters and local variables (Python by ast; a
    TypeScript declaration by what follows const, let, var and what a parameter list holds)."""
    if str(path).endswith(".py"):
        try:
            tree = ast.parse(textwrap.dedent(declaration))
        except SyntaxError:
            return set()
        return ({n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
                | {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)})
    names = set(re.findall(r"\b(?:const|let|var)\s+([A-Za-z_$][\w$]*)", declaration))
    lists = re.findall(r"\b(?:const|let|var)\s*[{\[]([^}\]]*)[}\]]", declaration)
    lists += re.findall(r"\(([^()]*)\)\s*(?::[^=;{]+)?(?:=>|\{)", declaration)
    for items in lists:
        names |= {m for m in re.findall(r"(?:^|,)\s*(?:\.\.\.)?([A-Za-z_$][\w$]*)", items)}
    return names - _TS_KEYWORDS


def occurrences(find, text, start=0, end=None, path=""):
    """Where `find` occurs in text[start:end] (a declaration of the file at `path`): whatever the
    whitespace between its tokens; and, when it does not occur as written, with the names it
    uses that the declaration no longer has (renamed locals) matched, each one to one name the
    declaration binds, two never to the same one."""
    end = len(text) if end is None else end
    found = [Found(m.start(), m.end(), {}) for m in find_pattern(find).finditer(text, start, end)]
    if found:
        return found
    present = set(re.findall(r"\w+", text[start:end]))
    gone = [t for t in dict.fromkeys(_tokens(find)) if re.fullmatch(r"[A-Za-z_]\w*", t) and t not in present]
    if not gone or len(gone) == len(set(_tokens(find))):
        return []  # nothing renamed, or nothing left to anchor the names to
    bound, kept = bound_names(path, text[start:end]), set(_tokens(find)) - set(gone)
    for m in find_pattern(find, gone).finditer(text, start, end):
        renamed = {name: m.group(f"v{n}") for n, name in enumerate(gone)}
        if len(set(renamed.values())) == len(renamed) and set(renamed.values()) <= bound - kept:
            found.append(Found(m.start(), m.end(), renamed))
    return found


def renamed(text, names):
    """text with each whole name of `names` (a Found's renamed) replaced by the name it maps to."""
    if not names:
        return text
    return re.sub(r"(?<!\w)(" + "|".join(map(re.escape, names)) + r")(?!\w)", lambda m: names[m.group()], text)


def locate(root, tree, name, find):
    """The Span of the one declaration of `name` under root/tree that holds `find` exactly once
    (whatever the whitespace between its tokens)."""
    if not re.fullmatch(r"[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)?", name or ""):
        raise AnchorError(f"'within' must name a declaration, as fn, CONSTANT or Class.method, got {name!r}")
    hits, declared = [], []
    for rel in sources(root, tree):
        text = (Path(root) / rel).read_text(encoding="utf-8")
        try:
            spans = declarations(rel, text, name)
        except (SyntaxError, AnchorError) as exc:
            raise AnchorError(f"cannot read {rel} to find {name} ({exc})") from None
        for start, end in spans:
            declared.append(rel)
            count = len(occurrences(find, text, start, end, rel))
            if count:
                hits.append((rel, start, end, count))
    if not declared:
        raise AnchorError(f"no module of {tree}/ declares {name}; set 'within' to the function that holds the "
                          "text today")
    if not hits:
        raise AnchorError(f"its 'find' text occurs 0 times in {name} ({', '.join(sorted(set(declared)))}); "
                          "update 'find' (or 'within') to today's sources")
    if len(hits) > 1:
        raise AnchorError(f"{name} holding its 'find' text is declared in {', '.join(h[0] for h in hits)}; "
                          "make 'find' longer so that one declaration alone holds it")
    rel, start, end, count = hits[0]
    if count != 1:
        raise AnchorError(f"its 'find' text occurs {count} times in {name} ({rel}); make it longer so that it "
                          "occurs exactly once")
    return Span(rel, name, start, end)
