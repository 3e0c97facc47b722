#!/usr/bin/env python3
"""The house rules of rnncore (docs/design.md section 1), checked from the outside.

  citations  every citation of the design contract ("docs/design.md" followed by a section sign
             and a number, or a markdown link to design.md followed by one) names a section that
             docs/design.md has ("## n. ..." or "### n.m ..."), and a markdown link to it resolves;
             the old form (DESIGN, or DESIGN.md, followed by a section) is an error
  includes   files in tools/, examples/ and python/ include public headers (include/rnncore/...), their
             own and system headers only: no src/ or simd/ header
  functions  no C/C++ function in include/, src/, simd/, tools/ or python/ is longer than 150 lines,
             counted from the first line of its signature to its closing brace
  backends   the library (include/, src/, simd/) compares a backend (`backend ==`, `backend() !=`,
             `== Backend::...`) only in src/plan.cpp, the file that chooses it (choose_backend); the
             rest goes through the chosen backend's table (src/internal/backend.hpp). Programs
             using the public API (tools/, tests/) may ask Plan::backend()

Today's exceptions are listed below (ALLOWED_*); an exception may shrink, never grow. Entries that
no longer apply are reported as notes (with --strict, as failures) so that the lists get shorter.

  python3 scripts/check_house.py [--root DIR] [--strict]   check a tree (default: this repository)
  python3 scripts/check_house.py --self-test               the positive controls: the check must
                                                           find the faults planted in tests/house_fixtures/
Exit status: 0 clean, 1 rule broken (a readable list on stdout), 2 usage error.
"""
import argparse
import os
import re
import sys

MAX_FUNCTION_LINES = 150

# Exceptions, each as path:function -> its length (it may only shrink); a function listed here is
# one to split.
ALLOWED_LONG_FUNCTIONS = {}  # none left: every function is at most 150 lines

# Exceptions to the public-headers rule, each as path:header.
ALLOWED_PRIVATE_INCLUDES = set()  # none left: tools/, examples/ and python/ include public headers only

SKIP_DIRS = {".git", "subprojects", "node_modules", "__pycache__"}
FIXTURES = os.path.join("tests", "house_fixtures")
C_EXTS = (".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx", ".inc", ".cu", ".cuh", ".hip")
TEXT_EXTS = C_EXTS + (".py", ".md", ".txt", ".build", ".sh", ".rst", ".json", ".toml", ".cfg", ".in", ".S", ".s")
FUNCTION_DIRS = ("include", "src", "simd", "tools", "python")
PUBLIC_ONLY_DIRS = ("tools", "examples", "python")
PRIVATE_PREFIXES = ("src/", "simd/", "hip/")
LIBRARY_DIRS = ("include", "src", "simd")
BACKEND_CHOOSER = "src/plan.cpp"


def walk(root, subdir="", exts=TEXT_EXTS):
    """Relative paths (with /) of the files under root/subdir with one of `exts`, sorted."""
    out = []
    top = os.path.join(root, subdir)
    for d, dirs, files in os.walk(top):
        rel_d = os.path.relpath(d, root)
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith("build")
                         and os.path.normpath(os.path.join(rel_d, x)) != FIXTURES)
        for f in sorted(files):
            if f.endswith(exts):
                out.append(os.path.normpath(os.path.join(rel_d, f)).replace(os.sep, "/"))
    return out


def read(root, rel):
    try:
        with open(os.path.join(root, rel), encoding="utf-8") as fh:
            return fh.read()
    except (UnicodeDecodeError, OSError):
        return None


# ---------------------------------------------------------------------------------------------
# (a) design citations

SECTION_RE = re.compile(r"^(?:##\s+(\d+)\.|###\s+(\d+\.\d+)\s)", re.M)
NUM = r"\d+(?:\.\d+)?"
CITE_RE = re.compile(r"design\.md(?:\]\(([^)\s]*)\))?\s*(§\s*" + NUM + r"(?:\s*[–-]\s*" + NUM + r")?"
                     r"(?:\s*,\s*§\s*" + NUM + r"(?:\s*[–-]\s*" + NUM + r")?)*)")
