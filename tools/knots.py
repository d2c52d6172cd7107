#!/usr/bin/env python3
"""tools/knots.py: the include and link knots of the tree, as a check that can fail.

  tools/knots.py [--build DIR]

Three rules, each printed as one line per breach; exit 1 when any is broken, 0 when none:
1. The directories (model/, costmodel/, sim/, traces/, plots/ and each exec/<part>/) include
   each other's headers without a cycle.
2. A header whose opening comment says it is "Internal to" or "Private to" its directory is
   included from that directory only.
3. With --build DIR (a built tree): no two object files of the libraries and programs refer to
   each other's symbols, directly or round a longer loop (the strongly connected components of
   the "uses a symbol defined in" graph, from nm).
Tests, benchmarks, fuzz targets and tools are leaves and are not looked at."""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOP = ["model", "costmodel", "sim", "traces", "plots", "exec"]
SOURCES = (".c", ".h", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def module_dir(path):
    """model/graph.c -> model; exec/pipeline/pipe_mem.c -> exec/pipeline."""
    parts = os.path.relpath(path, ROOT).split(os.sep)
    return "/".join(parts[:2]) if parts[0] == "exec" else parts[0]


def tree_files():
    files = []
    for top in TOP:
        for d, _, names in os.walk(os.path.join(ROOT, top)):
            files += [os.path.join(d, n) for n in names if n.endswith(SOURCES)]
    return sorted(files)


def sccs(nodes, edges):
    """Tarjan's strongly connected components with more than one node (or a self-loop)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def include_rules(files):
    by_name = {}
    for f in files:
        by_name.setdefault(os.path.basename(f), []).append(f)
    edges, why, breaches = {}, {}, []
    for f in files:
        text = open(f, encoding="utf-8", errors="replace").read()
        for inc in INCLUDE.findall(text):
            targets = by_name.get(os.path.basename(inc), [])
            if len(targets) != 1:
                continue  # a generated header (config.h) or a system one
            t = targets[0]
            a, b = module_dir(f), module_dir(t)
            if a == b:
                continue
            edges.setdefault(a, set()).add(b)
            why.setdefault((a, b), os.path.relpath(f, ROOT) + " includes " + inc)
            head = open(t, encoding="utf-8", errors="replace").read(600)
            if re.search(r"\b(Internal|Private) to\b", head.split("*/")[0]):
                breaches.append("private header: %s includes %s, private to %s/" %
                                (os.path.relpath(f, ROOT), inc, b))
    for comp in sccs(set(edges) | {b for s in edges.values() for b in s}, edges):
        links = ["%s (%s)" % (a + " -> " + b, why[(a, b)]) for a in comp for b in comp
                 if b in edges.get(a, ())]
        breaches.append("include cycle among %s: %s" % (", ".join(comp), "; ".join(links)))
    return breaches


def nm_symbols(obj):
    out = subprocess.run(["nm", "--format=posix", obj], capture_output=True, text=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) < 2:
            continue
        name, kind = f[0], f[1]
        if kind == "U":
            used.add(name)
        elif kind in ("T", "D", "B", "R", "V", "W", "G", "S", "C"):
            defined.add(name)
    return defined, used


def link_rules(build):
    objs = []
    for d, _, names in os.walk(build):
        rel = os.path.relpath(d, build).split(os.sep)[0]
        if rel in ("tests", "bench", "meson-private", "meson-logs") or "fuzz" in d:
            continue
        objs += [os.path.join(d, n) for n in names if n.endswith(".o")]
    owner, uses = {}, {}
    for o in objs:
        name = os.path.relpath(o, build)
        defined, used = nm_symbols(o)
        uses[name] = used
        for s in defined:
            owner.setdefault(s, set()).add(name)
    edges = {}
    for o, used in uses.items():
        for s in used:
            for d in owner.get(s, ()):
                if d != o:
                    edges.setdefault(o, set()).add(d)
    breaches = []
    for comp in sccs(set(uses), edges):
        breaches.append("objects use each other's symbols: " + ", ".join(comp))
    return breaches


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", help="a built tree, for the object files' symbols")
    a = ap.parse_args()
    breaches = include_rules(tree_files())
    if a.build:
        breaches += link_rules(a.build)
    for b in breaches:
        print(b)
    if not breaches:
        print("no knots: directory includes acyclic, private headers kept private%s" %
              (", objects acyclic" if a.build else ""))
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