STALE_RE = re.compile(r"\bDESIGN(?:\.md)?\s*(?:§\s*\d|section\s+\d)")


def design_sections(root):
    text = read(root, "docs/design.md")
    if text is None:
        return None
    return {a or b for a, b in SECTION_RE.findall(text)}


def cited_sections(group):
    """'§2–3, §5' -> ['2', '3', '5'] (a range of whole sections is expanded)."""
    out = []
    for part in group.split(","):
        nums = re.findall(NUM, part)
        if len(nums) == 2 and "." not in nums[0] + nums[1] and int(nums[0]) <= int(nums[1]):
            out.extend(str(n) for n in range(int(nums[0]), int(nums[1]) + 1))
        else:
            out.extend(nums)
    return out


def check_citations(root):
    problems = []
    sections = design_sections(root)
    if sections is None:
        return ["docs/design.md: missing (the design contract; citations cannot resolve)"]
    design_path = os.path.normpath(os.path.join(root, "docs", "design.md"))
    for rel in walk(root):
        if rel == "scripts/check_house.py":
            continue
        text = read(root, rel)
        if text is None:
            continue
        for m in STALE_RE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            problems.append(f"{rel}:{line}: '{m.group(0)}' cites the old contract; cite docs/design.md §n")
        for m in CITE_RE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            link = m.group(1)
            if link is not None:
                target = os.path.normpath(os.path.join(root, os.path.dirname(rel), link.split("#")[0]))
                if target != design_path:
                    problems.append(f"{rel}:{line}: the link '{link}' does not lead to docs/design.md")
            for n in cited_sections(m.group(2)):
                if n not in sections:
                    problems.append(f"{rel}:{line}: docs/design.md has no section {n} "
                                    f"(cited as '{m.group(0).strip()}')")
    return problems


# ---------------------------------------------------------------------------------------------
# (b) private includes in tools/, examples/ and python/

INCLUDE_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"]', re.M)


def private_includes(root):
    """[(file, header, line)] of every private include in tools/, examples/ and python/."""
    found = []
    for d in PUBLIC_ONLY_DIRS:
        for rel in walk(root, d, C_EXTS):
            text = read(root, rel) or ""
            for m in INCLUDE_RE.finditer(text):
                path = m.group(1)
                # a relative include that climbs out of its folder is resolved from the root
                if path.startswith("../"):
                    path = os.path.relpath(os.path.normpath(os.path.join(os.path.dirname(rel), path))).replace(os.sep, "/")
                if path.startswith(PRIVATE_PREFIXES):
                    found.append((rel, path, text.count("\n", 0, m.start()) + 1))
    return found


def check_includes(root, allowed):
    problems, seen = [], set()
    for rel, path, line in private_includes(root):
        key = f"{rel}:{path}"
        seen.add(key)
        if key not in allowed:
            problems.append(f"{rel}:{line}: includes the private header {path} "
                            "(tools/, examples/ and python/ use include/rnncore/ only)")
    return problems, sorted(allowed - seen)


# ---------------------------------------------------------------------------------------------
# (c) long functions

def strip_code(text):
    """The text with comments, string and character literals and preprocessor lines blanked
    (newlines kept, so offsets and line numbers stay)."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if line_start and c == "#":  # a preprocessor line, with its continuations
            j = i
            while j < n and (text[j] != "\n" or text[j - 1] == "\\"):
                j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        line_start = c == "\n"
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == 'R' and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            end = text.find(")" + (m.group(1) if m else "") + '"', i)
            j = n if end < 0 or not m else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum() and i + 1 < n and text[i + 1].isalnum():
                out.append(" ")  # a digit separator (1'000)
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + c if j - i >= 2 else " " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


CONTROL = {"if", "for", "while", "switch", "catch", "return", "sizeof", "decltype", "alignas", "alignof",
           "static_assert", "noexcept", "throw", "__attribute__", "defined"}
TRAILING_WORDS = ("const", "volatile", "override", "final", "mutable", "&&", "&")


def strip_qualifiers(h):
    """The signature without what may follow its parameter list: cv and ref qualifiers, override,
    final, noexcept(...), throw(), __attribute__((...)), [[...]]."""
    while True:
        h = h.rstrip()
        for w in TRAILING_WORDS:
            if h.endswith(w) and (not w[0].isalpha() or not (h[-len(w) - 1:-len(w)].isalnum() or h[-len(w) - 1:-len(w)] == "_")):
                h = h[:-len(w)]
                break
        else:
            if h.endswith("]]"):
                k = h.rfind("[[")
                if k < 0:
                    return h
                h = h[:k]
            elif h.endswith(")"):
                k = matching_open(h, len(h) - 1)
                head = h[:k].rstrip() if k > 0 else ""
                if head.endswith("(") and head[:-1].rstrip().endswith("__attribute__"):
                    h = head[:-1].rstrip()[:-len("__attribute__")]
                elif re.search(r"\b(?:noexcept|throw)$", head):
                    h = re.sub(r"(?:noexcept|throw)$", "", head)
                else:
                    return h
            elif h.endswith("noexcept"):
                h = h[:-len("noexcept")]
            else:
                return h


CTOR_INIT_RE = re.compile(r"\)\s*(?:noexcept\s*)?:(?!:)")


def matching_open(s, close):
    """Index of the '(' matching the ')' at s[close]."""
    depth = 0
    for k in range(close, -1, -1):
        if s[k] == ")":
            depth += 1
        elif s[k] == "(":
            depth -= 1
            if depth == 0:
                return k
    return -1


def function_name(header):
    """The name of the function whose signature `header` is (the text before its body's '{'),
    or None when it is not a function signature."""
    h = re.sub(r"^\s*(?:(?:public|private|protected)\s*:)+", "", header)
    m = CTOR_INIT_RE.search(h)
    if m:
        h = h[:m.start() + 1]
    else:
        arrow = h.rfind("->")
        if arrow > 0 and h[:arrow].rstrip().endswith(")") and not re.search(r"[;{}]", h[arrow:]):
            h = h[:arrow]  # a trailing return type
        h = strip_qualifiers(h)
    if not h.endswith(")"):
        return None
    open_ = matching_open(h, len(h) - 1)
    if open_ <= 0:
        return None
    before = h[:open_].rstrip()
    if before.endswith("]"):
        return "<lambda>"
    if before.endswith("operator()"):
        name = re.search(r"([\w:~]*operator\(\))$", before).group(1)
    else:
        nm = re.search(r"([\w:~]*operator\s*[^\s\w(]+|[\w:~]+)\s*(?:<[^<>]*>)?$", before)
        if not nm:
            return None
        name = nm.group(1)
    if name.split("::")[-1] in CONTROL or name in ("", "::"):
        return None
    return name


def functions(text):
    """[(name, first line, last line)] of the function bodies at namespace or class scope (a
    function's lambdas and local classes are part of it)."""
    s = strip_code(text)
    found = []
    # per open brace: 'function' (a body), 'inner' (a brace inside a body), 'init' (a brace
    # initialiser in a parameter list or a constructor's init list), 'other' (namespace, class, ...)
    stack = []
    boundary = 0  # where the current declaration's text starts
    in_body = False
    for m in re.finditer(r"[{};]", s):
        i, c = m.start(), m.group(0)
        if in_body:
            if c == "{":
                stack.append("inner")
            elif c == "}" and stack.pop() == "function":
                in_body = False
                name, first, _ = found[-1]
                found[-1] = (name, first, s.count("\n", 0, i) + 1)
                boundary = i + 1
        elif c == ";":
            boundary = i + 1
        elif c == "{":
            header = s[boundary:i]
            if header.count("(") > header.count(")") or (
                    CTOR_INIT_RE.search(header) and re.search(r"[\w>]\s*$", header) and not re.search(r"\)\s*$", header)):
                stack.append("init")
                continue
            name = function_name(header)
            if name is None:
                stack.append("other")
                boundary = i + 1
                continue
            start = boundary + re.match(r"\s*(?:(?:public|private|protected)\s*:\s*)*", header).end()
            found.append((name, s.count("\n", 0, start) + 1, 0))
            stack.append("function")
            in_body = True
        elif (stack.pop() if stack else "other") != "init":  # c == "}"
            boundary = i + 1
    return [f for f in found if f[2] > 0]


def long_functions(root):
    """{'path:name': lines} of every function over MAX_FUNCTION_LINES (a name repeated in one file
    gets '#2', '#3', ... in the order of the file)."""
    out = {}
    for d in FUNCTION_DIRS:
        for rel in walk(root, d, C_EXTS):
            seen = {}
            for name, first, last in functions(read(root, rel) or ""):
                seen[name] = seen.get(name, 0) + 1
                key = f"{rel}:{name}" + (f"#{seen[name]}" if seen[name] > 1 else "")
                lines = last - first + 1
                if lines > MAX_FUNCTION_LINES:
                    out[key] = (lines, first)
    return out


def check_functions(root, allowed):
    problems, notes = [], []
    found = long_functions(root)
    for key, (lines, first) in sorted(found.items()):
        path = key.split(":")[0]
        if key not in allowed:
            problems.append(f"{path}:{first}: {key.split(':', 1)[1]} is {lines} lines "
                            f"(at most {MAX_FUNCTION_LINES}; split it by meaning)")
        elif lines > allowed[key]:
            problems.append(f"{path}:{first}: {key.split(':', 1)[1]} grew to {lines} lines "
                            f"(allowed {allowed[key]} until it is split; issue 31)")
    for key in sorted(set(allowed) - set(found)):
        notes.append(f"{key} is no longer over {MAX_FUNCTION_LINES} lines: drop it from ALLOWED_LONG_FUNCTIONS")
    for key in sorted(set(allowed) & set(found)):
        if found[key][0] < allowed[key]:
            notes.append(f"{key} is {found[key][0]} lines now: lower its allowance ({allowed[key]})")
    return problems, notes


# ---------------------------------------------------------------------------------------------
# (d) backend comparisons outside the choice

BACKEND_CMP_RE = re.compile(r"\bbackend\s*(?:\(\s*\))?\s*[!=]=|[!=]=\s*Backend\s*::|\bBackend\s*::\s*\w+\s*[!=]=")


def check_backends(root):
    problems = []
    for d in LIBRARY_DIRS:
        for rel in walk(root, d, C_EXTS):
            # src/io/ is the io library: a client of the public API (Plan::backend()), as tools/ is.
            if rel == BACKEND_CHOOSER or rel.startswith("src/io/"):
                continue
            s = strip_code(read(root, rel) or "")
            for m in BACKEND_CMP_RE.finditer(s):
                line = s.count("\n", 0, m.start()) + 1
                problems.append(f"{rel}:{line}: compares a backend ('{m.group(0).strip()}'); outside "
                                f"{BACKEND_CHOOSER} ask the plan's BackendOps (a call or a property it states)")
    return problems


# ---------------------------------------------------------------------------------------------

def check(root, allowed_functions, allowed_includes, strict):
    problems, notes = [], []
    problems += [("citations", p) for p in check_citations(root)]
    inc_problems, stale_includes = check_includes(root, allowed_includes)
    problems += [("includes", p) for p in inc_problems]
    notes += [f"{k}: no longer included; drop it from ALLOWED_PRIVATE_INCLUDES" for k in stale_includes]
    fn_problems, fn_notes = check_functions(root, allowed_functions)
    problems += [("functions", p) for p in fn_problems]
    notes += fn_notes
    problems += [("backends", p) for p in check_backends(root)]
    if strict:
        problems += [("allowlist", n) for n in notes]
        notes = []
    return problems, notes


def self_test(repo):
    """The positive controls: the faults planted in tests/house_fixtures/ are found, and what is
    fine there is not flagged."""
    fixtures = os.path.join(repo, FIXTURES)
    problems, _ = check(fixtures, {"src/long.cpp:allowed_but_grew": 151}, set(), strict=False)
    text = "\n".join(p for _, p in problems)
    expect = [  # (what must be reported, why)
        ("src/long.cpp:4: too_long is 151 lines", "a function of 151 lines"),
        ("allowed_but_grew grew to 152 lines", "a listed function that grew"),
        ("Widget::Widget is 151 lines", "a constructor with a brace-initialised member"),
        ("Widget::operator() is 151 lines", "an operator() defined in its class"),
        ("tools/bad_tool.cpp:3: includes the private header src/internal/error.hpp", "a private include"),
        ("tools/bad_tool.cpp:5: includes the private header simd/kernels.hpp", "a private include"),
        ("examples/bad_example.c:2: includes the private header hip/gpu_compat.hpp", "a private include"),
        ("docs/design.md has no section 3 ", "a citation of a missing section"),
        ("docs/design.md has no section 2.2", "a citation of a missing subsection"),
        ("docs/design.md has no section 5", "a missing section in a list"),
        ("does not lead to docs/design.md", "a markdown link to the wrong file"),
        ("cites the old contract", "the old citation form"),
        ("src/dispatch.cpp:6: compares a backend ('backend ==')", "a backend comparison outside the choice"),
        ("src/dispatch.cpp:7: compares a backend ('backend() !=')", "a comparison of Plan::backend()"),
        ("src/dispatch.cpp:8: compares a backend ('Backend::reference ==')", "a comparison written the other way round"),
    ]
    refuse = [  # (must not be reported, why)
        ("exactly_150", "a function of exactly 150 lines"),
        ("not_a_function", "braces of an if, a struct, an array"),
        ("rnncore/rnncore.hpp", "a public include"),
        ("local_header.h", "a tool's own header"),
        ("no section 1 ", "a citation of an existing section"),
        ("no section 2.1", "a citation of an existing subsection"),
        ("no section 4", "a range whose ends exist"),
        ("src/good.cpp", "a file without faults"),
        ("src/plan.cpp:3", "a backend comparison in the file that chooses the backend"),
        ("src/dispatch.cpp:3:", "a backend comparison in a comment"),
        ("src/dispatch.cpp:9:", "a backend assigned, not compared"),
    ]
    failures = [f"not found: {why} ('{s}')" for s, why in expect if s not in text]
    failures += [f"wrongly reported: {why} ('{s}')" for s, why in refuse if s in text]
    if failures:
        print("check_house self-test FAILED; the check reported:\n  " + "\n  ".join(text.splitlines()))
        print("\n".join(failures))
        return 1
    print(f"check_house self-test: the {len(expect)} planted faults are found, the {len(refuse)} controls are not flagged")
    return 0


def main(argv):
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description="Check rnncore's house rules (docs/design.md §1).")
    ap.add_argument("--root", default=here, help="the tree to check (default: this repository)")
    ap.add_argument("--strict", action="store_true", help="allowlist entries that no longer apply fail too")
    ap.add_argument("--self-test", action="store_true", help="run the positive controls in tests/house_fixtures/")
    ap.add_argument("--list-functions", metavar="FILE", help="print the functions the scanner sees in FILE")
    args = ap.parse_args(argv)
    if args.list_functions:
        with open(args.list_functions, encoding="utf-8") as fh:
            for name, first, last in functions(fh.read()):
                print(f"{first:6d} {last - first + 1:5d} {name}")
        return 0
    if args.self_test:
        return self_test(here)
    problems, notes = check(os.path.abspath(args.root), ALLOWED_LONG_FUNCTIONS, ALLOWED_PRIVATE_INCLUDES, args.strict)
    for n in notes:
        print(f"note: {n}")
    if problems:
        print(f"house rules broken ({len(problems)}):")
        for rule, p in problems:
            print(f"  [{rule}] {p}")
        return 1
    print("house rules hold: design citations resolve, tools/, examples/ and python/ include public headers only, "
          f"no function over {MAX_FUNCTION_LINES} lines beyond the allowlist, "
          f"backends compared only in {BACKEND_CHOOSER}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
